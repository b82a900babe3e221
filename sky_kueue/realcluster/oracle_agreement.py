"""How far what the live Kueue did agrees with a recorded (or predicted) oracle outcome.

The recorded oracle (``tests/oracle/README.md``) is cycle by cycle: Kueue's scheduler fed
directly, with a fixed clock and the cluster made quiescent between cycles. A live cluster
schedules continuously, so the only decisions that are comparable one to one are the settled
ones: which workloads end admitted (and on which ClusterQueue and flavors), which were
preempted (by whom, for which reason) and which stay pending. This module compares exactly
those, as sets, and says what differs; it never decides *why* (that needs Kueue's source,
see docs/model-coverage.md, "Against the live Kueue").

Pure: no Kubernetes, no files; both sides are the oracle's JSON shapes (``expected/*.json``,
``sky-kueue predict --output json``) and :class:`LiveOutcome`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The ``final`` lists every oracle outcome has.
FINAL_KEYS = ("admitted", "preempted", "pending")


@dataclass(frozen=True)
class LiveAdmission:
    """A quota reservation the live Kueue made during the replay."""

    cluster_queue: str
    #: pod set -> resource -> flavor, as the oracle's ``cycles[i].admitted`` spells it
    pod_sets: dict[str, dict[str, str]]
    #: seconds after the ClusterQueues were released
    at_seconds: float


@dataclass(frozen=True)
class LivePreemption:
    """An eviction for preemption the live Kueue made (the replay then deleted the victim)."""

    by: str
    reason: str
    at_seconds: float


@dataclass
class LiveOutcome:
    """What the live Kueue did with one scenario, in the oracle's terms."""

    admitted: dict[str, LiveAdmission] = field(default_factory=dict)
    preempted: dict[str, LivePreemption] = field(default_factory=dict)
    #: workload -> its last ``QuotaReserved=False`` message ("" when Kueue wrote none)
    pending: dict[str, str] = field(default_factory=dict)
    #: workloads admitted in the scenario file (never re-decided unless preempted)
    initially_admitted: tuple[str, ...] = ()
    #: seconds from the release until the last change Kueue made
    settle_seconds: float = 0.0

    def final(self) -> dict[str, list[str]]:
        """The settled state in the oracle's ``final`` shape."""
        admitted = (set(self.initially_admitted) | set(self.admitted)) - set(self.preempted)
        return {
            "admitted": sorted(admitted),
            "preempted": sorted(self.preempted),
            "pending": sorted(self.pending),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "final": self.final(),
            "admissions": {
                key: {
                    "clusterQueue": adm.cluster_queue,
                    "podSets": adm.pod_sets,
                    "atSeconds": round(adm.at_seconds, 3),
                }
                for key, adm in sorted(self.admitted.items(), key=lambda kv: kv[1].at_seconds)
            },
            "preemptions": {
                key: {"by": pre.by, "reason": pre.reason, "atSeconds": round(pre.at_seconds, 3)}
                for key, pre in sorted(self.preempted.items(), key=lambda kv: kv[1].at_seconds)
            },
            "pending": dict(sorted(self.pending.items())),
            "settleSeconds": round(self.settle_seconds, 3),
        }


@dataclass(frozen=True)
class Agreement:
    """The comparison of the live outcome with one reference outcome."""

    #: the settled admitted/preempted/pending sets are equal
    final_agrees: bool
    #: also every admission's ClusterQueue and flavors and every preemptor and reason
    decisions_agree: bool
    #: one line per difference, reference first: what differs and how
    differences: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "finalAgrees": self.final_agrees,
            "decisionsAgree": self.decisions_agree,
            "differences": list(self.differences),
        }


def reference_decisions(outcome: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A recorded outcome's admissions and preemptions over all its cycles (the last one wins:
    a workload admitted in a cycle and preempted later keeps its admission's flavors)."""
    admitted: dict[str, Any] = {}
    preempted: dict[str, Any] = {}
    for cycle in outcome.get("cycles", []):
        admitted.update(cycle.get("admitted", {}))
        preempted.update(cycle.get("preempted", {}))
    return admitted, preempted


def compare(live: LiveOutcome, reference: dict[str, Any], name: str, live_name: str = "live") -> Agreement:
    """Compare ``live`` with ``reference`` (an oracle outcome, recorded or predicted).

    Args:
        live: what the live Kueue did.
        reference: an ``expected/*.json`` or ``predict --output json`` document.
        name: how the differences name the reference (``recorded``, ``predict``).
        live_name: how they name ``live`` (``harness`` when Kueue's scheduler ran in the harness).
    """
    differences: list[str] = []
    live_final = live.final()
    ref_final = reference["final"]
    for key in FINAL_KEYS:
        ref_set, live_set = set(ref_final[key]), set(live_final[key])
        if ref_set - live_set:
            differences.append(f"{key} only in {name}: {', '.join(sorted(ref_set - live_set))}")
        if live_set - ref_set:
            differences.append(f"{key} only {live_name}: {', '.join(sorted(live_set - ref_set))}")
    final_agrees = not differences
    ref_admitted, ref_preempted = reference_decisions(reference)
    for key in sorted(set(ref_admitted) & set(live.admitted)):
        want, got = ref_admitted[key], live.admitted[key]
        if want["clusterQueue"] != got.cluster_queue or want["podSets"] != got.pod_sets:
            differences.append(
                f"flavors of {key}: {name} {want['clusterQueue']} {_flavors(want['podSets'])}, "
                f"{live_name} {got.cluster_queue} {_flavors(got.pod_sets)}"
            )
    for key in sorted(set(ref_preempted) & set(live.preempted)):
        want_p, got_p = ref_preempted[key], live.preempted[key]
        if (want_p["by"], want_p["reason"]) != (got_p.by, got_p.reason):
            differences.append(
                f"preemption of {key}: {name} by {want_p['by']} ({want_p['reason']}), "
                f"{live_name} by {got_p.by} ({got_p.reason})"
            )
    return Agreement(final_agrees, not differences, tuple(differences))


def _flavors(pod_sets: dict[str, dict[str, str]]) -> str:
    return "; ".join(
        f"{pod_set}: " + ",".join(f"{res}={flavor}" for res, flavor in sorted(flavors.items()))
        for pod_set, flavors in sorted(pod_sets.items())
    )
