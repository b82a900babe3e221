"""Several Kueue clusters per team: the launch goes where Kueue admits soonest.

Two sandboxes on different ports, one kubeconfig holding both contexts; team-b's queue is
the same on both (the seed setup), with 10 CPUs of cohort quota. Each sandbox is driven by
hand (no emulator): its Workloads are applied already admitted, so "full" and "free" are
exact states, and the mirrors follow them through their watches.
"""

from __future__ import annotations

import copy
import datetime
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from sky_kueue.sandbox.apiserver.clock import ManualClock
from sky_kueue.sandbox.sandbox import Sandbox
from sky_kueue.skypilot import cluster_view
from sky_kueue.skypilot.decision import Placement
from sky_kueue.skypilot.engine import PolicyResult, evaluate
from sky_kueue.skypilot.task_yaml import candidates
from tests.skypilot.builders import (
    DEMO_CONFIG,
    SEED_SCENARIO,
    SEED_SETUP,
    TEMPLATES,
    config,
    demo_config_data,
    pod_labels,
    request,
    task,
)
from tests.skypilot.conftest import SkyEnv

CONTEXT_A = "cluster-a"
CONTEXT_B = "cluster-b"
#: How long a test waits for a mirror to follow a change (seconds); never slept through.
FOLLOW_TIMEOUT_SECONDS = 20.0
#: CPUs of one filler Workload; two fill team-b's cohort (10 CPUs).
FILLER_CPUS = 5


@dataclass
class Clusters:
    a: Sandbox
    b: Sandbox
    kubeconfig: Path


def _filler(index: int) -> dict[str, Any]:
    """An admitted team-b Workload of FILLER_CPUS CPUs (the seed's dev job, renamed)."""
    docs = [d for d in yaml.safe_load_all(SEED_SCENARIO.read_text()) if d]
    dev = copy.deepcopy(next(d for d in docs if d["metadata"]["name"] == "team-b-dev-job"))
    name = f"filler-{index}"
    dev["metadata"].update({"name": name, "uid": f"uid-team-b.{name}"})
    return dev


def fill(box: Sandbox) -> None:
    box.apply([_filler(0), _filler(1)])


def free(box: Sandbox) -> None:
    for index in (0, 1):
        box.store.delete("workloads.kueue.x-k8s.io", f"filler-{index}", "team-b")


def write_kubeconfig(path: Path, servers: dict[str, str]) -> Path:
    """One kubeconfig with a context per server (what `kubectl config` would leave)."""
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": {"server": url}} for n, url in servers.items()],
        "users": [{"name": "user", "user": {}}],
        "contexts": [{"name": n, "context": {"cluster": n, "user": "user"}} for n in servers],
        "current-context": next(iter(servers)),
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[Clusters]:
    clock = ManualClock(datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.timezone.utc))
    try:
        with Sandbox(clock=clock, run_emulator=False) as a, Sandbox(clock=clock, run_emulator=False) as b:
            for box in (a, b):
                box.apply(SEED_SETUP)
            kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", {CONTEXT_A: a.url, CONTEXT_B: b.url})
            yield Clusters(a, b, kubeconfig)
    finally:
        # After the servers are gone: open watches end at once instead of at their timeout.
        cluster_view.close_live_mirrors()


def multi_config(kubeconfig: Path) -> Any:
    return config(
        kubernetes={"contexts": [CONTEXT_A, CONTEXT_B]},
        cluster={"kubeconfig": str(kubeconfig)},
        teams={"team-b": {"clusters": [{"context": CONTEXT_A}, {"context": CONTEXT_B}]}},
    )


def team_b_launch(plugin_config: Any, views: Any) -> PolicyResult:
    return evaluate(request(task(team="team-b", cpus=str(FILLER_CPUS))), plugin_config, views)


def outcomes(result: PolicyResult) -> list[tuple[str | None, str]]:
    return [(r.cluster.context, r.outcome) for r in placed(result).ranking.clusters]


def eventually(launch: Callable[[], PolicyResult], expected: list[tuple[str | None, str]]) -> PolicyResult:
    """The first launch ranked as ``expected``, polling while the mirrors catch up."""
    deadline = time.monotonic() + FOLLOW_TIMEOUT_SECONDS
    while True:
        result = launch()
        if outcomes(result) == expected:
            return result
        assert time.monotonic() < deadline, f"ranked {outcomes(result)}, expected {expected}"
        time.sleep(0.1)


def placed(result: PolicyResult) -> Placement:
    assert isinstance(result.decision, Placement), result.decision
    return result.decision


def test_the_launch_goes_to_the_cluster_that_admits_now_and_follows_the_clusters(clusters: Clusters) -> None:
    plugin_config = multi_config(clusters.kubeconfig)
    views = cluster_view.build_views(plugin_config)
    fill(clusters.a)

    result = team_b_launch(plugin_config, views)
    decision = placed(result)
    assert [(r.cluster.context, r.outcome) for r in decision.ranking.clusters] == [
        (CONTEXT_B, "admit-now"),
        (CONTEXT_A, "wait"),
    ]
    infras = [c["infra"] for c in candidates(result.task)]
    assert infras == [f"kubernetes/{CONTEXT_B}", f"kubernetes/{CONTEXT_A}"]
    assert all(pod_labels(c)["kueue.x-k8s.io/queue-name"] == "team-b-lq" for c in candidates(result.task))
    scopes = result.skypilot_config["kubernetes"]["context_configs"]
    assert scopes[CONTEXT_A]["namespace"] == scopes[CONTEXT_B]["namespace"] == "team-b"

    fill(clusters.b)
    free(clusters.a)
    moved = eventually(lambda: team_b_launch(plugin_config, views), [(CONTEXT_A, "admit-now"), (CONTEXT_B, "wait")])
    assert [c["infra"] for c in candidates(moved.task)] == [f"kubernetes/{CONTEXT_A}", f"kubernetes/{CONTEXT_B}"]

    clusters.a.stop()
    fallback = eventually(
        lambda: team_b_launch(plugin_config, views), [(CONTEXT_B, "wait"), (CONTEXT_A, "unreachable")]
    )
    decision = placed(fallback)
    assert decision.context == CONTEXT_B
    assert [c["infra"] for c in candidates(fallback.task)] == [f"kubernetes/{CONTEXT_B}"]
    assert any(note.startswith(f"context {CONTEXT_A} skipped: cannot be reached") for note in decision.notes)


def test_skypilot_applies_the_policy_and_parses_the_ranked_task(
    clusters: Clusters, sky_env: SkyEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through SkyPilot's own policy path (``admin_policy_utils.apply``): one candidate per
    cluster in rank order, each pinned to its context with that cluster's queue, and each
    context's namespace in its ``context_configs`` scope."""
    from sky.server.requests.request_names import AdminPolicyRequestName
    from sky.utils import admin_policy_utils

    data = demo_config_data()
    data["kubernetes"]["contexts"] = [CONTEXT_A, CONTEXT_B]
    data["cluster"] = {"kubeconfig": str(clusters.kubeconfig)}
    data["teams"]["team-b"]["clusters"] = [{"context": CONTEXT_A}, {"context": CONTEXT_B}]
    plugin_config = tmp_path / "sky-kueue.yaml"
    plugin_config.write_text(yaml.safe_dump(data))
    monkeypatch.setenv("SKY_KUEUE_CONFIG", str(plugin_config))
    fill(clusters.a)

    sky_task = sky_env.sky.Task.from_yaml_config(task(team="team-b", cpus=str(FILLER_CPUS)))
    dag, skypilot_config = admin_policy_utils.apply(sky_task, request_name=AdminPolicyRequestName("jobs.launch"))
    resources = list(dag.tasks[0].resources)
    assert [r.infra.to_str() for r in resources] == [f"kubernetes/{CONTEXT_B}", f"kubernetes/{CONTEXT_A}"]
    for r in resources:
        overrides = r.cluster_config_overrides["kubernetes"]
        assert overrides["kueue"]["local_queue_name"] == "team-b-lq"
        assert overrides["pod_config"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-b-lq"
        assert r.priority_class == "dev-priority"
    for context in (CONTEXT_A, CONTEXT_B):
        assert skypilot_config.get_nested(("kubernetes", "context_configs", context, "namespace"), None) == "team-b"
    again = sky_env.sky.Task.from_yaml_config(dag.tasks[0].to_yaml_config())
    assert [r.infra.to_str() for r in again.resources] == [r.infra.to_str() for r in resources]


def test_launch_dry_run_finds_the_cluster_through_kubeconfig_alone(
    sky_env: SkyEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``cluster.kubeconfig`` in the plugin config: ``$KUBECONFIG`` (a list, as kubectl
    reads it, with a missing entry) names the sandbox, and the prediction is the live one."""
    from click.testing import CliRunner

    from sky_kueue.cli.main import cli

    clock = ManualClock(datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.timezone.utc))
    try:
        with Sandbox(clock=clock, run_emulator=False) as box:
            box.apply([d for d in yaml.safe_load_all(SEED_SCENARIO.read_text()) if d and d["kind"] != "Workload"])
            box.apply([_filler(0)])
            assert "kubeconfig" not in demo_config_data().get("cluster", {})
            monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{box.kubeconfig_path}")
            task_path = str(TEMPLATES / "team-a-gpu-train.yaml")
            result = CliRunner().invoke(
                cli, ["launch", task_path, "--dry-run", "-o", "json", "--config", str(DEMO_CONFIG)]
            )
    finally:
        cluster_view.close_live_mirrors()
    assert result.exit_code == 0, result.output
    described = json.loads(result.output)
    assert described["prediction"]["outcome"] == "admit-after-preemption"
    assert described["prediction"]["preempts"] == ["team-b/filler-0"]
    assert described["placement"] == [
        {
            "context": "sky-kueue-sandbox",
            "outcome": "admit-after-preemption",
            "expected_wait_seconds": None,
            "expected_wait_basis": "",
            "reason": described["prediction"]["reason"],
            "namespace": "team-a",
            "local_queue": "team-a-lq",
            "preempts": ["team-b/filler-0"],
            "ordered": True,
        }
    ]


def test_queue_shows_every_context_side_by_side(clusters: Clusters) -> None:
    from click.testing import CliRunner

    from sky_kueue.cli.main import cli

    fill(clusters.a)
    base = ["queue", "--kubeconfig", str(clusters.kubeconfig)]
    listed = CliRunner().invoke(cli, [*base, "--all-contexts", "-o", "json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)["clusters"]
    assert [r["context"] for r in rows] == [CONTEXT_A, CONTEXT_B]
    admitted = {r["context"]: sum(len(cq["admitted"]) for cq in r["view"]["clusterQueues"]) for r in rows if r["view"]}
    assert admitted == {CONTEXT_A: 2, CONTEXT_B: 0}

    text = CliRunner().invoke(cli, [*base, "--context", CONTEXT_A, "--context", CONTEXT_B, "--no-predict"])
    assert text.exit_code == 0, text.output
    assert f"context {CONTEXT_A}" in text.output and f"context {CONTEXT_B}" in text.output

    clusters.a.stop()
    partial = CliRunner().invoke(cli, [*base, "--all-contexts", "-o", "json", "--no-predict"])
    assert partial.exit_code == 0, partial.output
    rows = json.loads(partial.output)["clusters"]
    assert rows[0]["view"] is None and rows[0]["error"]
    assert rows[1]["view"] is not None
    refused = CliRunner().invoke(cli, [*base, "--all-contexts", "--watch"])
    assert refused.exit_code == 2


def test_a_queue_set_in_a_context_scope_cannot_beat_the_teams_queue(sky_env: SkyEnv) -> None:
    """SkyPilot resolves the queue per context, and a context scope of the config beats a
    task's own ``config:`` (``_get_effective_scoped_config_value``); the policy therefore
    rewrites the queue where such a scope sets one, in the config the job is launched with."""
    from sky import skypilot_config
    from sky.server.requests.request_names import AdminPolicyRequestName
    from sky.utils import admin_policy_utils

    from tests.skypilot.builders import CONTEXT

    legacy = skypilot_config.to_dict()
    legacy.set_nested(("kubernetes", "context_configs", CONTEXT, "quota", "queue"), "someone-elses-lq")
    with skypilot_config.replace_skypilot_config(legacy):
        sky_task = sky_env.sky.Task.from_yaml_config(task(team="team-b"))
        dag, mutated = admin_policy_utils.apply(sky_task, request_name=AdminPolicyRequestName("jobs.launch"))
    resources = next(iter(dag.tasks[0].resources))
    with skypilot_config.replace_skypilot_config(mutated):
        queue = skypilot_config.get_effective_queue_name(
            "kubernetes", region=CONTEXT, override_configs=resources.cluster_config_overrides
        )
    assert queue == "team-b-lq"


def test_a_cluster_not_synced_in_time_is_ranked_last_not_dropped(
    clusters: Clusters, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sky_kueue.sandbox.apiserver.faults import FaultKind

    monkeypatch.setattr(cluster_view, "LIVE_SYNC_TIMEOUT_SECONDS", 0.5)
    clusters.a.inject(FaultKind.DELAY, verb="list", resource="workloads", delay_seconds=3.0)
    fill(clusters.b)  # B: team-b would wait; A would admit now, once anyone can tell
    plugin_config = multi_config(clusters.kubeconfig)
    views = cluster_view.build_views(plugin_config)

    result = team_b_launch(plugin_config, views)
    ranking = placed(result).ranking.clusters
    assert [(r.cluster.context, r.outcome) for r in ranking] == [(CONTEXT_B, "wait"), (CONTEXT_A, "unknown")]
    assert "did not sync" in ranking[1].reason
    assert [c["infra"] for c in candidates(result.task)] == [f"kubernetes/{CONTEXT_B}", f"kubernetes/{CONTEXT_A}"]

    synced = eventually(lambda: team_b_launch(plugin_config, views), [(CONTEXT_A, "admit-now"), (CONTEXT_B, "wait")])
    assert placed(synced).context == CONTEXT_A
