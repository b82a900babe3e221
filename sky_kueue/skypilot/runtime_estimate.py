"""How long a task will hold its quota once Kueue admits it, from what users already have.

Why: the ETA model (:mod:`sky_kueue.kueue.eta`) can only say when a queued task is admitted
if it knows when the quota holders ahead of it finish; without run times every wait is
"unknown" and a cluster with jobs queued ahead ranks like an empty one. Kueue itself keeps no
run-time expectation (a Workload has a creation time and conditions, not a duration), and
SkyPilot 0.14.1's task schema has no expected-duration field either (``sky/utils/schemas.py``:
``kubernetes.dws.max_run_duration`` is a DWS provisioning *limit*, not an expectation), so
the estimate comes from, in order:

1. **declared**: the task's own label :data:`RUNTIME_LABEL` on its resources
   (``sky-kueue.io/expected-runtime: 90m``; ``2h``, ``1h30m``, ``45s`` or plain seconds);
2. **history**: the median run of the team's finished jobs of the same name, as the
   controller recorded them (each run: the last admission to the finish of the job; see
   :func:`sky_kueue.skypilot.runtime_history.past_runs`);
3. **none**: no estimate; the ETA then treats the job as running past its horizon.

The policy writes the result onto the task's pods (:data:`~sky_kueue.skypilot.labels.RUNTIME_SECONDS_ANNOTATION`
and :data:`~sky_kueue.skypilot.labels.RUNTIME_SOURCE_ANNOTATION`); Kueue does not copy pod
annotations onto a pod group's Workload (``pkg/controller/jobs/pod/pod_controller.go``,
``constructPodSet`` keeps only the spec), so the cluster view joins them back by pod group.

Pure: past runs are an argument; reading them is the edge's job.
"""

from __future__ import annotations

import enum
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sky_kueue.skypilot.labels import RUNTIME_LABEL

#: Longest run time a declaration may state (a typo such as ``900h`` is caught, not believed).
MAX_DECLARED_RUNTIME_SECONDS = 90 * 24 * 3600
#: How many of the most recent finished runs the history median uses.
HISTORY_MAX_RUNS = 20
#: Fewest finished runs the history needs before it is believed.
HISTORY_MIN_RUNS = 1

_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_PLAIN_SECONDS = re.compile(r"^\d+(\.\d+)?$")
_WITH_UNITS = re.compile(r"^(?:\d+(?:\.\d+)?[smhd])+$")
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_SOURCE_TEXT = re.compile(r"^history\(n=(\d+)\)$")


class RuntimeSourceKind(enum.Enum):
    """Where an expected run time came from."""

    DECLARED = "declared"
    HISTORY = "history"
    NONE = "none"


class RuntimeDeclarationError(ValueError):
    """A declared run time that cannot be read; the message is one line naming the label."""


@dataclass(frozen=True)
class PastRun:
    """One finished run of a job, as the controller recorded it.

    Attributes:
        namespace: the namespace its Workload ran in.
        job_name: the SkyPilot job (task) name.
        run_seconds: from its last admission to its finish.
        finished_at: POSIX seconds (newest runs count first).
    """

    namespace: str
    job_name: str
    run_seconds: float
    finished_at: float


@dataclass(frozen=True)
class RuntimeEstimate:
    """An expected run time and where it came from.

    Attributes:
        seconds: the estimate (None with source ``none``).
        kind: the source.
        runs: how many past runs the history median used (0 otherwise).
    """

    seconds: int | None
    kind: RuntimeSourceKind
    runs: int = 0

    @property
    def source(self) -> str:
        """The source as written on the pod annotation: ``declared``, ``history(n=7)``, ``none``."""
        if self.kind is RuntimeSourceKind.HISTORY:
            return f"history(n={self.runs})"
        return self.kind.value


#: No estimate.
NO_ESTIMATE = RuntimeEstimate(None, RuntimeSourceKind.NONE)


def parse_duration(text: str, where: str = RUNTIME_LABEL) -> int:
    """Seconds of ``90m``, ``2h``, ``1h30m``, ``45s``, ``1.5h`` or plain ``5400``.

    Raises:
        RuntimeDeclarationError: anything else, zero, or more than
            :data:`MAX_DECLARED_RUNTIME_SECONDS` (the message names ``where``).
    """
    raw = str(text).strip().lower()
    if _PLAIN_SECONDS.match(raw):
        seconds = float(raw)
    elif _WITH_UNITS.match(raw):
        seconds = sum(float(amount) * _UNIT_SECONDS[unit] for amount, unit in _PART.findall(raw))
    else:
        raise RuntimeDeclarationError(
            f"{where}: {text!r} is not a duration; write seconds (5400) or a number with s, m, h or d (90m, 2h, 1h30m)"
        )
    if seconds <= 0:
        raise RuntimeDeclarationError(f"{where}: {text!r} must be more than 0 seconds")
    if seconds > MAX_DECLARED_RUNTIME_SECONDS:
        raise RuntimeDeclarationError(
            f"{where}: {text!r} is more than {MAX_DECLARED_RUNTIME_SECONDS // 86400} days; is the unit right?"
        )
    return round(seconds)


def source_description(source: str, seconds: float | None = None) -> str:
    """A source annotation in words: ``declared``, ``history of 7 runs``, ``no estimate``."""
    match = _SOURCE_TEXT.match(source)
    if match is not None:
        count = int(match.group(1))
        return f"history of {count} run{'s' if count != 1 else ''}"
    if source == RuntimeSourceKind.DECLARED.value:
        return "declared"
    if source == RuntimeSourceKind.NONE.value:
        return "no estimate"
    return source


def written_estimate(seconds: object, source: object) -> RuntimeEstimate | None:
    """The estimate the policy wrote on a task's pods earlier (None: none, or unreadable).

    Why: SkyPilot may apply the policy to a task it already rewrote (the API server after a
    client, a relaunch); the label is gone by then, the annotations say what was decided.
    """
    if seconds is None:
        return None
    try:
        value = parse_duration(str(seconds))
    except RuntimeDeclarationError:
        return None
    match = _SOURCE_TEXT.match(str(source or ""))
    if match is not None:
        return RuntimeEstimate(value, RuntimeSourceKind.HISTORY, runs=int(match.group(1)))
    return RuntimeEstimate(value, RuntimeSourceKind.DECLARED)


def describe_basis(sources: Iterable[str]) -> str:
    """Where the run times behind an ETA came from, in words (``declared and history of 7 runs``).

    Args:
        sources: one source annotation per job the ETA waits for (repeats are said once).
    """
    seen: list[str] = []
    for source in sources:
        text = source_description(source)
        if text not in seen:
            seen.append(text)
    return " and ".join(seen)


def estimate_runtime(
    declared: Iterable[str],
    job_name: str | None,
    namespaces: Iterable[str],
    past: Sequence[PastRun],
) -> RuntimeEstimate:
    """The expected run time of a task: declared, else the team's history, else none.

    Args:
        declared: the values of :data:`RUNTIME_LABEL` over the task's candidates (every
            candidate must say the same; empty: not declared).
        job_name: the task's name (None or empty: no history match is possible).
        namespaces: the team's namespaces (a past run elsewhere is another team's).
        past: finished runs, any order.

    Raises:
        RuntimeDeclarationError: a declaration cannot be read, or candidates disagree.
    """
    values = {str(v).strip() for v in declared if v is not None and str(v).strip()}
    parsed = {parse_duration(v) for v in sorted(values)}
    if len(parsed) > 1:
        raise RuntimeDeclarationError(
            f"{RUNTIME_LABEL}: the task's candidates declare different run times ({', '.join(sorted(values))}); "
            "declare one"
        )
    if parsed:
        return RuntimeEstimate(parsed.pop(), RuntimeSourceKind.DECLARED)
    if not job_name:
        return NO_ESTIMATE
    team_namespaces = set(namespaces)
    similar = sorted(
        (r for r in past if r.job_name == job_name and r.namespace in team_namespaces and r.run_seconds > 0),
        key=lambda r: r.finished_at,
        reverse=True,
    )[:HISTORY_MAX_RUNS]
    if len(similar) < HISTORY_MIN_RUNS:
        return NO_ESTIMATE
    median = statistics.median(r.run_seconds for r in similar)
    return RuntimeEstimate(max(1, round(median)), RuntimeSourceKind.HISTORY, runs=len(similar))
