"""Aging policies, as specifications: each table row is one rule at one of its boundaries."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sky_kueue.controller import aging
from sky_kueue.controller.aging import AgingSettings, PriorityClassRung
from sky_kueue.controller.history import JobHistory, PreemptionRecord
from sky_kueue.controller.keys import EpisodeKey

BASE = 100
DEV = 100
PROD = 1000
HOUR = 3_600.0
NEVER = 1e12  # a "decay_after_run_seconds" no run reaches

#: Preemption-only arithmetic: no age, no decay, anti-flapping window of 600 s.
STEPS_ONLY = AgingSettings(
    policy="bounded",
    preemptions_per_step=1,
    boost_per_step=100,
    age_weight=0,
    max_boost=10_000,
    min_run_before_reboost_seconds=600.0,
    decay_after_run_seconds=NEVER,
)


def job(base: int = BASE) -> JobHistory:
    return JobHistory("managed-job/1", base_priority=base, first_seen=0.0)


def cycle(
    history: JobHistory,
    uid: str,
    *,
    queued: float,
    admitted: float,
    preempted: float | None = None,
    preemptor: int | None = PROD,
) -> JobHistory:
    """One Workload's life: queued, admitted, optionally preempted by a preemptor class."""
    history = history.queued(uid, queued).admitted(uid, admitted)
    if preempted is not None:
        history = history.with_preemption(
            PreemptionRecord(EpisodeKey(uid, 1), preempted, "train", "InClusterQueue", f"p-{uid}", None, preemptor)
        )
    return history


def preempted_times(n: int, *, run_seconds: float = 1_000.0, preemptor: int | None = PROD) -> JobHistory:
    """n Workloads, each queued 10 s, run ``run_seconds``, then preempted."""
    history, at = job(), 0.0
    for i in range(n):
        history = cycle(
            history, f"w{i}", queued=at, admitted=at + 10, preempted=at + 10 + run_seconds, preemptor=preemptor
        )
        at += 10 + run_seconds
    return history.queued(f"w{n}", at)


def boost(history: JobHistory, settings: AgingSettings, now: float | None = None, policy: str = "bounded") -> int:
    when = now if now is not None else max((t.at for t in history.transitions), default=0.0)
    return aging.get_policy(policy).decide(history, settings, when).boost


@pytest.mark.parametrize(
    ("preemptions", "per_step", "expected"),
    [
        (0, 2, 0),
        (1, 2, 0),  # one short of a step
        (2, 2, 100),  # exactly one step
        (3, 2, 100),
        (4, 2, 200),
        (5, 3, 100),
        (6, 3, 200),
        (3, 1, 300),
    ],
)
def test_one_step_every_n_preemptions(preemptions: int, per_step: int, expected: int) -> None:
    settings = replace(STEPS_ONLY, preemptions_per_step=per_step)
    assert boost(preempted_times(preemptions), settings) == expected


@pytest.mark.parametrize(
    ("max_boost", "expected"),
    [(10_000, 700), (700, 700), (699, 699), (250, 250), (0, 0)],
)
def test_the_boost_never_exceeds_max_boost(max_boost: int, expected: int) -> None:
    settings = replace(STEPS_ONLY, max_boost=max_boost, cap_at_preemptor_priority=False)
    assert boost(preempted_times(7), settings) == expected


@pytest.mark.parametrize(
    ("preemptor", "cap_at_preemptor", "ceiling", "expected"),
    [
        (300, True, None, 199),  # base 100 may rise to just below the preemptor's class 300
        (300, False, None, 700),  # unless configured otherwise
        (None, True, None, 700),  # preemptor priority unknown: only max_boost bounds preemption steps
        (50, True, None, 0),  # a preemptor below the job's class leaves no room
        (101, True, None, 0),  # nor does one a single point above it
        (300, True, 250, 150),  # an absolute ceiling_priority applies on top
        (1000, True, 2_000, 700),
        (None, True, 99, 0),  # a ceiling below the base never makes the boost negative
    ],
)
def test_ceiling_at_the_preemptor_class_and_absolute_ceiling(
    preemptor: int | None, cap_at_preemptor: bool, ceiling: int | None, expected: int
) -> None:
    settings = replace(STEPS_ONLY, cap_at_preemptor_priority=cap_at_preemptor, ceiling_priority=ceiling)
    assert boost(preempted_times(7, preemptor=preemptor), settings) == expected


def test_the_preemptor_cap_uses_the_highest_class_that_ever_preempted_the_job() -> None:
    history = cycle(job(), "w0", queued=0, admitted=10, preempted=2_000, preemptor=150)
    history = cycle(history, "w1", queued=2_000, admitted=2_010, preempted=4_000, preemptor=400)
    history = cycle(history, "w2", queued=4_000, admitted=4_010, preempted=6_000, preemptor=200)
    assert boost(history.queued("w3", 6_000), STEPS_ONLY) == 299  # 400 - 1 - 100


def flapping_history(second_run_seconds: float, second_preemptor: int | None) -> JobHistory:
    """Boosted by a first preemption, then admitted with +100 and preempted again."""
    history = cycle(job(), "w0", queued=0, admitted=10, preempted=1_010, preemptor=PROD)
    history = cycle(
        history,
        "w1",
        queued=1_010,
        admitted=1_100,
        preempted=1_100 + second_run_seconds,
        preemptor=second_preemptor,
    )
    return history.queued("w2", 1_100 + second_run_seconds)


@pytest.mark.parametrize(
    ("ran", "preemptor", "expected", "held"),
    [
        (599.0, DEV, 100, 1),  # boosted, ran < 600 s, preempted by a peer class: held
        (600.0, DEV, 200, 0),  # exactly the minimum run: counts
        (10.0, None, 100, 1),  # unknown preemptor: the guard stays on
        (10.0, 200, 100, 1),  # a class at the admitted priority (100 + 100) does not outrank it
        (10.0, 201, 200, 0),  # a class above the admitted priority outranks it: counts
        (10.0, PROD, 200, 0),  # prod preempting a boosted dev job counts however short the run
    ],
)
def test_anti_flapping_holds_a_quick_re_preemption_of_a_boosted_job(
    ran: float, preemptor: int | None, expected: int, held: int
) -> None:
    history = flapping_history(ran, preemptor)
    decision = aging.decide(history, replace(STEPS_ONLY, cap_at_preemptor_priority=False), 1_100 + ran)
    assert (decision.boost, decision.held_preemptions) == (expected, held)


def test_anti_flapping_does_not_apply_to_a_job_admitted_without_boost() -> None:
    history = cycle(job(), "w0", queued=0, admitted=10, preempted=20, preemptor=DEV)
    history = cycle(history, "w1", queued=20, admitted=30, preempted=40, preemptor=DEV)
    decision = aging.decide(history.queued("w2", 40), replace(STEPS_ONLY, cap_at_preemptor_priority=False), 40)
    # First admission had boost 0 (counts), second had +100 and ran 10 s (held).
    assert (decision.counted_preemptions, decision.held_preemptions, decision.boost) == (1, 1, 100)


@pytest.mark.parametrize(
    ("run_seconds", "factor", "expected"),
    [
        (HOUR - 1, 0.5, 400),  # not a successful run yet: no decay
        (HOUR, 0.5, 200),  # a successful run halves the credit: 4 -> 2
        (3 * HOUR, 0.5, 200),  # one decay per run, however long
        (HOUR, 0.0, 0),  # factor 0 forgets everything
        (HOUR, 1.0, 400),  # factor 1 never forgets
        (HOUR, 0.3, 100),  # 4 x 0.3 = 1.2 credit -> one step (exact arithmetic)
    ],
)
def test_decay_after_a_successful_run(run_seconds: float, factor: float, expected: int) -> None:
    settings = replace(STEPS_ONLY, decay_after_run_seconds=HOUR, decay_factor=factor)
    history = preempted_times(4)  # 4 counted preemptions, each after a 1000 s run
    end = max(t.at for t in history.transitions)
    history = history.admitted("w4", end + 5)
    assert boost(history, settings, now=end + 5 + run_seconds) == expected


def test_preemptions_after_a_decay_count_in_full() -> None:
    settings = replace(STEPS_ONLY, decay_after_run_seconds=HOUR, decay_factor=0.5)
    history = cycle(job(), "w0", queued=0, admitted=0, preempted=2 * HOUR)  # decays at 1 h, then +1
    history = cycle(history, "w1", queued=2 * HOUR, admitted=2 * HOUR + 5, preempted=2 * HOUR + 1_000)
    decision = aging.decide(history.queued("w2", 2 * HOUR + 1_000), settings, 2 * HOUR + 1_000)
    assert (decision.preemption_credit, decision.boost) == (2.0, 200)


#: The age formula alone (the class cap, which zeroes age-only boosts without a ladder, is tested below).
AGE_ONLY = AgingSettings(
    policy="age", age_weight=100, max_age_seconds=1_000.0, max_boost=10_000, cap_at_preemptor_priority=False
)


@pytest.mark.parametrize(
    ("waited", "expected"),
    [(0.0, 0), (9.0, 0), (10.0, 1), (500.0, 50), (999.0, 99), (1_000.0, 100), (5_000.0, 100)],
)
def test_slurm_age_factor_saturates_at_max_age(waited: float, expected: int) -> None:
    history = job().queued("w0", 0.0)
    assert boost(history, AGE_ONLY, now=waited, policy="age") == expected


def test_only_waiting_time_ages_and_the_relaunch_gap_counts_as_waiting() -> None:
    history = cycle(job(), "w0", queued=0, admitted=100, preempted=10_000)  # waited 100, ran 9900
    history = history.queued("w1", 10_200)  # relaunched 200 s after the preemption
    decision = aging.get_policy("age").decide(history, AGE_ONLY, 10_400)
    assert (decision.wait_seconds, decision.run_seconds, decision.boost) == (500.0, 9_900.0, 50)


def test_default_policy_adds_preemption_steps_and_age() -> None:
    settings = AgingSettings(
        policy="bounded",
        preemptions_per_step=2,
        boost_per_step=100,
        age_weight=100,
        max_age_seconds=10_000.0,
        max_boost=500,
    )
    history = preempted_times(4, run_seconds=1_000)  # waited 4 x 10 s
    decision = aging.decide(history, settings, history.transitions[-1].at + 2_460)
    assert (decision.preemption_points, decision.age_points, decision.boost) == (200, 25, 225)


def test_the_ladder_counts_every_preemption_where_bounded_holds_flapping() -> None:
    history = flapping_history(10.0, DEV)
    settings = replace(STEPS_ONLY, cap_at_preemptor_priority=False)
    assert boost(history, settings, policy="bounded") == 100
    assert boost(history, settings, policy="ladder") == 200


def test_none_never_boosts() -> None:
    assert boost(preempted_times(20), STEPS_ONLY, policy="none") == 0


def test_events_after_now_are_ignored() -> None:
    history = preempted_times(3)
    early = aging.decide(history, STEPS_ONLY, 1_015.0)  # only the first preemption happened
    assert early.preemptions == 1 and early.boost == 100


def test_a_decision_is_a_pure_function_of_history_settings_and_time() -> None:
    history = flapping_history(10.0, DEV)
    assert aging.decide(history, STEPS_ONLY, 5_000) == aging.decide(history, STEPS_ONLY, 5_000)


def test_other_evictions_are_explained_but_never_counted() -> None:
    from sky_kueue.controller.history import EvictionRecord

    history = job().queued("w0", 0).admitted("w0", 10)
    history = history.with_eviction(EvictionRecord(EpisodeKey("w0", 1), 100, "train", "PodsReadyTimeout", "x"))
    decision = aging.decide(history, STEPS_ONLY, 200)
    assert (decision.preemptions, decision.other_evictions, decision.boost) == (0, 1, 0)
    assert "PodsReadyTimeoutx1" in decision.steps[0].detail


def test_the_explanation_walks_the_rules_in_order_and_serializes() -> None:
    decision = aging.decide(flapping_history(10.0, DEV), STEPS_ONLY, 2_000)
    rules = [step.rule for step in decision.steps]
    assert rules[0] == "history" and rules[-2:] == ["cap", "result"]
    assert "held" in [step.value for step in decision.steps]
    as_dict = decision.to_dict()
    assert as_dict["boost"] == decision.boost and len(as_dict["steps"]) == len(rules)
    assert decision.explanation()[-1].startswith("result: boost 100")


def test_unknown_base_priority_counts_as_zero() -> None:
    history = JobHistory("pod-group/ns/g", first_seen=0.0).queued("w0", 0)
    assert aging.decide(history, STEPS_ONLY, 10).base_priority == 0


def test_registry_lists_built_ins_and_rejects_unknown_or_duplicate_names() -> None:
    assert {"bounded", "ladder", "age", "none"} <= set(aging.policy_names())
    with pytest.raises(aging.UnknownPolicyError, match="unknown aging policy 'fifo'; known policies: age, bounded"):
        aging.get_policy("fifo")
    with pytest.raises(ValueError, match="already registered"):
        aging.register_policy(aging.get_policy("bounded"))


def test_decide_uses_the_configured_policy() -> None:
    history = preempted_times(4)
    assert aging.decide(history, replace(STEPS_ONLY, policy="none"), 10_000).policy == "none"


#: Age only, saturating after one hour at 500 points: enough to cross any class gap below.
AGE_SATURATED_IN_AN_HOUR = AgingSettings(
    policy="bounded",
    preemptions_per_step=1,
    boost_per_step=0,
    age_weight=500,
    max_age_seconds=HOUR,
    max_boost=10_000,
    decay_after_run_seconds=NEVER,
)
LADDER = (PriorityClassRung(100, "low"), PriorityClassRung(300, "medium"), PriorityClassRung(1000, "high"))


@pytest.mark.parametrize(
    ("base", "ladder", "cap", "expected"),
    [
        (100, (), True, 0),  # never preempted, no ladder: no class above is known, so age is worth 0
        (100, LADDER, True, 199),  # a never-preempted low job stays below medium (300 - 1 - 100)
        (600, LADDER, True, 399),  # a base between rungs stays below the next one (1000 - 1 - 600)
        (300, LADDER, True, 500),  # a medium job has room below high (699) for the full age weight
        (1000, LADDER, True, 500),  # the top class has no class above: only the age weight applies
        (100, (), False, 500),  # with the class cap switched off, age alone may cross classes
    ],
)
def test_age_alone_never_boosts_across_a_class(
    base: int, ladder: tuple[PriorityClassRung, ...], cap: bool, expected: int
) -> None:
    settings = replace(AGE_SATURATED_IN_AN_HOUR, priority_class_ladder=ladder, cap_at_preemptor_priority=cap)
    history = job(base).queued("w0", 0.0)
    assert boost(history, settings, now=12 * HOUR) == expected


def test_a_known_preemptor_class_still_bounds_the_boost_when_a_ladder_is_set() -> None:
    settings = replace(STEPS_ONLY, priority_class_ladder=LADDER)
    assert boost(preempted_times(12, preemptor=PROD), settings) == PROD - 1 - BASE  # raw 1200, capped at 899


def test_with_an_unknown_preemptor_steps_count_but_age_stays_below_the_next_class() -> None:
    settings = replace(AGE_SATURATED_IN_AN_HOUR, boost_per_step=100, priority_class_ladder=LADDER)
    history = preempted_times(2, preemptor=None)
    decision = aging.get_policy("bounded").decide(history, settings, 12 * HOUR)
    assert (decision.preemption_points, decision.age_points, decision.boost) == (200, 199, 399)
    (age_step,) = [step for step in decision.steps if step.rule == "age"]
    assert age_step.detail.endswith("; age capped: no preemptor known: next class 300 - 1 - base 100 = 199")
