"""The ``safe-place`` recipe live: a twice-preempted relaunch is held until it fits nominal quota
at its protected level, released there while Kueue still sees its team borrowing, and protected.

The recipe (``sky_kueue.sim.policies``, ``safe-place``): ``keep-place`` with one protected level
granted after the 2nd preemption, only within nominal quota (``protect_within_nominal``), and
the team's safe-relaunch hold after its 2nd preemption whether or not a safe place is
predicted (``hold_only_when_predicted: false``).

The cluster of ``test_live_hold``: team-a (prod, 6 CPU nominal, reclaims) and team-b (dev, 4 CPU
nominal) share a cohort. team-b's ``plain`` job (2 CPU) runs for the whole test and is never
preempted; its ``dev`` job (4 CPU) borrows and is reclaimed by team-a's ``train`` (6 CPU) twice,
each time as team-b's newest admission at the plain level 99. The second relaunch is held:

1. while ``train`` runs, Kueue would not admit it at all (2 CPU free in the cohort);
2. once ``train`` finishes Kueue would admit it, borrowing team-a's idle quota, but team-b's
   ``urgent`` job (prod class, 2 CPU, admitted at 999) holds nominal quota at 100 or above:
   4 + 2 > 4 at the protected level 100, so it stays held;
3. once ``urgent`` finishes it fits 4 CPU nominal quota at 100 (``plain`` is at 99, below it),
   so it is released, although Kueue's own borrowing flag still says it borrows (plain's 2 + 4 >
   4). Kueue admits it, the controller grants it the protected level 100 and ``plain`` stays at
   99: the next reclaim takes ``plain`` first.

With ``protect_within_nominal`` off the hold goes by Kueue's borrowing flag: in step 3 the
relaunch stays held (team-b would borrow) until ``plain`` finishes or the hold times out.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from pathlib import Path
from typing import Any

from sky_kueue.controller.actuators import BAND_LEVEL_ANNOTATION
from sky_kueue.controller.aging import AgingSettings
from sky_kueue.controller.aging.safe_relaunch import SafeRelaunchSettings
from sky_kueue.controller.hold import HOLD_ANNOTATION, HoldAction, HoldReason, HoldTeams, TeamHold
from sky_kueue.kueue.scheduler import Engine
from sky_kueue.kueue.whatif import QuickVerdict, quick_verdict
from sky_kueue.mirror import export

from .live_support import WORKLOADS, Live, group_pod, held_quota, live_sandbox
from .test_live_hold import cli_output, hold_setup

DEV_CLASS = 100
PROTECTED, PLAIN_LEVEL = DEV_CLASS, DEV_CLASS - 1
#: The safe-place recipe's aging settings (sky_kueue.sim.policies' SAFE_PLACE_* values).
SAFE_PLACE = AgingSettings(
    policy="keep-place", protect_levels=1, protect_after_preemptions=2, protect_within_nominal=True
)
#: The recipe's safe-relaunch settings for the team (sky_kueue.sim.policies.SAFE_PLACE_RELAUNCH).
SAFE_PLACE_RELAUNCH = SafeRelaunchSettings(safe_after_preemptions=2, hold_only_when_predicted=False)
DEV, PLAIN, URGENT = "dev-1-fcd1e5cf", "plain-2-fcd1e5cf", "urgent-5-fcd1e5cf"
#: How long each train job and team-b's urgent job run (seconds of the sandbox clock).
TRAIN_RUN_SECONDS = 300
URGENT_RUN_SECONDS = 600
KUEUE_KINDS = (
    "resourceflavors.kueue.x-k8s.io",
    "workloadpriorityclasses.kueue.x-k8s.io",
    "clusterqueues.kueue.x-k8s.io",
    "localqueues.kueue.x-k8s.io",
    "namespaces",
    WORKLOADS,
)


def _holds() -> HoldTeams:
    return HoldTeams({"team-b": TeamHold("team-b", SAFE_PLACE_RELAUNCH)})


def _read(live: Live, name: str) -> dict[str, Any]:
    found = live.workload("team-b", name)
    assert found is not None, name
    return found


def _kueue_verdict_for_dev(live: Live) -> QuickVerdict:
    """What Kueue would do with dev now were it active (the model over the sandbox's objects)."""
    docs = [dict(doc) for kind in KUEUE_KINDS for doc in live.sandbox.store.list(kind).items]
    for doc in docs:
        if doc.get("kind") == "Workload" and doc["metadata"]["name"] == DEV:
            doc["spec"] = {**doc["spec"], "active": True}
    now = datetime.datetime.fromtimestamp(live.now(), tz=datetime.timezone.utc)
    state = export.cluster_state(docs, now=now)
    return quick_verdict(Engine(state, now), state.workloads[f"team-b/{DEV}"])


def _hold_outcomes(live: Live) -> list[tuple[float, HoldAction, HoldReason | None, str]]:
    """The reconciles' hold outcomes for dev: when, what, why held and the decision's reason."""
    return [
        (e.at, e.outcome.hold.action, e.outcome.hold.hold_reason, e.outcome.hold.decision.reason)
        for e in live.recorder.snapshot()
        if e.outcome is not None
        and e.outcome.hold is not None
        and e.outcome.hold.decision is not None
        and e.detection is not None
        and e.detection.workload.name == DEV
    ]


def _reclaim(live: Live, train_id: str) -> None:
    """team-a's ``train`` reclaims dev's borrowed quota; SkyPilot relaunches dev."""
    live.apply(group_pod("train", train_id, "team-a", "prod-priority", "6", run_seconds=TRAIN_RUN_SECONDS))
    assert live.step(60).preempted == [f"team-b/{DEV}"]  # team-b's newest admission at 99
    assert live.step().admitted == [f"team-a/train-{train_id}-fcd1e5cf"]
    live.apply(group_pod("dev", "1", "team-b", "dev-priority", "4"))  # SkyPilot's relaunch
    live.step()


def _hold_the_twice_preempted_relaunch(live: Live) -> None:
    """plain and dev run (dev borrowing); train reclaims dev twice; the 2nd relaunch is held,
    then team-b's urgent job is admitted into team-b's nominal quota beside plain."""
    live.apply(group_pod("plain", "2", "team-b", "dev-priority", "2"))  # never finishes
    live.step()
    live.clock.advance(10)  # dev is admitted after plain, so a reclaim at 99 picks dev
    live.apply(group_pod("dev", "1", "team-b", "dev-priority", "4"))
    live.step()
    _reclaim(live, "3")
    assert _read(live, DEV)["spec"].get("active", True) is True  # one preemption: not held
    live.step(TRAIN_RUN_SECONDS)  # train finishes; Kueue readmits dev into team-a's idle quota
    live.step()
    assert held_quota(_read(live, DEV)) and _read(live, DEV)["spec"]["priority"] == PLAIN_LEVEL  # not yet protected
    _reclaim(live, "4")
    assert _read(live, DEV)["spec"]["active"] is False  # the 2nd relaunch is held
    live.apply(group_pod("urgent", "5", "team-b", "prod-priority", "2", run_seconds=URGENT_RUN_SECONDS))
    assert live.step().admitted == [f"team-b/{URGENT}"]  # plain's 2 + 2: within team-b's nominal quota
    assert _read(live, URGENT)["spec"]["priority"] >= PROTECTED
    live.step(TRAIN_RUN_SECONDS)  # train finishes: team-a's 6 CPU are idle again


def test_safe_place_holds_the_relaunch_until_it_fits_nominal_quota_at_its_protected_level(tmp_path: Path) -> None:
    with live_sandbox(tmp_path, setup=hold_setup()) as live:
        live.new_controller(SAFE_PLACE, gate=False, holds=_holds())
        _hold_the_twice_preempted_relaunch(live)
        (hold,) = live.history("1").holds
        held_at = hold.held_at
        assert hold.preemptions == 2 and not hold.released
        assert hold.workload_uid == _read(live, DEV)["metadata"]["uid"]
        # Kueue would admit dev now, borrowing; the hold is urgent's 2 CPU at 999 in nominal quota.
        verdict = _kueue_verdict_for_dev(live)
        assert verdict.kind.value == "admitted" and verdict.borrowing and not verdict.victims
        held = _read(live, DEV)
        assert held["spec"]["active"] is False and not held_quota(held)
        assert held["metadata"]["annotations"][HOLD_ANNOTATION] == (
            "held: waiting for nominal quota (predicted wait unknown); Kueue would not admit it now"
        )
        status_text = cli_output("controller", "status", "--state", str(live.state_path))
        status_json = json.loads(cli_output("controller", "status", "--state", str(live.state_path), "-o", "json"))

        live.step(URGENT_RUN_SECONDS - TRAIN_RUN_SECONDS)  # urgent finishes: nothing at 100+ in team-b-cq
        released = _read(live, DEV)
        assert released["spec"]["active"] is True
        assert HOLD_ANNOTATION not in (released["metadata"].get("annotations") or {})
        # Kueue's own flag still says dev would borrow: plain's 2 + dev's 4 > 4 nominal.
        verdict = _kueue_verdict_for_dev(live)
        assert verdict.kind.value == "admitted" and verdict.borrowing
        assert live.step().admitted == [f"team-b/{DEV}"]

        admitted, plain = _read(live, DEV), _read(live, PLAIN)
        (hold,) = live.history("1").holds
        outcomes = _hold_outcomes(live)
        notes = [n for e in live.recorder.snapshot() if e.outcome is not None for n in e.outcome.notes]
        status_after = json.loads(cli_output("controller", "status", "--state", str(live.state_path), "-o", "json"))

    assert held_quota(admitted) and held_quota(plain)
    assert admitted["spec"]["priority"] == PROTECTED and admitted["metadata"]["annotations"][BAND_LEVEL_ANNOTATION] == (
        "admitted"
    )
    assert plain["spec"]["priority"] == PLAIN_LEVEL  # never preempted: the plain level, a reclaim's first pick
    assert "protected level 100: fits nominal quota (ClusterQueue team-b-cq)" in notes

    # held when train had just reclaimed (no room at all), still held when train finished (room,
    # but over nominal quota at 100 with urgent), released when urgent finished
    assert hold.release_kind == "safe" and hold.released_at == held_at + URGENT_RUN_SECONDS
    assert hold.release_reason == "released: fits in nominal quota of this cluster after 10m held"
    actions = [(at - held_at, action) for at, action, _, _ in outcomes]
    assert actions[0] == (0, HoldAction.HELD) and outcomes[0][2] is HoldReason.NO_NOMINAL_QUOTA
    assert (TRAIN_RUN_SECONDS, HoldAction.STILL_HELD) in actions
    # The reason says which check holds it: Kueue would admit it, but not at its protected level.
    still_held_at = (TRAIN_RUN_SECONDS, HoldAction.STILL_HELD)
    (still_held,) = [reason for at, action, _, reason in outcomes if (at - held_at, action) == still_held_at]
    assert still_held.endswith(
        "; Kueue would admit it, but at protected level 100: ClusterQueue team-b-cq "
        "(cpu in flavor default-flavor: 4 asked + 2 held at priority 100 or above > 4 nominal)"
    ), still_held
    assert actions[-1] == (URGENT_RUN_SECONDS, HoldAction.RELEASED)
    assert [a for _, a in actions].count(HoldAction.RELEASED) == 1

    hold_column = " ".join(line.split("│")[-2] for line in status_text.splitlines() if line.count("│") > 8)
    assert "held: waiting for nominal quota (predicted wait unknown)" in " ".join(hold_column.split())
    (job,) = [j for j in status_json["jobs"] if j["job"] == "managed-job/1"]
    assert job["hold"]["workload_uid"] == hold.workload_uid and job["hold"]["preemptions"] == 2
    assert job["hold"]["released_at"] is None
    (job,) = [j for j in status_after["jobs"] if j["job"] == "managed-job/1"]
    assert [h["release_kind"] for h in job["holds"]] == ["safe"]


def test_without_protect_within_nominal_the_hold_waits_for_kueue_to_stop_borrowing(tmp_path: Path) -> None:
    with live_sandbox(tmp_path, setup=hold_setup()) as live:
        live.new_controller(dataclasses.replace(SAFE_PLACE, protect_within_nominal=False), gate=False, holds=_holds())
        _hold_the_twice_preempted_relaunch(live)
        live.step(URGENT_RUN_SECONDS - TRAIN_RUN_SECONDS)  # urgent finishes
        live.step()
        still = _read(live, DEV)
        (hold,) = live.history("1").holds
    assert still["spec"]["active"] is False and not held_quota(still)  # plain's 2 + 4 > 4: it would borrow
    assert not hold.released
