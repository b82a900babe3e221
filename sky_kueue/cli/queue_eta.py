"""``sky-kueue queue``'s ETA for pending Workloads, and where its run times came from.

Why in the queue too: ``launch --dry-run`` says when a new task would be admitted and on
what the estimate rests (``ETA 1h (declared)``); a user whose job already waits asks the
same of ``queue``. The estimate is the ETA model's (:func:`sky_kueue.kueue.eta.estimate`,
which lets the quota holders expected to finish first finish, as Kueue requeues parked
Workloads when quota frees), on the run times the admin policy wrote on the task's pods and
joined onto their Workloads (:mod:`sky_kueue.skypilot.runtime_annotations`). An ETA that
depends on a job without a run time is *unknown* and says why, never guessed.

Pure: documents in, ETAs out (the command fetches and prints).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sky_kueue.kueue import eta as model_eta
from sky_kueue.kueue import objects as o
from sky_kueue.kueue.errors import ModelError
from sky_kueue.mirror.view import QueueView, model_state
from sky_kueue.skypilot.runtime_estimate import describe_basis

#: What an unknown ETA says, by the start of the ETA model's reason.
NO_RUN_TIMES = "no run times"
#: When every quota holder of its cohort tree finishes and it still does not fit: no run time
#: would change that, so it must not read as a missing run time.
NEVER_FITS = "never fits: nothing in its cohort frees room"
NOT_QUEUED = "not queued"
_SECONDS_PER_MINUTE = 60
_MINUTES_PER_HOUR = 60


@dataclass(frozen=True)
class PendingEta:
    """One pending Workload's predicted wait: ``seconds`` and its ``basis`` (where the run
    times it waited on came from), or None with ``unknown_reason``."""

    seconds: float | None
    basis: str = ""
    unknown_reason: str = ""

    def text(self) -> str:
        """``ETA 12m (declared)``, ``ETA now``, ``ETA unknown: no run times``."""
        if self.seconds is None:
            return f"ETA unknown: {self.unknown_reason}"
        if self.seconds <= 0 and not self.basis:
            return "ETA now"
        return f"ETA {duration_text(self.seconds)}" + (f" ({self.basis})" if self.basis else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "seconds": None if self.seconds is None else round(self.seconds),
            "basis": self.basis or None,
            "unknownReason": self.unknown_reason or None,
            "text": self.text(),
        }


def duration_text(seconds: float) -> str:
    """``45s``, ``12m``, ``2h05m``: a wait as people say it."""
    whole = round(seconds)
    if whole < _SECONDS_PER_MINUTE:
        return f"{whole}s"
    minutes = round(whole / _SECONDS_PER_MINUTE)
    if minutes < _MINUTES_PER_HOUR:
        return f"{minutes}m"
    hours, rest = divmod(minutes, _MINUTES_PER_HOUR)
    return f"{hours}h{rest:02d}m" if rest else f"{hours}h"


def from_model(estimate: model_eta.Eta) -> PendingEta:
    """The ETA model's answer in the queue's words."""
    if estimate.seconds is not None:
        return PendingEta(estimate.seconds, describe_basis(estimate.runtime_sources))
    reason = estimate.reason
    if reason.startswith(model_eta.NO_KNOWN_RUNTIME_REASON):
        return PendingEta(None, unknown_reason=NO_RUN_TIMES if estimate.waits_on_unknown_runtime else NEVER_FITS)
    if reason.startswith("not a pending workload"):
        return PendingEta(None, unknown_reason=NOT_QUEUED)
    return PendingEta(None, unknown_reason=reason or "no estimate")


def pending_keys(view: QueueView) -> list[str]:
    """The pending Workloads the view shows."""
    return [row.key for cq in view.cluster_queues for row in cq.pending]


def pending_etas(
    docs: Sequence[Mapping[str, Any]],
    keys: Iterable[str],
    *,
    now: datetime,
    config: o.KueueConfig | None = None,
) -> tuple[dict[str, PendingEta], list[str]]:
    """ETAs of ``keys`` (``namespace/name``) on the cluster ``docs`` describe, and notes.

    ``docs`` are the model's documents with the pods' run-time annotations joined on.
    A cluster the model cannot read gives no ETA and a note (the view still shows).
    """
    wanted = list(keys)
    if not wanted:
        return {}, []
    try:
        state, _raw, _notes = model_state(docs, config, now)
        estimates = model_eta.estimate(state, wanted, model_eta.runtime_from_annotation(), now)
    except ModelError as exc:
        return {}, [f"ETA unavailable: {exc}"]
    return {key: from_model(estimates[key]) for key in wanted if key in estimates}, []


@dataclass(frozen=True)
class QueuePicture:
    """What ``queue`` shows of one cluster: the view and the pending Workloads' ETAs."""

    view: QueueView
    etas: Mapping[str, PendingEta]

    def to_json(self) -> dict[str, Any]:
        """The view's document with ``eta`` on every pending row (None: not estimated)."""
        document = self.view.to_json()
        for cq in document["clusterQueues"]:
            for row in cq["pending"]:
                eta = self.etas.get(row["workload"])
                row["eta"] = eta.to_json() if eta is not None else None
        return document
