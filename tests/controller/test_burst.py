"""Burst: mark a job for cloud fallback after repeated preemptions or a long predicted wait."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sky_kueue.controller.aging import AgingSettings
from sky_kueue.controller.burst import (
    BurstReason,
    decide_burst,
    is_burst_target,
    preemptions_since_success,
    relaunch_burst,
)
from sky_kueue.controller.history import JobHistory, PreemptionRecord
from sky_kueue.controller.keys import EpisodeKey

SETTINGS = AgingSettings(burst_after_preemptions=3, decay_after_run_seconds=3_600.0)


def history(runs: list[float]) -> JobHistory:
    """One Workload per run length, each preempted at the end of its run."""
    h, at = JobHistory("managed-job/1", base_priority=100), 0.0
    for i, run in enumerate(runs):
        h = h.queued(f"w{i}", at).admitted(f"w{i}", at + 10)
        at += 10 + run
        h = h.with_preemption(PreemptionRecord(EpisodeKey(f"w{i}", 1), at, "train"))
    return h.queued(f"w{len(runs)}", at)


@pytest.mark.parametrize(
    ("runs", "since", "burst"),
    [
        ([60, 60], 2, False),
        ([60, 60, 60], 3, True),
        ([60, 60, 4_000, 60], 2, False),  # the 4000 s run was a success: only the streak after it counts
        ([4_000, 60, 60], 3, True),  # the preemption ending a successful run starts the new streak
    ],
)
def test_repeated_preemptions_without_a_successful_run_trigger_a_burst(
    runs: list[float], since: int, burst: bool
) -> None:
    h = history(runs)
    now = sum(runs) + 10 * len(runs) + 1
    assert preemptions_since_success(h, SETTINGS, now) == since
    verdict = decide_burst(h, SETTINGS, now)
    assert (verdict is not None) == burst
    if verdict is not None:
        assert verdict.reason is BurstReason.PREEMPTIONS and verdict.record(now).preemptions == since


@pytest.mark.parametrize(
    ("predicted", "team_limit", "setting", "burst"),
    [
        (None, 600.0, None, False),  # no prediction, no decision
        (601.0, 600.0, None, True),  # the team's limit
        (600.0, 600.0, None, False),  # at the limit is still acceptable
        (601.0, None, 600.0, True),  # the configured default limit
        (601.0, 900.0, 600.0, False),  # a team limit overrides the default
        (10_000.0, None, None, False),  # bursting not configured
    ],
)
def test_a_predicted_wait_over_the_limit_triggers_a_burst(
    predicted: float | None, team_limit: float | None, setting: float | None, burst: bool
) -> None:
    settings = replace(AgingSettings(), burst_max_predicted_wait_seconds=setting)
    verdict = decide_burst(history([]), settings, 5.0, predicted_wait_seconds=predicted, wait_limit_seconds=team_limit)
    assert (verdict is not None) == burst
    if verdict is not None:
        assert verdict.reason is BurstReason.PREDICTED_WAIT


def test_the_relaunch_bursts_after_burst_after_preemptions_only_when_aging_is_on() -> None:
    h = history([60, 60, 60])
    now = 3 * 70 + 1
    assert relaunch_burst(h, SETTINGS, now)[0]
    assert not relaunch_burst(history([60, 60]), SETTINGS, now)[0]
    off, why = relaunch_burst(h, SETTINGS, now, enabled=False)
    assert not off and "disabled" in why
    assert not relaunch_burst(h, replace(SETTINGS, burst_after_preemptions=None), now)[0]


@pytest.mark.parametrize(
    ("cloud", "region", "target"),
    [
        ("aws", None, True),
        ("kubernetes", "burst-ctx", True),  # a context a team names as its burst target
        ("kubernetes", "onprem", False),  # the team's own Kueue cluster
        ("k8s", None, False),  # any context: could be the team's own
        (None, None, False),  # the optimizer may pick Kubernetes
    ],
)
def test_a_burst_goes_to_clouds_and_named_kubernetes_contexts_only(
    cloud: str | None, region: str | None, target: bool
) -> None:
    assert is_burst_target(cloud, region, frozenset({"burst-ctx"})) is target
