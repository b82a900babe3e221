"""The SkyPilot-level actuator, loaded by SkyPilot 0.14.1's own plugin loader.

SkyPilot is imported with ``HOME`` and its config variables pointing into a temporary
directory (``docs/skypilot.md`` §5.1), and the plugin is named in a ``plugins.yaml`` found
through ``SKYPILOT_SERVER_PLUGINS_CONFIG``, exactly as an operator would install it
(``configs/plugins.yaml``). The controller's state file holds a job preempted twice by prod;
the strategy must relabel the relaunch with the ladder class the aging policy allows, and
the failure source must report ``KUEUE_PREEMPTED`` with the preemptor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from sky_kueue.controller.history import (
    BurstRecord,
    HistoryStore,
    PreemptionRecord,
    Transition,
    TransitionCause,
    transition_key,
)
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from sky_kueue.mirror.identity import JobIdentity

#: SkyPilot's server imports passlib, which imports the deprecated ``crypt``; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:'crypt' is deprecated:DeprecationWarning")

REPO = Path(__file__).resolve().parents[2]
SHIPPED_CONFIG = REPO / "configs" / "sky-kueue.yaml"
GROUP = "train-7-fcd1e5cf"
T0 = 1_767_268_800.0
PREEMPTOR_UID = "0f0e0d0c-prod"
LADDER = {"dev-priority": 100, "dev-aged-1": 200, "dev-aged-2": 300, "prod-priority": 1000}


def _config(tmp: Path, parameters: dict[str, Any] | None = None, name: str = "sky-kueue.yaml") -> Path:
    """The shipped config with the ladder and ``KUEUE_AGING``; ``parameters`` default to a +100 boost per preemption."""
    data = yaml.safe_load(SHIPPED_CONFIG.read_text())
    data["priority_classes"] = dict(LADDER)
    data["aging"] = {
        "enabled": True,
        "strategy": "KUEUE_AGING",
        "ladder": list(LADDER),
        "parameters": parameters or {"policy": "bounded", "preemptions_per_step": 1, "boost_per_step": 100},
    }
    path = tmp / name
    path.write_text(yaml.safe_dump(data))
    return path


#: A managed job the controller saw preempted twice while SkyPilot still had it STARTING (its
#: launch loop retries without a recovery), recorded like job 7 under a pod group of its own.
STARTING_JOB = 12


def _state(tmp: Path) -> Path:
    """The controller's SQLite state with :func:`_record_job_7`, and the same record of
    :data:`STARTING_JOB`."""
    path = tmp / "controller.db"
    with SqliteHistoryStore(path) as store:
        _record_job_7(store)
        _record_job_7(store, job_id=STARTING_JOB)
    return path


def _record_job_7(store: HistoryStore, job_id: int = 7) -> None:
    """The controller's record of managed job 7 (or ``job_id``): admitted, preempted by prod, twice."""
    group = GROUP if job_id == 7 else f"{GROUP}-{job_id}"
    identity = JobIdentity("team-b", group, str(job_id), skypilot_owned=True)
    message = (
        f"Preempted to accommodate a workload (UID: {PREEMPTOR_UID}, JobUID: UNKNOWN) due to reclamation within the "
        "cohort while borrowing; preemptor path: /team-ab/team-a-cq; preemptee path: /team-ab/team-b-cq"
    )
    store.ensure_job(identity, 100, T0)
    for round_ in range(2):
        uid, at = (f"w{round_}" if job_id == 7 else f"w{job_id}-{round_}"), T0 + 1_000 * round_
        episode = EpisodeKey(uid, 0)
        store.record_transition(
            identity, Transition(transition_key(episode, TransitionCause.QUEUED), TransitionCause.QUEUED, at, uid)
        )
        store.record_transition(
            identity,
            Transition(transition_key(episode, TransitionCause.ADMITTED), TransitionCause.ADMITTED, at + 10, uid),
        )
        store.record_preemption(
            identity,
            PreemptionRecord(
                EpisodeKey(uid, 1),
                at + 700,
                group,
                "InCohortReclaimWhileBorrowing",
                PREEMPTOR_UID,
                None,
                1000,
                message,
            ),
        )


@pytest.fixture(scope="module")
def sky_with_plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """SkyPilot, isolated, with ``KueueAgingPlugin`` loaded in the jobs-controller context."""
    tmp = tmp_path_factory.mktemp("sky-plugin")
    (tmp / "global.yaml").write_text("{}\n")
    (tmp / "project.yaml").write_text("")
    config, state = _config(tmp), _state(tmp)
    plugins_yaml = tmp / "plugins.yaml"
    plugins_yaml.write_text(
        yaml.safe_dump(
            {
                "plugins": [
                    {
                        "class": "sky_kueue.controller.skypilot_plugin.KueueAgingPlugin",
                        "parameters": {"config": str(config), "state": str(state)},
                    }
                ]
            }
        )
    )
    patch = pytest.MonkeyPatch()
    patch.setenv("HOME", str(tmp))
    patch.setenv("SKYPILOT_GLOBAL_CONFIG", str(tmp / "global.yaml"))
    patch.setenv("SKYPILOT_PROJECT_CONFIG", str(tmp / "project.yaml"))
    patch.setenv("SKYPILOT_SERVER_PLUGINS_CONFIG", str(plugins_yaml))
    for name in ("SKYPILOT_CONFIG", "SKYPILOT_API_SERVER_ENDPOINT", "SKY_KUEUE_STATE", "SKY_KUEUE_CONFIG"):
        patch.delenv(name, raising=False)
    from sky import skypilot_config
    from sky.server import plugins
    from sky.utils import registry
    from sky.utils.plugin_extensions import ExternalFailureSource

    skypilot_config.reload_config()
    strategies = dict(registry.JOBS_RECOVERY_STRATEGY_REGISTRY)
    saved = (plugins._plugins_loaded, dict(plugins._PLUGINS), ExternalFailureSource._get_func)
    saved_clear = ExternalFailureSource._clear_func
    try:
        plugins.load_plugins(plugins.ExtensionContext(context=plugins.PluginContext.CONTROLLER))
        yield {"plugins": plugins, "registry": registry, "failures": ExternalFailureSource}
    finally:
        registry.JOBS_RECOVERY_STRATEGY_REGISTRY.clear()
        registry.JOBS_RECOVERY_STRATEGY_REGISTRY.update(strategies)
        plugins._plugins_loaded, plugins._PLUGINS = saved[0], saved[1]
        ExternalFailureSource._get_func, ExternalFailureSource._clear_func = saved[2], saved_clear
        patch.undo()
        skypilot_config.reload_config()


def _task(label: str = "dev-priority") -> Any:
    import sky

    return sky.Task.from_yaml_config(
        {
            "name": "train",
            "resources": {"infra": "kubernetes", "cpus": 2, "job_recovery": {"strategy": "KUEUE_AGING"}},
            "config": {
                "kubernetes": {"pod_config": {"metadata": {"labels": {"kueue.x-k8s.io/priority-class": label}}}}
            },
            "run": "python train.py",
        }
    )


def _executor(task: Any, job_id: int = 7) -> Any:
    from sky import backends
    from sky.jobs import recovery_strategy

    return recovery_strategy.StrategyExecutor.make(
        "train-7",
        backends.CloudVmRayBackend(),
        task,
        job_id,
        0,
        None,
        set(),
        asyncio.Lock(),
        asyncio.Condition(),
    )


def _labels(task: Any) -> list[str | None]:
    """The priority-class label each resource candidate would put on the pods."""
    labels = []
    for resources in task.resources:
        pod_config = ((resources.cluster_config_overrides or {}).get("kubernetes") or {}).get("pod_config") or {}
        labels.append(((pod_config.get("metadata") or {}).get("labels") or {}).get("kueue.x-k8s.io/priority-class"))
    return labels


def test_skypilots_loader_installs_the_plugin_and_registers_the_strategy(sky_with_plugin: dict[str, Any]) -> None:
    from sky_kueue.controller.skypilot_plugin import KueueAgingPlugin, KueueAgingStrategyExecutor

    plugins, registry = sky_with_plugin["plugins"], sky_with_plugin["registry"]
    assert any(isinstance(p, KueueAgingPlugin) for p in plugins.get_plugins())
    assert registry.JOBS_RECOVERY_STRATEGY_REGISTRY.from_str("KUEUE_AGING") is KueueAgingStrategyExecutor
    # Loading again (SkyPilot loads MAIN, then UVICORN, in one process) must not fail.
    plugins.load_plugins(plugins.ExtensionContext(context=plugins.PluginContext.UVICORN))
    executor = _executor(_task())
    assert isinstance(executor, KueueAgingStrategyExecutor)


def test_recover_relabels_the_relaunch_with_the_aged_class(
    sky_with_plugin: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sky.jobs import recovery_strategy

    seen: list[list[str | None]] = []

    async def relaunch(self: Any) -> float:  # SkyPilot's EAGER_NEXT_REGION recovery, minus the cloud
        seen.append(_labels(self.dag.tasks[0]))
        return 1.0

    monkeypatch.setattr(recovery_strategy.EagerFailoverStrategyExecutor, "recover", relaunch)
    executor = _executor(_task())
    assert asyncio.run(executor.recover()) == 1.0
    # 2 preemptions x 100 points = +200 on base 100 -> the highest class <= 300, below prod's 1000.
    assert seen == [["dev-aged-2"]]


def test_a_job_without_controller_history_is_aged_by_its_own_recoveries(
    sky_with_plugin: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sky.jobs import recovery_strategy

    seen: list[list[str | None]] = []

    async def relaunch(self: Any) -> float:
        seen.append(_labels(self.dag.tasks[0]))
        return 1.0

    monkeypatch.setattr(recovery_strategy.EagerFailoverStrategyExecutor, "recover", relaunch)
    executor = _executor(_task(), job_id=99)
    asyncio.run(executor.recover())
    asyncio.run(executor.recover())
    assert seen == [["dev-aged-1"], ["dev-aged-2"]]


def test_the_failure_source_reports_kueue_preempted_with_the_preemptor(sky_with_plugin: dict[str, Any]) -> None:
    failures = sky_with_plugin["failures"]
    assert failures.is_registered()
    assert failures.get(cluster_hash="abc") == []  # status refreshes by hash are never influenced
    (failure,) = failures.get(cluster_name="train-7")
    assert failure["failure_mode"] == "KUEUE_PREEMPTED"
    assert PREEMPTOR_UID in failure["failure_reason"]
    assert "/team-ab/team-a-cq" in failure["failure_reason"]
    assert "InCohortReclaimWhileBorrowing" in failure["failure_reason"]
    assert failures.clear(cluster_name="train-7") == [failure]
    assert failures.get(cluster_name="train-7") == []


def test_another_plugins_failure_source_is_chained_not_replaced(
    sky_with_plugin: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sky_kueue.controller.skypilot_plugin import KueueAgingPlugin, register_failure_source

    failures = sky_with_plugin["failures"]
    theirs = {"cluster_hash": "h", "failure_mode": "GPU_XID", "failure_reason": "xid 79", "cleared_at": None}
    cleared: list[str | None] = []

    def their_get(cluster_hash: str | None = None, cluster_name: str | None = None) -> list[dict[str, Any]]:
        return [theirs] if cluster_name == "train-7" else []

    def their_clear(cluster_hash: str | None = None, cluster_name: str | None = None) -> list[dict[str, Any]]:
        cleared.append(cluster_name)
        return their_get(cluster_hash, cluster_name)

    (plugin,) = [p for p in sky_with_plugin["plugins"]._PLUGINS.values() if isinstance(p, KueueAgingPlugin)]
    # The module's source is shared: another test may have cleared job 7's failure in it already.
    monkeypatch.setattr(plugin.source, "_cleared", set())
    failures.register(their_get, their_clear)
    register_failure_source(plugin.source)
    register_failure_source(plugin.source)  # a second install adds nothing

    reported = failures.get(cluster_name="train-7")
    assert [f["failure_mode"] for f in reported] == ["GPU_XID", "KUEUE_PREEMPTED"]
    assert len(failures.clear(cluster_name="train-7")) == 2
    assert cleared == ["train-7"]


def test_a_broken_earlier_failure_source_does_not_hide_kueue_preemptions(sky_with_plugin: dict[str, Any]) -> None:
    from sky_kueue.controller.skypilot_plugin import chain_failure_sources

    def broken(cluster_hash: str | None = None, cluster_name: str | None = None) -> list[dict[str, Any]]:
        raise RuntimeError("boom")

    def ours(cluster_hash: str | None = None, cluster_name: str | None = None) -> list[dict[str, Any]]:
        return [{"failure_mode": "KUEUE_PREEMPTED"}]

    assert chain_failure_sources(broken, ours)(None, "c") == [{"failure_mode": "KUEUE_PREEMPTED"}]
    assert chain_failure_sources(None, ours)(None, "c") == [{"failure_mode": "KUEUE_PREEMPTED"}]


def test_the_shipped_plugins_yaml_names_this_plugin_with_parameters_it_takes() -> None:
    shipped = yaml.safe_load((REPO / "configs" / "plugins.yaml").read_text())
    (entry,) = shipped["plugins"]
    module, _, name = entry["class"].rpartition(".")
    import importlib

    plugin_class = getattr(importlib.import_module(module), name)
    plugin = plugin_class(**entry["parameters"])
    assert plugin.name == "sky-kueue-aging"


def _burst_task() -> Any:
    """A task as the admin policy leaves it for a team that may burst: Kubernetes, then AWS."""
    import sky

    return sky.Task.from_yaml_config(
        {
            "name": "train",
            "resources": {
                "ordered": [{"infra": "kubernetes", "cpus": 2}, {"infra": "aws", "cpus": 2}],
                "job_recovery": {"strategy": "KUEUE_AGING"},
            },
            "run": "python train.py",
        }
    )


def _clouds(task: Any) -> list[str]:
    return [str(r.cloud) for r in task.resources]


@pytest.fixture
def burst_after_two(
    sky_with_plugin: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> list[list[str]]:
    """The strategy with ``burst_after_preemptions: 2`` (band policy ``rank``); records each relaunch's clouds."""
    from sky.jobs import recovery_strategy

    from sky_kueue.controller.skypilot_plugin import AgingSource, KueueAgingStrategyExecutor

    config = _config(tmp_path, {"policy": "rank", "burst_after_preemptions": 2}, name="burst.yaml")
    monkeypatch.setattr(KueueAgingStrategyExecutor, "source", AgingSource(str(config), str(_state(tmp_path))))
    seen: list[list[str]] = []

    async def relaunch(self: Any) -> float:  # SkyPilot's EAGER_NEXT_REGION recovery, minus the launch
        seen.append(_clouds(self.dag.tasks[0]))
        return 1.0

    monkeypatch.setattr(recovery_strategy.EagerFailoverStrategyExecutor, "recover", relaunch)
    return seen


def test_a_job_preempted_burst_after_preemptions_times_relaunches_on_its_cloud(
    burst_after_two: list[list[str]],
) -> None:
    # Job 7's controller history: preempted twice by prod, so the first recovery bursts.
    executor = _executor(_burst_task())
    asyncio.run(executor.recover())
    asyncio.run(executor.recover())
    assert burst_after_two == [["AWS"], ["AWS"]]


def test_without_controller_history_a_gated_team_is_burst_by_the_strategys_own_count_only_at_the_bound(
    burst_after_two: list[list[str]],
) -> None:
    # team-a's burst section gives it a predicted-wait gate (max 1 stay by default); without the
    # controller's history the job's team is unknown and the gate applies: the 2nd recovery is
    # due a burst and the gate keeps it (no mark), the 3rd is past the bound and bursts.
    executor = _executor(_burst_task(), job_id=99)
    for _ in range(3):
        asyncio.run(executor.recover())
    assert burst_after_two == [["Kubernetes", "AWS"], ["Kubernetes", "AWS"], ["AWS"]]


def test_without_controller_history_and_no_gated_team_the_strategy_counts_its_own_recoveries(
    sky_with_plugin: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sky.jobs import recovery_strategy

    from sky_kueue.controller.skypilot_plugin import AgingSource, KueueAgingStrategyExecutor

    config = _config(tmp_path, {"policy": "rank", "burst_after_preemptions": 2}, name="no-gate.yaml")
    data = yaml.safe_load(config.read_text())
    for team in data["teams"].values():
        team.pop("burst", None)
    config.write_text(yaml.safe_dump(data))
    monkeypatch.setattr(KueueAgingStrategyExecutor, "source", AgingSource(str(config), str(_state(tmp_path))))
    seen: list[list[str]] = []

    async def relaunch(self: Any) -> float:
        seen.append(_clouds(self.dag.tasks[0]))
        return 1.0

    monkeypatch.setattr(recovery_strategy.EagerFailoverStrategyExecutor, "recover", relaunch)
    executor = _executor(_burst_task(), job_id=99)
    for _ in range(3):
        asyncio.run(executor.recover())
    assert seen == [["Kubernetes", "AWS"], ["AWS"], ["AWS"]]


def test_a_burst_to_a_kubernetes_context_keeps_only_that_context(
    sky_with_plugin: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """team-b's burst target is another cluster (``k8s/burst-ctx``): once the controller marked
    job 7 for a burst (team-b's burst section gates it), the relaunch goes there alone."""
    from sky.jobs import recovery_strategy

    from sky_kueue.controller.skypilot_plugin import AgingSource, KueueAgingStrategyExecutor, Recovery

    config = _config(tmp_path, {"policy": "rank", "burst_after_preemptions": 1}, name="burst-k8s.yaml")
    data = yaml.safe_load(config.read_text())
    data["teams"]["team-b"]["burst"] = {
        "max_queue_wait_seconds": 900,
        "clouds": ["k8s/burst-ctx"],
        "predicted_wait_gate_max_stays": None,  # only the controller's mark bursts it here
    }
    config.write_text(yaml.safe_dump(data))
    state = _state(tmp_path)
    source = AgingSource(str(config), str(state))
    history = source.history(7)
    assert history is not None
    ungated, why = source.burst_verdict(Recovery(source, 7, 1))
    assert not ungated and "predicted-wait gate decides" in why  # preempted twice, not marked: stays
    with SqliteHistoryStore(state) as store:
        assert history.identity is not None
        store.record_burst(
            history.identity,
            BurstRecord(T0 + 2_000, "predicted-on-prem-wait", "predicted any on-prem wait 3600s", 2, 3600.0),
        )
    monkeypatch.setattr(KueueAgingStrategyExecutor, "source", source)
    seen: list[list[tuple[str, str | None]]] = []

    async def relaunch(self: Any) -> float:
        seen.append([(str(r.cloud), r.region) for r in self.dag.tasks[0].resources])
        return 1.0

    monkeypatch.setattr(recovery_strategy.EagerFailoverStrategyExecutor, "recover", relaunch)
    import sky

    task = sky.Task.from_yaml_config(
        {
            "name": "train",
            "resources": {
                "ordered": [
                    {"infra": "k8s/sky-kueue-sandbox", "cpus": 2},
                    {"infra": "k8s/burst-ctx", "cpus": 2},
                ],
                "job_recovery": {"strategy": "KUEUE_AGING"},
            },
            "run": "python train.py",
        }
    )
    asyncio.run(_executor(task).recover())
    assert seen == [[("Kubernetes", "burst-ctx")]]


T = TypeVar("T")


def _observed_relaunches(
    monkeypatch: pytest.MonkeyPatch,
    config: Path,
    state: Path,
    task: Any,
    job_id: int,
    times: int,
    observe: Callable[[Any], T],
) -> list[T]:
    """Runs ``times`` recoveries of ``task`` as job ``job_id`` under ``config``; ``observe`` of
    each relaunch's task (SkyPilot's relaunch itself replaced: it would provision)."""
    from sky.jobs import recovery_strategy

    from sky_kueue.controller.skypilot_plugin import AgingSource, KueueAgingStrategyExecutor

    monkeypatch.setattr(KueueAgingStrategyExecutor, "source", AgingSource(str(config), str(state)))
    seen: list[T] = []

    async def relaunch(self: Any) -> float:
        seen.append(observe(self.dag.tasks[0]))
        return 1.0

    monkeypatch.setattr(recovery_strategy.EagerFailoverStrategyExecutor, "recover", relaunch)
    executor = _executor(task, job_id=job_id)
    for _ in range(times):
        asyncio.run(executor.recover())
    return seen


def _relaunches(
    monkeypatch: pytest.MonkeyPatch, config: Path, state: Path, task: Any, job_id: int, times: int
) -> list[list[str]]:
    """The clouds of each of ``times`` relaunches."""
    return _observed_relaunches(monkeypatch, config, state, task, job_id, times, _clouds)


def _burst_config(tmp: Path, gates: dict[str, bool], max_stays: int | None = None) -> Path:
    """Burst after one preemption; each team in ``gates`` may burst to AWS with its gate on or
    off, the gate keeping a job at most ``max_stays`` times (None: unbounded)."""
    config = _config(tmp, {"policy": "rank", "burst_after_preemptions": 1}, name="gate-switch.yaml")
    data = yaml.safe_load(config.read_text())
    for team, gate in gates.items():
        data["teams"][team]["burst"] = {
            "max_queue_wait_seconds": 900,
            "clouds": ["aws"],
            "predicted_wait_gate": gate,
            "predicted_wait_gate_max_stays": max_stays,
        }
    config.write_text(yaml.safe_dump(data))
    return config


@pytest.mark.parametrize(("gate", "expected"), [(True, [["Kubernetes", "AWS"]]), (False, [["AWS"]])])
def test_a_team_with_the_gate_off_bursts_on_the_controllers_preemption_count(
    sky_with_plugin: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    gate: bool,
    expected: list[list[str]],
) -> None:
    # Job 7 (team-b) was preempted twice in the controller's history and never marked: with the
    # gate on only a mark bursts it; with burst.predicted_wait_gate: false the count does.
    config = _burst_config(tmp_path, {"team-b": gate})
    assert _relaunches(monkeypatch, config, _state(tmp_path), _burst_task(), 7, 1) == expected


def test_a_gated_job_kept_as_often_as_the_bound_allows_bursts_at_the_relaunch_without_a_mark(
    sky_with_plugin: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Job 7 (team-b, gate on, burst after 1) was preempted twice and never marked: the gate kept
    # it once, so with predicted_wait_gate_max_stays 1 its relaunch bursts; with 2 it does not yet.
    from sky_kueue.controller.skypilot_plugin import AgingSource, Recovery

    state = _state(tmp_path)
    bounded = AgingSource(str(_burst_config(tmp_path, {"team-b": True}, max_stays=1)), str(state))
    bursts, why = bounded.burst_verdict(Recovery(bounded, 7, 1))
    assert bursts and "predicted_wait_gate_max_stays 1 reached" in why
    assert _relaunches(
        monkeypatch, _burst_config(tmp_path, {"team-b": True}, max_stays=1), state, _burst_task(), 7, 1
    ) == [["AWS"]]
    looser = AgingSource(str(_burst_config(tmp_path, {"team-b": True}, max_stays=2)), str(state))
    bursts, why = looser.burst_verdict(Recovery(looser, 7, 1))
    assert not bursts and "predicted-wait gate decides" in why


def _team_task(team: str) -> Any:
    """:func:`_burst_task` with the team label the admin policy puts on the task's pods."""
    import sky

    return sky.Task.from_yaml_config(
        {
            "name": "train",
            "resources": {
                "ordered": [{"infra": "kubernetes", "cpus": 2}, {"infra": "aws", "cpus": 2}],
                "job_recovery": {"strategy": "KUEUE_AGING"},
            },
            "config": {"kubernetes": {"pod_config": {"metadata": {"labels": {"sky-kueue.io/team": team}}}}},
            "run": "python train.py",
        }
    )


@pytest.mark.parametrize(
    ("team", "expected"),
    [("team-a", [["AWS"], ["AWS"]]), ("team-b", [["Kubernetes", "AWS"]] * 2), ("team-x", [["Kubernetes", "AWS"]] * 2)],
)
def test_without_controller_history_the_tasks_team_label_picks_its_gate(
    sky_with_plugin: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    team: str,
    expected: list[list[str]],
) -> None:
    # team-a switched its gate off, team-b keeps it: job 99 has no controller history, so the
    # strategy counts its own recoveries; the pods' team label says whose gate applies (an
    # unknown team gets the strictest gate, team-b's: only a controller mark would burst it).
    config = _burst_config(tmp_path, {"team-a": False, "team-b": True})
    assert _relaunches(monkeypatch, config, _state(tmp_path), _team_task(team), 99, 2) == expected


def test_a_task_without_a_cloud_candidate_relaunches_on_kubernetes(burst_after_two: list[list[str]]) -> None:
    executor = _executor(_task())
    asyncio.run(executor.recover())
    assert burst_after_two == [["Kubernetes"]]


def test_no_burst_without_burst_after_preemptions(
    sky_with_plugin: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sky.jobs import recovery_strategy

    seen: list[list[str]] = []

    async def relaunch(self: Any) -> float:
        seen.append(_clouds(self.dag.tasks[0]))
        return 1.0

    monkeypatch.setattr(recovery_strategy.EagerFailoverStrategyExecutor, "recover", relaunch)
    executor = _executor(_burst_task())  # job 7, preempted twice; the module's config sets no burst
    asyncio.run(executor.recover())
    assert seen == [["Kubernetes", "AWS"]]


def _kubeconfig(tmp: Path, server_url: str) -> Path:
    """A kubeconfig with one context, ``sandbox``, for the local API-server emulator."""
    path = tmp / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "sandbox", "cluster": {"server": server_url}}],
                "users": [{"name": "sandbox", "user": {}}],
                "contexts": [{"name": "sandbox", "context": {"cluster": "sandbox", "user": "sandbox"}}],
                "current-context": "sandbox",
            }
        )
    )
    return path


def test_the_strategy_reads_an_in_cluster_controllers_jobhistories(
    sky_with_plugin: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The HA deployment keeps its history as JobHistory objects (--state kubernetes); the
    # strategy reads them through the official client, so job 7's two preemptions burst it.
    from sky.jobs import recovery_strategy

    from sky_kueue.controller.skypilot_plugin import AgingSource, KueueAgingStrategyExecutor
    from sky_kueue.sandbox.apiserver import ApiServer

    from .conftest import STORE_NAMESPACE, kubernetes_store

    with ApiServer() as server:
        writer = kubernetes_store(server)
        _record_job_7(writer)
        before = len(server.requests.records())
        source = AgingSource(
            str(_config(tmp_path, {"policy": "rank", "burst_after_preemptions": 2})),
            f"kubernetes:{STORE_NAMESPACE}",
            kubeconfig=str(_kubeconfig(tmp_path, server.url)),
            context="sandbox",
        )
        history = source.history(7)
        assert history is not None and len(history.preemptions) == 2
        assert source.history(8) is None
        monkeypatch.setattr(KueueAgingStrategyExecutor, "source", source)
        seen: list[list[str]] = []

        async def relaunch(self: Any) -> float:
            seen.append(_clouds(self.dag.tasks[0]))
            return 1.0

        monkeypatch.setattr(recovery_strategy.EagerFailoverStrategyExecutor, "recover", relaunch)
        asyncio.run(_executor(_burst_task()).recover())
        assert seen == [["AWS"]]
        # The failure source reads the same objects: job 7's last preemption is reported.
        failures = source.get_failures(cluster_name="train-7")
        assert [f["failure_mode"] for f in failures] == ["KUEUE_PREEMPTED"]
        plugin_requests = {
            (r.info.group, r.info.resource, r.info.verb, r.info.namespace)
            for r in server.requests.records()[before:]
            if r.info.resource
        }
    # Least privilege, both ways: the shipped reader Role grants exactly what the plugin used.
    (role,) = yaml.safe_load_all((REPO / "configs" / "skypilot" / "jobhistory-reader.yaml").read_text())
    granted = {
        (group, resource, verb, role["metadata"]["namespace"])
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert plugin_requests == granted


def test_an_unreadable_state_never_blocks_a_relaunch(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from sky_kueue.controller.skypilot_plugin import AgingSource

    bad = AgingSource(str(_config(tmp_path)), "nosuch:store")
    assert bad.history(7) is None
    assert "unknown store 'nosuch'" in caplog.text
    # A Kubernetes state whose cluster cannot be found: logged, no history, no exception.
    unreachable = AgingSource(str(_config(tmp_path)), "kubernetes", kubeconfig=str(tmp_path / "missing"))
    assert unreachable.history(7) is None
    assert "cannot read the controller's state kubernetes" in caplog.text


# --- the relaunch lane (issue 39) -----------------------------------------------------------


def _lane_config(tmp: Path, after: int, quotas: dict[str, dict[str, str]] | None = None) -> Path:
    """:func:`_config` with a relaunch lane for team-b after ``after`` preemptions."""
    config = _config(tmp, name=f"lane-{after}.yaml")
    data = yaml.safe_load(config.read_text())
    data["teams"]["team-b"]["lane"] = {
        "local_queue": "relaunch",
        "after_preemptions": after,
        "cluster_queue": "team-b-cq-relaunch",
        "quotas": quotas
        if quotas is not None
        else {"cpu": {"default-flavor": "4"}, "memory": {"default-flavor": "16Gi"}},
    }
    config.write_text(yaml.safe_dump(data))
    return config


def _placed_task(team: str = "team-b", cpus: int = 2, queue: str = "team-b-lq") -> Any:
    """A task as the admin policy leaves it: Kubernetes in the team's queue, then AWS."""
    import sky

    labels = {
        "kueue.x-k8s.io/queue-name": queue,
        "kueue.x-k8s.io/priority-class": "dev-priority",
        "sky-kueue.io/team": team,
    }
    overrides = {"kubernetes": {"kueue": {"local_queue_name": queue}, "pod_config": {"metadata": {"labels": labels}}}}
    return sky.Task.from_yaml_config(
        {
            "name": "train",
            "resources": {
                "ordered": [
                    {"infra": "kubernetes", "cpus": cpus, "_cluster_config_overrides": overrides},
                    {"infra": "aws", "cpus": cpus},
                ],
                "job_recovery": {"strategy": "KUEUE_AGING"},
            },
            "run": "python train.py",
        }
    )


def _queues(task: Any) -> list[tuple[str, str | None, str | None, str | None]]:
    """Per candidate: its cloud, the pods' queue label, SkyPilot's queue setting and the class label."""
    out = []
    for resources in task.resources:
        kubernetes = (resources.cluster_config_overrides or {}).get("kubernetes") or {}
        labels = ((kubernetes.get("pod_config") or {}).get("metadata") or {}).get("labels") or {}
        out.append(
            (
                str(resources.cloud),
                labels.get("kueue.x-k8s.io/queue-name"),
                (kubernetes.get("kueue") or {}).get("local_queue_name"),
                labels.get("kueue.x-k8s.io/priority-class"),
            )
        )
    return out


def _lane_relaunches(
    monkeypatch: pytest.MonkeyPatch, config: Path, state: Path, task: Any, job_id: int, times: int
) -> list[list[tuple[str, str | None, str | None, str | None]]]:
    """The queues and class of each of ``times`` relaunches (:func:`_queues`)."""
    return _observed_relaunches(monkeypatch, config, state, task, job_id, times, _queues)


def test_a_job_preempted_k_times_relaunches_in_its_teams_lane(
    sky_with_plugin: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Job 7 (team-b) was preempted twice (controller history): with k=2 its relaunch's pods
    # carry the lane's queue label, SkyPilot names the same queue, the aged class stays, and
    # the AWS candidate gets no queue.
    seen = _lane_relaunches(monkeypatch, _lane_config(tmp_path, 2), _state(tmp_path), _placed_task(), 7, 1)
    assert seen == [[("Kubernetes", "relaunch", "relaunch", "dev-aged-2"), ("AWS", None, None, "dev-aged-2")]]


def test_a_job_preempted_fewer_than_k_times_stays_in_its_teams_queue(
    sky_with_plugin: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _lane_relaunches(monkeypatch, _lane_config(tmp_path, 3), _state(tmp_path), _placed_task(), 7, 1)
    assert seen == [[("Kubernetes", "team-b-lq", "team-b-lq", "dev-aged-2"), ("AWS", None, None, "dev-aged-2")]]


def test_a_relaunch_larger_than_the_lane_stays_in_its_teams_queue(
    sky_with_plugin: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The lane holds 4 CPUs; a 6-CPU relaunch could never be admitted there (a misfit).
    caplog.set_level("INFO", logger="sky_kueue.controller.skypilot_plugin")
    seen = _lane_relaunches(monkeypatch, _lane_config(tmp_path, 2), _state(tmp_path), _placed_task(cpus=6), 7, 1)
    assert [q[:3] for q in seen[0]] == [("Kubernetes", "team-b-lq", "team-b-lq"), ("AWS", None, None)]
    assert "it asks for 6 cpu, the lane holds 4: it stays in its team's queue" in caplog.text


def test_without_controller_history_the_strategys_own_recoveries_count_toward_the_lane(
    sky_with_plugin: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Job 99 has no history: its first recovery counts one preemption (k=2 not reached), the
    # second two; once in the lane its later relaunches stay there.
    seen = _lane_relaunches(monkeypatch, _lane_config(tmp_path, 2), _state(tmp_path), _placed_task(), 99, 3)
    assert [q[0][1] for q in seen] == ["team-b-lq", "relaunch", "relaunch"]


def _launch_retries(
    monkeypatch: pytest.MonkeyPatch, config: Path, state: Path, task: Any, job_id: int
) -> list[tuple[str, str | None, str | None, str | None]]:
    """The queues and class of ``task`` after SkyPilot's launch loop tears down a failed attempt
    of job ``job_id`` (``_cleanup_cluster`` outside ``recover``; the teardown itself replaced)."""
    from sky.jobs import recovery_strategy

    from sky_kueue.controller.skypilot_plugin import AgingSource, KueueAgingStrategyExecutor

    monkeypatch.setattr(KueueAgingStrategyExecutor, "source", AgingSource(str(config), str(state)))
    teardowns: list[int] = []
    monkeypatch.setattr(recovery_strategy.StrategyExecutor, "_cleanup_cluster", lambda self: teardowns.append(1))
    executor = _executor(task, job_id=job_id)
    executor._cleanup_cluster()
    assert teardowns == [1]  # SkyPilot's own teardown still runs
    return _queues(executor.dag.tasks[0])


def test_a_launch_retry_of_a_job_the_controller_saw_preempted_goes_to_its_lane(
    sky_with_plugin: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kueue preempted job 7 before SkyPilot saw it RUNNING: SkyPilot retries the launch without
    # recover(). The controller's history counts 2 preemptions, so with k=2 the retry moves.
    seen = _launch_retries(monkeypatch, _lane_config(tmp_path, 2), _state(tmp_path), _placed_task(), 7)
    assert seen == [("Kubernetes", "relaunch", "relaunch", "dev-aged-2"), ("AWS", None, None, "dev-aged-2")]


def test_a_launch_retry_without_controller_history_relaunches_unchanged(
    sky_with_plugin: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Job 99 has no history: the launch loop also retries failures that are no preemption, so
    # the strategy's own count is not used there (k=1 would otherwise move it at once).
    caplog.set_level("INFO", logger="sky_kueue.controller.skypilot_plugin")
    seen = _launch_retries(monkeypatch, _lane_config(tmp_path, 1), _state(tmp_path), _placed_task(), 99)
    assert seen == [("Kubernetes", "team-b-lq", "team-b-lq", "dev-priority"), ("AWS", None, None, None)]
    assert "SkyPilot retries its launch; without the controller's history" in caplog.text


def test_a_team_without_a_lane_keeps_its_queue(
    sky_with_plugin: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # team-a has no lane; job 99 (no history) recovered three times stays in team-a's queue.
    task = _placed_task(team="team-a", queue="team-a-lq")
    seen = _lane_relaunches(monkeypatch, _lane_config(tmp_path, 1), _state(tmp_path), task, 99, 3)
    assert [q[0][1] for q in seen] == ["team-a-lq"] * 3


#: What the admin's own SkyPilot config says about the sandbox context's queue, by case.
#: A context scope beats a task's ``config:`` when SkyPilot 0.14.1 resolves the queue
#: (``sky/skypilot_config.py`` ``_get_effective_scoped_config_value``), so the policy writes the
#: team's queue into such a scope (``sky_kueue/skypilot/rewrite.py`` ``_overwrite_queue``), where
#: the strategy's override cannot reach: only the pods' label carries the lane there.
ADMIN_CONTEXT_SCOPES: dict[str, dict[str, Any]] = {
    "no queue": {},
    "kueue.local_queue_name": {"kueue": {"local_queue_name": "admins-lq"}},
    "quota.queue": {"quota": {"queue": "admins-lq"}},
}


def _recording_relaunches(monkeypatch: pytest.MonkeyPatch, tmp: Path, after: int) -> tuple[list[Any], list[str]]:
    """team-b (user bob) with a lane after ``after`` preemptions and the strategy's history
    source installed; SkyPilot's recovery records the relaunched DAGs instead of launching them,
    and every cluster config SkyPilot writes is recorded (its ``ray`` YAML path)."""
    from sky.backends import backend_utils
    from sky.jobs import recovery_strategy

    from sky_kueue.controller.skypilot_plugin import AgingSource, KueueAgingStrategyExecutor

    plugin_config = _lane_config(tmp, after)
    monkeypatch.setenv("SKY_KUEUE_CONFIG", str(plugin_config))
    monkeypatch.setenv("SKYPILOT_USER", "bob")  # team-b's user in the shipped config
    monkeypatch.setattr(KueueAgingStrategyExecutor, "source", AgingSource(str(plugin_config), str(_state(tmp))))
    relaunches: list[Any] = []

    async def relaunch(self: Any) -> float:
        relaunches.append(self.dag)
        return 1.0

    monkeypatch.setattr(recovery_strategy.EagerFailoverStrategyExecutor, "recover", relaunch)
    rendered: list[str] = []
    write_cluster_config = backend_utils.write_cluster_config

    def recording(*args: Any, **kwargs: Any) -> dict[str, Any]:
        written: dict[str, Any] = write_cluster_config(*args, **kwargs)
        rendered.append(written["ray"])
        return written

    monkeypatch.setattr(backend_utils, "write_cluster_config", recording)
    return relaunches, rendered


@pytest.mark.parametrize("admin_scope", sorted(ADMIN_CONTEXT_SCOPES))
def test_skypilot_renders_the_lane_relaunchs_pods_in_the_lanes_queue(
    sky_with_plugin: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, admin_scope: str
) -> None:
    """The lane move as far as the pods SkyPilot would create, all through SkyPilot 0.14.1.

    Why: the move only rewrites the task's ``config:``; whether Kueue sees the lane depends on
    what SkyPilot renders from it under the config the admin policy returned. The job is
    submitted through SkyPilot's policy path (``admin_policy_utils.apply``, ``jobs.launch``)
    on the sandbox; the strategy recovers it (job 7, preempted twice, lane after 2); the
    relaunch goes through ``execution.launch`` with ``_is_launched_by_jobs_controller`` as the
    jobs controller's does, under the job's config without ``admin_policy``
    (``sky/utils/controller_utils.py`` ``shared_controller_vars_to_fill`` removes it), and
    ``dryrun`` stops it at the cluster config ``backend_utils.write_cluster_config`` renders
    from ``kubernetes-ray.yml.j2``. Its template labels the pods with SkyPilot's resolved
    queue, then ``combine_pod_config_fields`` (``sky/provision/kubernetes/utils.py``) merges
    the effective ``kubernetes.pod_config`` over them, the task's override last, so the lane's
    label wins even where a context scope makes SkyPilot resolve the team's queue. The task
    names its image so that no catalog is downloaded.
    """
    import sky
    from sky import execution, skypilot_config
    from sky.jobs import utils as jobs_utils
    from sky.server.requests.request_names import AdminPolicyRequestName
    from sky.utils import admin_policy_utils, annotations

    from sky_kueue.sandbox import seed
    from sky_kueue.sandbox.sandbox import Sandbox
    from sky_kueue.sandbox.skypilot_home import KUBERNETES_IMAGES
    from sky_kueue.skypilot import cluster_view
    from tests.skypilot.builders import CONTEXT

    relaunches, rendered = _recording_relaunches(monkeypatch, tmp_path, 2)
    submitted = sky.Task.from_yaml_config(
        {
            "name": "train",
            "resources": {
                "infra": "kubernetes",
                "cpus": 2,
                "image_id": f"docker:{KUBERNETES_IMAGES[0][1]}",
                "labels": {"sky-kueue.io/team": "team-b"},
            },
            "run": "python train.py",
        }
    )
    try:
        with Sandbox(run_emulator=False) as box:
            box.apply(seed.seed_cluster())
            monkeypatch.setenv("KUBECONFIG", str(box.kubeconfig_path))
            annotations.clear_request_level_cache()  # one request each, as on the API server
            admins = skypilot_config.to_dict()
            admins.set_nested(("admin_policy",), "sky_kueue.skypilot.policy.KueuePolicy")
            admins.set_nested(("kubernetes", "allowed_contexts"), [CONTEXT])
            if ADMIN_CONTEXT_SCOPES[admin_scope]:
                admins.set_nested(("kubernetes", "context_configs", CONTEXT), ADMIN_CONTEXT_SCOPES[admin_scope])
            with skypilot_config.replace_skypilot_config(admins):
                dag, job_config = admin_policy_utils.apply(
                    submitted, request_name=AdminPolicyRequestName("jobs.launch")
                )
            job_config.pop_nested(("admin_policy",), None)
            asyncio.run(_executor(dag.tasks[0], job_id=7).recover())
            (relaunched,) = relaunches
            (candidate,) = relaunched.tasks[0].resources
            with skypilot_config.replace_skypilot_config(job_config):
                resolved = skypilot_config.get_effective_queue_name(
                    "kubernetes", region=CONTEXT, override_configs=candidate.cluster_config_overrides
                )
                execution.launch(
                    relaunched,
                    cluster_name=jobs_utils.generate_managed_job_cluster_name("train", 7),
                    dryrun=True,
                    down=True,
                    stream_logs=False,
                    _is_launched_by_jobs_controller=True,
                )
    finally:
        cluster_view.close_live_mirrors()

    # SkyPilot's own queue setting: the lane's, unless a context scope names a queue (the
    # team's, written there by the policy), whose label the pod_config merge then replaces.
    assert resolved == ("team-b-lq" if ADMIN_CONTEXT_SCOPES[admin_scope] else "relaunch")
    (path,) = rendered
    cluster = yaml.safe_load(Path(path).read_text())
    pod = cluster["available_node_types"][cluster["head_node_type"]]["node_config"]
    labels = pod["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "relaunch"
    assert labels["kueue.x-k8s.io/priority-class"] == "dev-aged-2"
    assert cluster["provider"]["namespace"] == "team-b"  # where the lane's LocalQueue is
    assert "team-b-lq" not in yaml.safe_dump(pod["metadata"])


def _skypilot_job(job_id: int, user_hash: str, dag: Any, status: str) -> None:
    """Managed job ``job_id`` in SkyPilot's own managed-jobs state (under the test's HOME), made
    with ``sky.jobs.state``'s functions: submitted with ``dag`` (as the policy left it), then
    STARTING, RUNNING or RECOVERING (``status``)."""
    import time

    from sky.jobs import state
    from sky.utils import dag_utils

    if state.get_job_info_row(job_id) is not None:
        return
    state.set_job_info(job_id, "train", "default", "sky jobs launch", None, None, user_hash=user_hash)
    state.set_pending(job_id, 0, "train", "1x[CPU:2]", "{}")
    state.set_job_dag_yaml_content(job_id, dag_utils.dump_dag_to_yaml_str(dag))

    async def noop(_: str) -> None:
        return None

    async def advance() -> None:
        await state.set_starting_async(job_id, 0, "run", time.time(), "1x[CPU:2]", {}, noop)
        if status == "STARTING":
            return
        await state.set_started_async(job_id, 0, time.time(), noop)
        if status == "RECOVERING":
            await state.set_recovering_async(job_id, 0, False, noop)

    asyncio.run(advance())


#: Consolidation-mode relaunch cases: (job id, SkyPilot job's owner, its team, its status in
#: SkyPilot's state, the lane's after_preemptions, what the policy must answer). Job 7's
#: controller history counts 2 preemptions (:func:`_record_job_7`), which age it to dev-aged-2,
#: and so does :data:`STARTING_JOB`'s; the controller has no history of the others. STARTING is
#: SkyPilot's launch loop retrying a launch Kueue preempted before the job ran
#: (``KueueAgingStrategyExecutor._cleanup_cluster``).
CONSOLIDATED_CASES: dict[str, tuple[int, str, str, str, int, str]] = {
    "genuine, due the lane": (7, "me", "team-b", "RECOVERING", 2, "lane"),
    "genuine, not yet due the lane": (7, "me", "team-b", "RECOVERING", 3, "rung"),
    "genuine launch retry, recorded and due the lane": (STARTING_JOB, "me", "team-b", "STARTING", 2, "lane"),
    "forged: job RUNNING": (8, "me", "team-b", "RUNNING", 2, "lane-queue"),
    "forged: launch retry the controller never saw preempted": (11, "me", "team-b", "STARTING", 2, "lane-queue"),
    "forged: another user's job": (9, "someone-else", "team-b", "RECOVERING", 2, "lane-queue"),
    "forged: another team's job": (10, "me", "team-a", "RECOVERING", 2, "lane-queue"),
    "forged rung: job RUNNING, lane not due": (8, "me", "team-b", "RUNNING", 3, "priority-conflict"),
}


@pytest.mark.parametrize("case", list(CONSOLIDATED_CASES))
def test_in_consolidation_mode_only_skypilots_verified_relaunch_keeps_its_lane_and_rung(
    sky_with_plugin: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """The relaunch as SkyPilot 0.14.1's consolidation mode runs it: through the server's own
    ``admin_policy`` as ``jobs.launch_cluster``.

    Why: there the jobs controller relaunches with ``sdk.launch(..., _is_launched_by_jobs_controller
    =True)`` against the API server itself (``sky/jobs/recovery_strategy.py``), whose config keeps
    ``admin_policy`` (only a dedicated controller's per-job config drops it,
    ``sky/utils/controller_utils.py``), so the policy sees the strategy's lane queue and rung. It
    lets them in only for a job SkyPilot's managed-jobs state (``sky/jobs/state.py``, created here
    with its own functions under the test's HOME) shows RECOVERING, of the requesting user, with
    the policy's team label in its stored DAG, and due the lane by the strategy's own history;
    anything else naming the lane (or the rung) is refused as before. The same request is what
    a client could forge: the job id, cluster name and flag are all the caller's.
    """
    import sky
    from sky import exceptions as sky_exceptions
    from sky import execution, skypilot_config
    from sky.jobs import utils as jobs_utils
    from sky.server.requests.request_names import AdminPolicyRequestName
    from sky.utils import admin_policy_utils, annotations, common_utils

    from sky_kueue.sandbox import seed
    from sky_kueue.sandbox.sandbox import Sandbox
    from sky_kueue.sandbox.skypilot_home import KUBERNETES_IMAGES
    from sky_kueue.skypilot import cluster_view
    from tests.skypilot.builders import CONTEXT

    job_id, owner, team, status, after, expected = CONSOLIDATED_CASES[case]
    monkeypatch.setattr(jobs_utils, "is_consolidation_mode", lambda: True)
    relaunches, rendered = _recording_relaunches(monkeypatch, tmp_path, after)

    def submitted(team_label: str) -> Any:
        return sky.Task.from_yaml_config(
            {
                "name": "train",
                "resources": {
                    "infra": "kubernetes",
                    "cpus": 2,
                    "image_id": f"docker:{KUBERNETES_IMAGES[0][1]}",
                    "labels": {"sky-kueue.io/team": team_label},
                },
                "run": "python train.py",
            }
        )

    me = common_utils.get_user_hash()
    error: Exception | None = None
    try:
        with Sandbox(run_emulator=False) as box:
            box.apply(seed.seed_cluster())
            box.apply(
                [
                    {
                        "apiVersion": "kueue.x-k8s.io/v1beta1",
                        "kind": "WorkloadPriorityClass",
                        "metadata": {"name": name},
                        "value": value,
                    }
                    for name, value in LADDER.items()
                ]
            )
            monkeypatch.setenv("KUBECONFIG", str(box.kubeconfig_path))
            annotations.clear_request_level_cache()
            admins = skypilot_config.to_dict()
            admins.set_nested(("admin_policy",), "sky_kueue.skypilot.policy.KueuePolicy")
            admins.set_nested(("kubernetes", "allowed_contexts"), [CONTEXT])
            with skypilot_config.replace_skypilot_config(admins):
                dag, _ = admin_policy_utils.apply(
                    submitted("team-b"), request_name=AdminPolicyRequestName("jobs.launch")
                )
                if team == "team-b":
                    stored = dag
                else:
                    monkeypatch.setenv("SKYPILOT_USER", "alice")  # team-a's user
                    stored, _ = admin_policy_utils.apply(
                        submitted(team), request_name=AdminPolicyRequestName("jobs.launch")
                    )
                    monkeypatch.setenv("SKYPILOT_USER", "bob")
                _skypilot_job(job_id, me if owner == "me" else owner, stored, status)
                task = dag.tasks[0]
                task.update_envs({"SKYPILOT_MANAGED_JOB_ID": str(job_id)})
                asyncio.run(_executor(task, job_id=7).recover())
                (relaunched,) = relaunches
                # The server keeps its admin_policy (consolidation mode): the relaunch passes it.
                try:
                    execution.launch(
                        relaunched,
                        cluster_name=jobs_utils.generate_managed_job_cluster_name("train", job_id),
                        dryrun=True,
                        down=True,
                        stream_logs=False,
                        _is_launched_by_jobs_controller=True,
                    )
                except sky_exceptions.UserRequestRejectedByPolicy as exc:
                    error = exc
    finally:
        cluster_view.close_live_mirrors()

    if expected == "lane-queue":
        assert error is not None and "relaunch lane" in str(error) and "'relaunch'" in str(error)
        assert not rendered
        return
    if expected == "priority-conflict":
        assert error is not None and "several priority classes (dev-aged-2, dev-priority)" in str(error)
        return
    assert error is None, error
    (path,) = rendered
    cluster = yaml.safe_load(Path(path).read_text())
    labels = cluster["available_node_types"][cluster["head_node_type"]]["node_config"]["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == ("relaunch" if expected == "lane" else "team-b-lq")
    assert labels["kueue.x-k8s.io/priority-class"] == "dev-aged-2"
    assert labels["sky-kueue.io/team"] == "team-b"
