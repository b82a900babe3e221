"""Band policies: a job never leaves its class; relaunches rank ahead and are protected once readmitted."""

from __future__ import annotations

import pytest

from sky_kueue.controller import aging
from sky_kueue.controller.aging import AgingSettings, SettingsError
from sky_kueue.controller.aging.band import KEEP_PLACE, PROTECT, RANK, BandPolicy, check_class_gaps
from sky_kueue.controller.history import JobHistory, PreemptionRecord
from sky_kueue.controller.keys import EpisodeKey

SETTINGS = AgingSettings(rank_levels=8, protect_levels=8)
BASE = 100


def preempted(times: int) -> JobHistory:
    history = JobHistory(key="job", base_priority=BASE).queued("job-1", 0.0)
    for i in range(times):
        history = history.admitted(f"uid-{i}", 10.0 + 100 * i)
        history = history.with_preemption(
            PreemptionRecord(
                key=EpisodeKey(f"uid-{i}", 1),
                at=60.0 + 100 * i,
                workload_name=f"job-{i + 1}",
                reason="InCohortReclamation",
                preemptor_uid="prod",
                preemptor_priority=1000,
            )
        )
        history = history.queued(f"job-{i + 2}", 70.0 + 100 * i)
    return history


@pytest.mark.parametrize("policy", [KEEP_PLACE, RANK, PROTECT], ids=lambda p: p.name)
@pytest.mark.parametrize("times", range(0, 20))
def test_a_waiting_workload_stays_strictly_below_every_admitted_peer_and_inside_the_class(
    policy: BandPolicy, times: int
) -> None:
    # The licence to preempt a peer needs a strictly higher (or, for LowerOrNewerEqualPriority,
    # an equal) priority: a waiting relaunch must stay below the lowest admitted level.
    k, p = policy.widths(SETTINGS)
    decision = policy.decide(preempted(times), SETTINGS, now=10_000.0)
    lowest_admitted = min(policy.levels(n, SETTINGS).admitted for n in range(0, 50))
    assert decision.boost < lowest_admitted or (decision.boost == lowest_admitted == -p and k == 0)
    assert decision.admitted_boost is not None
    for offset in (decision.boost, decision.admitted_boost, decision.released_boost):
        assert offset is not None and -(k + p) <= offset <= 0  # never above the class value


def test_relaunches_wait_ahead_of_fresh_arrivals_and_more_preempted_ones_further_ahead() -> None:
    fresh, once, twice = (KEEP_PLACE.decide(preempted(n), SETTINGS, 10_000.0).boost for n in (0, 1, 2))
    assert fresh == -16
    assert fresh < once < twice
    # Capped one below the admitted floor however often the job was preempted.
    assert KEEP_PLACE.decide(preempted(30), SETTINGS, 10_000.0).boost == -9


def test_readmitted_relaunches_are_protected_after_the_configured_number_of_preemptions() -> None:
    assert KEEP_PLACE.decide(preempted(0), SETTINGS, 10_000.0).admitted_boost == -8
    assert KEEP_PLACE.decide(preempted(1), SETTINGS, 10_000.0).admitted_boost == -7
    assert KEEP_PLACE.decide(preempted(30), SETTINGS, 10_000.0).admitted_boost == 0
    later = AgingSettings(rank_levels=8, protect_levels=8, protect_after_preemptions=2)
    assert KEEP_PLACE.decide(preempted(1), later, 10_000.0).admitted_boost == -8
    assert KEEP_PLACE.decide(preempted(2), later, 10_000.0).admitted_boost == -7


def test_rank_alone_admits_at_the_class_value_and_protect_alone_waits_at_the_admitted_floor() -> None:
    rank = RANK.decide(preempted(3), SETTINGS, 10_000.0)
    assert (rank.boost, rank.admitted_boost) == (-8 + 3, 0)
    protect = PROTECT.decide(preempted(3), SETTINGS, 10_000.0)
    assert (protect.boost, protect.admitted_boost) == (-8, -8 + 3)


def test_band_policies_are_registered_and_explain_every_level() -> None:
    for name in ("keep-place", "rank", "protect"):
        assert name in aging.policy_names()
    lines = KEEP_PLACE.decide(preempted(2), SETTINGS, 10_000.0).explanation()
    assert any(line.startswith("band: [84, 100]") for line in lines)
    assert any(line.startswith("waiting: 86") for line in lines)
    assert any(line.startswith("admitted: 94") for line in lines)


def test_classes_closer_than_the_band_are_refused_with_the_fix() -> None:
    check_class_gaps([50, 100, 200], KEEP_PLACE, SETTINGS)
    with pytest.raises(SettingsError, match="16 apart, but 100 and 110 are 10 apart"):
        check_class_gaps([100, 110], KEEP_PLACE, SETTINGS)
    check_class_gaps([100, 110], RANK, AgingSettings(rank_levels=8, protect_levels=8))


def test_band_settings_are_validated_like_every_aging_setting() -> None:
    with pytest.raises(SettingsError, match="rank_levels"):
        AgingSettings.from_mapping({"rank_levels": -1})
    with pytest.raises(SettingsError, match="protect_seconds"):
        AgingSettings.from_mapping({"protect_seconds": 0})
    assert AgingSettings.from_mapping({"protect_seconds": 1800}).protect_seconds == 1800.0


def test_a_band_patch_lands_only_on_the_snapshot_it_was_planned_on() -> None:
    from sky_kueue.controller.actuators import BAND_LEVEL_ANNOTATION, plan_band_patch
    from sky_kueue.controller.detection import workload_facts

    from .builders import WorkloadBuilder

    obj = WorkloadBuilder("x-1").priority(100).pending(10.0).obj()
    obj["metadata"]["resourceVersion"] = "41"
    facts = workload_facts(obj)
    plan = plan_band_patch(facts, priority=92, level="waiting")
    assert plan.patch is not None
    # A lower level is written (not only raises), with the snapshot's UID and resourceVersion:
    # planned on a stale "pending" snapshot, it gets a 409 instead of lowering an admitted Workload.
    assert plan.patch.body == {
        "metadata": {"uid": facts.uid, "resourceVersion": "41", "annotations": {BAND_LEVEL_ANNOTATION: "waiting"}},
        "spec": {"priority": 92},
    }
    assert plan_band_patch(facts, priority=100, level="waiting").satisfied
    del obj["metadata"]["resourceVersion"]
    unversioned = plan_band_patch(workload_facts(obj), priority=92, level="waiting")
    assert unversioned.patch is None and "resourceVersion" in unversioned.reason


def test_a_rank_cap_sends_a_job_preempted_more_often_back_to_the_fresh_level() -> None:
    # rank_max_preemptions: ranked ahead while preempted at most that often, then in arrival order
    # again (the closed loop of tests/sim/test_rank_loop.py).
    capped = AgingSettings(rank_levels=8, protect_levels=8, rank_max_preemptions=2)
    waiting = [RANK.decide(preempted(n), capped, 10_000.0).boost for n in range(5)]
    assert waiting == [-8, -7, -6, -8, -8]
    # Admitted Workloads and protection are untouched by the cap.
    assert RANK.decide(preempted(4), capped, 10_000.0).admitted_boost == 0
    assert KEEP_PLACE.decide(preempted(4), capped, 10_000.0).admitted_boost == -8 + 4
    lines = RANK.decide(preempted(3), capped, 10_000.0).explanation()
    assert any("more than rank_max_preemptions=2, back in arrival order" in line for line in lines)
    # Unset (the default), every preemption counts, as before.
    assert RANK.decide(preempted(4), SETTINGS, 10_000.0).boost == -8 + 4


def test_a_rank_cap_must_be_a_count_of_at_least_one() -> None:
    with pytest.raises(SettingsError, match="rank_max_preemptions: expected a value >= 1, got 0"):
        AgingSettings.from_mapping({"rank_max_preemptions": 0})
    assert AgingSettings.from_mapping({"rank_max_preemptions": 3}).rank_max_preemptions == 3
