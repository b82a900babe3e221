"""On three live sandboxes, with run times only where the policy writes them (the pods), a
cluster with two jobs queued ahead ranks after one whose queue is empty, and one whose running
work ends sooner ranks first (issue 26, "done means")."""

from __future__ import annotations

import copy
import datetime
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sky_kueue.sandbox.sandbox import Sandbox
from sky_kueue.skypilot import cluster_view, labels
from sky_kueue.skypilot.decision import Placement
from sky_kueue.skypilot.engine import evaluate
from tests.skypilot.builders import SEED_SCENARIO, SEED_SETUP, config, request, task

BUSY, QUIET, SOONER = "busy", "quiet", "sooner"
#: How long the test waits for the mirrors to hold every object (seconds); never slept through.
FOLLOW_TIMEOUT_SECONDS = 20.0


def rendered_annotations(runtime: str) -> dict[str, str]:
    """The pod annotations the policy renders for a team-b task declaring ``runtime``."""
    result = evaluate(request(task(team="team-b", labels={labels.RUNTIME_LABEL: runtime})), config(), None)
    assert isinstance(result.decision, Placement)
    overrides = result.task["resources"]["_cluster_config_overrides"]
    return dict(overrides["kubernetes"]["pod_config"]["metadata"]["annotations"])


def stamp(at: datetime.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def job(name: str, admitted_at: datetime.datetime | None) -> dict[str, Any]:
    """A 5-CPU team-b pod-group Workload as Kueue makes it: no annotation of ours."""
    docs = [d for d in yaml.safe_load_all(SEED_SCENARIO.read_text()) if d]
    doc = copy.deepcopy(next(d for d in docs if d["metadata"]["name"] == "team-b-dev-job"))
    created = admitted_at or datetime.datetime.now(datetime.timezone.utc)
    doc["metadata"].update({"name": name, "uid": f"uid-team-b.{name}", "creationTimestamp": stamp(created)})
    if admitted_at is None:
        del doc["status"]
    else:
        for condition in doc["status"]["conditions"]:
            condition["lastTransitionTime"] = stamp(admitted_at)
    return doc


def pod(group: str, annotations: dict[str, str]) -> dict[str, Any]:
    """A SkyPilot head pod of ``group``, carrying what the policy wrote in its pod_config."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{group}-head",
            "namespace": "team-b",
            "labels": {"parent": "skypilot", "kueue.x-k8s.io/pod-group-name": group, "skypilot-cluster": group},
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": "1", **annotations},
        },
        "spec": {"containers": [{"name": "ray-node", "image": "rayproject/ray"}]},
    }


def write_kubeconfig(path: Path, servers: dict[str, str]) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": n, "cluster": {"server": url}} for n, url in servers.items()],
                "users": [{"name": "user", "user": {}}],
                "contexts": [{"name": n, "context": {"cluster": n, "user": "user"}} for n in servers],
                "current-context": next(iter(servers)),
            }
        )
    )
    return path


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Iterator[Path]:
    started = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=10)
    long_run, short_run, hour = rendered_annotations("3h"), rendered_annotations("2h"), rendered_annotations("1h")
    try:
        with (
            Sandbox(run_emulator=False) as busy,
            Sandbox(run_emulator=False) as quiet,
            Sandbox(run_emulator=False) as sooner,
        ):
            for box, run in ((busy, long_run), (quiet, long_run), (sooner, short_run)):
                box.apply(SEED_SETUP)
                # two 5-CPU jobs fill team-b's cohort (10 CPUs) for 3 h (sooner: 2 h) from 10 minutes ago
                box.apply([job("filler-0", started), job("filler-1", started)])
                box.apply([pod("filler-0", run), pod("filler-1", run)])
            busy.apply([job("queued-0", None), job("queued-1", None)])
            busy.apply([pod("queued-0", hour), pod("queued-1", hour)])
            servers = {BUSY: busy.url, QUIET: quiet.url, SOONER: sooner.url}
            yield write_kubeconfig(tmp_path / "kubeconfig", servers)
    finally:
        cluster_view.close_live_mirrors()


@pytest.mark.slow
def test_a_cluster_with_jobs_queued_ahead_ranks_after_an_empty_queue(kubeconfig: Path) -> None:
    plugin_config = config(
        kubernetes={"contexts": [BUSY, QUIET, SOONER]},
        cluster={"kubeconfig": str(kubeconfig)},
        teams={"team-b": {"clusters": [{"context": BUSY}, {"context": QUIET}, {"context": SOONER}]}},
    )
    views = cluster_view.build_views(plugin_config)
    deadline = time.monotonic() + FOLLOW_TIMEOUT_SECONDS
    while True:
        result = evaluate(request(task(team="team-b", cpus="5", name="probe")), plugin_config, views)
        decision = result.decision
        assert isinstance(decision, Placement)
        ranked = [
            (r.cluster.context, r.verdict.expected_wait_seconds, r.verdict.expected_wait_basis)
            for r in decision.ranking.ranked
        ]
        if all(wait is not None for _, wait, _ in ranked):
            break
        assert time.monotonic() < deadline, ranked
        time.sleep(0.1)
    (first, sooner_wait, sooner_basis), (second, quiet_wait, quiet_basis), (third, busy_wait, busy_basis) = ranked
    assert (first, second, third) == (SOONER, QUIET, BUSY)  # the admin listed busy, quiet, sooner
    assert sooner_basis == quiet_basis == busy_basis == "declared"
    assert sooner_wait is not None and quiet_wait is not None and busy_wait is not None
    assert abs(sooner_wait - (2 * 3600 - 600)) <= 5  # its fillers end 1 h 50 min from now
    assert abs(quiet_wait - (3 * 3600 - 600)) <= 5  # the fillers end 2 h 50 min from now
    assert abs(busy_wait - quiet_wait - 3600) <= 5  # then the two queued 1 h jobs, side by side
