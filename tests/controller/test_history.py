"""The pure job history: phases, intervals, time travel and idempotency keys."""

from __future__ import annotations

import pytest

from sky_kueue.controller.history import (
    AgingStep,
    EvictionRecord,
    JobHistory,
    Phase,
    PreemptionRecord,
    StepState,
)
from sky_kueue.controller.keys import EpisodeKey


def history() -> JobHistory:
    h = JobHistory("managed-job/1", base_priority=100)
    h = h.queued("w0", 0).admitted("w0", 100)
    h = h.with_preemption(PreemptionRecord(EpisodeKey("w0", 1), 1_000, "train"))
    return h.queued("w1", 1_030)  # relaunched 30 s later: still waiting


def test_intervals_merge_consecutive_phases_and_the_last_runs_until_now() -> None:
    intervals = history().intervals(now=1_100)
    assert [(i.phase, i.start, i.end, i.open) for i in intervals] == [
        (Phase.WAITING, 0, 100, False),
        (Phase.RUNNING, 100, 1_000, False),
        (Phase.WAITING, 1_000, 1_100, True),  # preempted, then relaunch: one waiting stretch
    ]


def test_wait_and_run_time_accumulate_across_workloads() -> None:
    h = history()
    assert (h.wait_seconds(1_100), h.run_seconds(1_100)) == (200, 900)
    assert h.phase is Phase.WAITING and h.last_admission_at == 100


def test_transitions_are_ordered_by_time_even_when_recorded_late() -> None:
    h = JobHistory("j").queued("w1", 50).with_preemption(PreemptionRecord(EpisodeKey("w0", 1), 40, "t"))
    h = h.admitted("w0", 10)
    assert [t.at for t in h.ordered_transitions()] == [10, 40, 50]
    assert h.run_seconds(60) == 30


def test_a_finished_job_stops_accumulating() -> None:
    h = JobHistory("j").queued("w0", 0).admitted("w0", 10).finished("w0", 70)
    assert (h.wait_seconds(10_000), h.run_seconds(10_000)) == (10, 60)


def test_as_of_forgets_the_future() -> None:
    past = history().as_of(500)
    assert past.preemptions == () and past.phase is Phase.RUNNING


def test_recording_the_same_fact_twice_changes_nothing() -> None:
    h = history()
    record = h.preemptions[0]
    eviction = EvictionRecord(EpisodeKey("w1", 1), 2_000, "train", "PodsReadyTimeout", "PodsReadyTimeout")
    assert h.with_preemption(record) == h
    assert h.queued("w1", 1_030) == h
    once = h.with_eviction(eviction)
    assert once.with_eviction(eviction) == once and len(once.evictions) == 1


def test_current_boost_is_the_latest_actuated_step() -> None:
    def step(uid: str, boost: int, actuated_at: float | None) -> AgingStep:
        return AgingStep(
            EpisodeKey(uid, 0),
            "j",
            "ns",
            "n",
            "bounded",
            boost,
            0,
            0.0,
            StepState.ACTUATED if actuated_at else StepState.DECIDED,
            actuated_boost=boost if actuated_at else None,
            actuated_at=actuated_at,
        )

    h = history()
    assert h.current_boost == 0
    h = h.with_step(step("w0", 100, 10)).with_step(step("w1", 300, None)).with_step(step("w2", 200, 20))
    assert h.current_boost == 200


@pytest.mark.parametrize(
    ("key", "token"),
    [(EpisodeKey("uid-1", 0), "uid-1#0"), (EpisodeKey("a#b", 12), "a#b#12"), (EpisodeKey("u", None, "17"), "u@17")],
)
def test_episode_keys_round_trip_through_their_token(key: EpisodeKey, token: str) -> None:
    assert key.token == token and EpisodeKey.parse(token) == key


@pytest.mark.parametrize("bad", ["", "uid", "uid#", "#3", "uid#-1"])
def test_malformed_episode_tokens_are_rejected(bad: str) -> None:
    with pytest.raises(ValueError):
        EpisodeKey.parse(bad)


def test_an_episode_key_needs_exactly_one_of_count_and_marker() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        EpisodeKey("u", 1, "m")
    with pytest.raises(ValueError, match=">= 0"):
        EpisodeKey("u", -1)
