"""The relaunch lane on real Kueue (issue 39's bound, checked where it matters).

A lane is a ClusterQueue in the team's cohort with nominal quota carved from the team's,
``borrowingLimit: 0``, ``lendingLimit`` equal to its nominal quota, ``reclaimWithinCohort:
Any`` and ``withinClusterQueue: Never`` (``sky_kueue/sim/lane.py``). Real Kueue must accept it,
lend its idle quota, take it back for a relaunch, and then never preempt the relaunch it
admitted within nominal quota, not even for the reclaim that preempted the job before.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.real_kueue.support import (
    ADMISSION_GAP_SECONDS,
    KUEUE_GROUP,
    REPO,
    KueueCluster,
    condition_true,
    conditions,
    run_cli,
)
from tests.real_kueue.test_preemption import admitted, skypilot_pod

V = f"{KUEUE_GROUP}/v1beta2"
#: How long the relaunch must stay admitted while team-a's new job waits (Kueue's scheduler
#: retries the waiting job many times within it).
HOLD_SECONDS = 15
#: Kueue's Preempted reasons for a reclaim of borrowed quota.
RECLAIMS = ("InCohortReclamation", "InCohortReclaimWhileBorrowing")


def cq(name: str, cpu: str, **extra: Any) -> dict[str, Any]:
    resource: dict[str, Any] = {"name": "cpu", "nominalQuota": cpu, **extra.pop("limits", {})}
    spec: dict[str, Any] = {
        "cohortName": "ab",
        "namespaceSelector": {},
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"},
        "resourceGroups": [
            {"coveredResources": ["cpu"], "flavors": [{"name": "default-flavor", "resources": [resource]}]}
        ],
    }
    spec.update(extra)
    return {"apiVersion": V, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def lq(namespace: str, name: str, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": V,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


def lane_setup() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in ("team-a", "team-b")
    ]
    docs += [
        {"apiVersion": V, "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
        {"apiVersion": V, "kind": "WorkloadPriorityClass", "metadata": {"name": "prod-priority"}, "value": 1000},
        {"apiVersion": V, "kind": "WorkloadPriorityClass", "metadata": {"name": "dev-priority"}, "value": 100},
        cq("team-a-cq", "6"),
        # team-b's 6 CPUs, 4 of them carved into its relaunch lane
        cq("team-b-cq", "2", preemption={"reclaimWithinCohort": "Never", "withinClusterQueue": "Never"}),
        cq(
            "team-b-lane",
            "4",
            limits={"borrowingLimit": "0", "lendingLimit": "4"},
            queueingStrategy="StrictFIFO",
            preemption={
                "reclaimWithinCohort": "Any",
                "borrowWithinCohort": {"policy": "Never"},
                "withinClusterQueue": "Never",
            },
        ),
        lq("team-a", "team-a-lq", "team-a-cq"),
        lq("team-b", "team-b-lq", "team-b-cq"),
        lq("team-b", "relaunch", "team-b-lane"),
    ]
    return docs


def in_lane(pod: dict[str, Any]) -> dict[str, Any]:
    pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "relaunch"
    return pod


def group(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"])


def running(kueue: KueueCluster, pod: dict[str, Any], what: str) -> dict[str, Any]:
    kueue.create_pod(pod)
    return kueue.wait_workload(pod["metadata"]["namespace"], group(pod), admitted, what)


def preempted(kueue: KueueCluster, pod: dict[str, Any], what: str) -> dict[str, Any]:
    found = kueue.wait_workload(pod["metadata"]["namespace"], group(pod), lambda w: condition_true(w, "Evicted"), what)
    assert conditions(found)["Preempted"]["reason"] in RECLAIMS, conditions(found)
    return found


def test_a_relaunch_admitted_in_its_lane_is_out_of_the_reclaims_reach(kueue: KueueCluster) -> None:
    """The cohort has 12 CPUs: team-a 6, team-b 2, team-b's lane 4 (lent while idle).

    team-b's dev job borrows and team-a reclaims it; its relaunch goes to the lane, which takes
    its lent CPUs back from team-b's other borrower. Then team-b borrows again with a
    prod-priority job and team-a reclaims again: the relaunch, at dev-priority, would be the
    first victim by Kueue's order (lowest priority first) if it were a candidate, as it would
    be in team-b's own ClusterQueue; the victim must be the prod-priority borrower instead.
    """
    kueue.apply(lane_setup())
    kueue.wait(
        "the lane ClusterQueue Active",
        lambda: condition_true(
            kueue.custom.get_cluster_custom_object(KUEUE_GROUP, "v1beta2", "clusterqueues", "team-b-lane"), "Active"
        ),
    )
    prod_1 = skypilot_pod("prod", "11", "team-a", "prod-priority", cpu="2")
    running(kueue, prod_1, "team-a's first job admitted")
    dev_2 = skypilot_pod("dev", "21", "team-b", "dev-priority", cpu="4")
    running(kueue, dev_2, "team-b's second dev job admitted, borrowing")
    # Kueue takes the most recently admitted of equal-priority candidates first, by a time
    # with a resolution of one second: admit the dev job a clear second later
    time.sleep(ADMISSION_GAP_SECONDS)
    dev = skypilot_pod("dev", "1", "team-b", "dev-priority", cpu="4")
    first = running(kueue, dev, "team-b's dev job admitted, borrowing (2 CPUs of 12 left)")

    running_prod_2 = skypilot_pod("prod", "12", "team-a", "prod-priority", cpu="4")
    kueue.create_pod(running_prod_2)
    preempted(kueue, dev, "the dev job reclaimed by team-a (the most recent borrower)")
    kueue.wait_workload("team-a", group(running_prod_2), admitted, "team-a's second job admitted")

    # SkyPilot's relaunch, moved into team-b's lane after its first preemption
    kueue.wait("the preempted pod gone", lambda: kueue.pod("team-b", f"{group(dev)}-head") is None)
    kueue.wait("the preempted Workload collected", lambda: kueue.workload("team-b", group(dev)) is None)
    kueue.create_pod(in_lane(skypilot_pod("dev", "1", "team-b", "dev-priority", cpu="4")))
    preempted(kueue, dev_2, "team-b's other borrower, holding the lane's lent CPUs, reclaimed by the lane")
    relaunch = kueue.wait_workload(
        "team-b",
        group(dev),
        lambda w: w["metadata"]["uid"] != first["metadata"]["uid"] and condition_true(w, "Admitted"),
        "the relaunch admitted in the lane",
    )
    assert relaunch["status"]["admission"]["clusterQueue"] == "team-b-lane"

    kueue.succeed_pod("team-a", f"{group(prod_1)}-head")  # team-a's first job ends: 4 CPUs free
    kueue.wait_workload("team-a", group(prod_1), lambda w: condition_true(w, "Finished"), "finished")
    higher = skypilot_pod("fill", "22", "team-b", "prod-priority", cpu="4")
    running(kueue, higher, "team-b's prod-priority job admitted, borrowing the free CPUs")
    prod_3 = skypilot_pod("prod", "13", "team-a", "prod-priority", cpu="2")
    kueue.create_pod(prod_3)
    preempted(kueue, higher, "team-b's borrower reclaimed by team-a, not the lower-priority relaunch in the lane")
    kueue.wait_workload("team-a", group(prod_3), admitted, "team-a's third job admitted")
    time.sleep(HOLD_SECONDS)  # Kueue keeps scheduling meanwhile; the lane's relaunch stays
    still = kueue.workload("team-b", group(dev))
    assert still is not None and still["metadata"]["uid"] == relaunch["metadata"]["uid"]
    assert condition_true(still, "Admitted") and not condition_true(still, "Evicted"), conditions(still)


def gpu_entry(spec: dict[str, Any]) -> dict[str, Any]:
    """The ``nvidia.com/gpu`` quota entry of a ClusterQueue spec (Kueue serves the resource
    groups in its own order)."""
    found: dict[str, Any] = next(
        entry
        for group in spec["resourceGroups"]
        for flavor in group["flavors"]
        for entry in flavor["resources"]
        if entry["name"] == "nvidia.com/gpu"
    )
    return found


def test_setup_renders_a_lane_kueues_webhooks_accept_and_check_config_checks_it(
    kueue: KueueCluster, cli_env: dict[str, str], tmp_path: Path
) -> None:
    """``setup --apply`` of ``configs/teams.yaml`` with a ``lane`` key: Kueue's webhooks accept
    the lane ClusterQueue (borrowingLimit 0, lendingLimit, a matchExpressions selector,
    StrictFIFO) and its LocalQueue, both become Active, a relaunch queued there is admitted in
    the lane, ``check-config --cluster`` passes, and a lane an admin let borrow is named."""
    import yaml

    from sky_kueue.realcluster.cluster import CONTEXT

    spec = yaml.safe_load((REPO / "configs" / "teams.yaml").read_text())
    spec["context"] = CONTEXT
    spec["teams"]["team-b"]["quotas"] = {"nvidia.com/gpu": "4", "cpu": "8", "memory": "32Gi"}
    spec["teams"]["team-b"].pop("borrowing_limits")
    spec["lane"] = {"gpus": 2, "after_preemptions": 2, "teams": ["team-b"]}
    (tmp_path / "teams.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    applied = run_cli(cli_env, "setup", "--teams", str(tmp_path / "teams.yaml"), "--output", str(out), "--apply")
    assert applied.returncode == 0, applied.stderr
    assert "ClusterQueue team-b-cq-relaunch: created" in applied.stdout
    assert "LocalQueue team-b/relaunch: created" in applied.stdout

    def lane() -> dict[str, Any]:
        found: dict[str, Any] = kueue.custom.get_cluster_custom_object(
            KUEUE_GROUP, "v1beta2", "clusterqueues", "team-b-cq-relaunch"
        )
        return found

    kueue.wait("the lane ClusterQueue Active", lambda: condition_true(lane(), "Active"))
    kueue.wait(
        "the lane LocalQueue Active",
        lambda: condition_true(
            kueue.custom.get_namespaced_custom_object(KUEUE_GROUP, "v1beta2", "team-b", "localqueues", "relaunch"),
            "Active",
        ),
    )
    served = lane()["spec"]
    assert served["cohortName"] == "team-ab" and served["queueingStrategy"] == "StrictFIFO"
    gpu = gpu_entry(served)
    assert (gpu["nominalQuota"], gpu["borrowingLimit"], gpu["lendingLimit"]) == ("2", "0", "2")
    team_b = kueue.custom.get_cluster_custom_object(KUEUE_GROUP, "v1beta2", "clusterqueues", "team-b-cq")
    assert gpu_entry(team_b["spec"])["nominalQuota"] == "2"  # carved from team-b's 4

    # a relaunch queued in the rendered lane (as the KUEUE_AGING strategy queues it) is admitted there
    relaunch = in_lane(skypilot_pod("dev", "31", "team-b", "dev-priority", cpu="2"))
    admitted_there = running(kueue, relaunch, "a relaunch admitted in the rendered lane")
    assert admitted_there["spec"]["queueName"] == "relaunch"
    assert admitted_there["status"]["admission"]["clusterQueue"] == "team-b-cq-relaunch"

    config = str(out / "sky-kueue.yaml")
    checked = run_cli(cli_env, "check-config", "--no-skypilot", "--cluster", config)
    assert checked.returncode == 0, checked.stderr
    assert "the clusters hold every team's queue and classes" in checked.stdout

    edited = lane()["spec"]
    gpu_entry(edited)["borrowingLimit"] = "1"
    kueue.custom.patch_cluster_custom_object(
        KUEUE_GROUP,
        "v1beta2",
        "clusterqueues",
        "team-b-cq-relaunch",
        {"spec": {"resourceGroups": edited["resourceGroups"]}},
    )
    drifted = run_cli(cli_env, "check-config", "--no-skypilot", "--cluster", config)
    assert drifted.returncode == 1
    assert (
        "relaunch lane ClusterQueue team-b-cq-relaunch may borrow nvidia.com/gpu in gpu-flavor (borrowingLimit 1, "
        "needs 0)" in drifted.stderr
    )
