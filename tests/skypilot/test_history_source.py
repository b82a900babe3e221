"""The policy reads past runs from the controller's store (the edge of the run-time estimate)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sky_kueue.controller.history import JobHistory, TransitionCause, transition_key
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.controller.runtime_state import RuntimeState
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from sky_kueue.controller.state_spec import StateSpec
from sky_kueue.mirror.identity import JobIdentity
from sky_kueue.skypilot import labels
from sky_kueue.skypilot.config_cache import ConfigCache
from sky_kueue.skypilot.decision import Placement
from sky_kueue.skypilot.history_source import HISTORY_CACHE_SECONDS, HistorySource
from sky_kueue.skypilot.runtime_estimate import PastRun
from tests.skypilot.builders import DEMO_CONFIG, request, task


def record_run(store: SqliteHistoryStore, job_id: str, name: str, admitted: float, finished: float) -> None:
    from sky_kueue.controller.history import Transition

    identity = JobIdentity(namespace="team-a", managed_job_id=job_id, managed_job_name=name, pod_group=f"g-{job_id}")
    store.ensure_job(identity, 100, admitted)
    uid = f"uid-{job_id}"
    for cause, at in ((TransitionCause.ADMITTED, admitted), (TransitionCause.FINISHED, finished)):
        key = transition_key(EpisodeKey(uid, 0), cause)
        store.record_transition(identity, Transition(key, cause, at, uid))


@pytest.fixture
def state_file(tmp_path: Path) -> Path:
    path = tmp_path / "controller.db"
    store = SqliteHistoryStore(path)
    RuntimeState(path).close()
    record_run(store, "1", "train", 100.0, 700.0)
    record_run(store, "2", "train", 1000.0, 2200.0)
    identity = JobIdentity(namespace="team-a", managed_job_id="3", managed_job_name="train", pod_group="g-3")
    store.ensure_job(identity, 100, 3000.0)  # still running: not a run yet
    store.close()
    return path


def test_finished_runs_are_read_from_the_controllers_sqlite_file(state_file: Path) -> None:
    source = HistorySource(environ={"SKY_KUEUE_STATE": f"sqlite:{state_file}"})
    assert sorted(source.runs(), key=lambda r: r.finished_at) == [
        PastRun("team-a", "train", 600.0, 700.0),
        PastRun("team-a", "train", 1200.0, 2200.0),
    ]


def test_the_store_is_read_once_per_cache_period_and_problems_are_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reads: list[StateSpec] = []
    now = [0.0]

    def broken(spec: StateSpec) -> list[JobHistory]:
        reads.append(spec)
        raise OSError("disk on fire")

    source = HistorySource(environ={"SKY_KUEUE_STATE": "sqlite:/nowhere.db"}, clock=lambda: now[0], reader=broken)
    with caplog.at_level(logging.DEBUG, logger="sky_kueue.skypilot.history_source"):
        assert source.runs() == ()
        assert source.runs() == ()  # cached
        now[0] += HISTORY_CACHE_SECONDS + 1
        assert source.runs() == ()
    assert len(reads) == 2
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == ["sky-kueue: no job history for run-time estimates (disk on fire)"]
    bad = HistorySource(environ={"SKY_KUEUE_STATE": "ftp:somewhere"})
    assert bad.runs() == ()  # a malformed spec is a warning, never a rejected launch


def test_the_policy_server_path_writes_the_history_estimate(state_file: Path) -> None:
    cache = ConfigCache(DEMO_CONFIG, history=HistorySource(environ={"SKY_KUEUE_STATE": str(state_file)}))
    result = cache.evaluate(request(task(name="train")))
    assert isinstance(result.decision, Placement)
    annotations = result.task["resources"]["_cluster_config_overrides"]["kubernetes"]["pod_config"]["metadata"][
        "annotations"
    ]
    assert annotations == {
        labels.RUNTIME_SECONDS_ANNOTATION: "900",  # the median of 600 s and 1200 s
        labels.RUNTIME_SOURCE_ANNOTATION: "history(n=2)",
    }


def test_a_warmed_cache_has_read_the_history_before_the_first_request(state_file: Path) -> None:
    """The policy server warms its cache at start, so no request waits for the first read."""
    reads: list[StateSpec] = []

    def reader(spec: StateSpec) -> list[JobHistory]:
        reads.append(spec)
        return []

    source = HistorySource(environ={"SKY_KUEUE_STATE": str(state_file)}, reader=reader)
    cache = ConfigCache(DEMO_CONFIG, history=source)
    cache.warm()
    assert len(reads) == 1 and cache.loaded_views() is not None
    cache.evaluate(request(task(name="train")))
    assert len(reads) == 1  # served from the read at start
