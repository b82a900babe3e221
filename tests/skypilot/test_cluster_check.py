"""check-config --cluster's rule, without a cluster: what a cluster must hold for a config."""

from __future__ import annotations

from typing import Any

from sky_kueue.skypilot.cluster_check import ClusterFacts, config_problems
from sky_kueue.skypilot.config import validate_config

CONFIG: dict[str, Any] = {
    "version": 1,
    "priority_classes": {"prod": 1000, "dev": 100},
    "teams": {
        "team-a": {
            "users": ["alice"],
            "namespace": "team-a",
            "local_queue": "team-a-lq",
            "priority_classes": {"allowed": ["prod", "dev"], "default": "prod"},
        }
    },
}


def facts(*, cq_active: bool = True, dev_value: int = 100, queue: bool = True) -> ClusterFacts:
    cq: dict[str, Any] = {"status": {"conditions": [{"type": "Active", "status": "True" if cq_active else "False"}]}}
    return ClusterFacts(
        namespaces=frozenset({"team-a"}),
        local_queues={("team-a", "team-a-lq"): {"spec": {"clusterQueue": "team-a-cq"}}} if queue else {},
        cluster_queues={"team-a-cq": cq},
        priority_classes={"prod": 1000, "dev": dev_value},
    )


def problems(found: ClusterFacts) -> list[str]:
    return config_problems(validate_config(CONFIG), {None: found}, [None])


def test_a_cluster_holding_everything_has_no_problem() -> None:
    assert problems(facts()) == []


def test_each_missing_or_drifted_object_is_one_line() -> None:
    assert problems(facts(queue=False)) == [
        "team team-a on the current context: LocalQueue team-a/team-a-lq does not exist"
    ]
    assert problems(facts(cq_active=False)) == [
        "team team-a on the current context: ClusterQueue team-a-cq is not active (Kueue admits nothing through it)"
    ]
    assert problems(facts(dev_value=150)) == [
        "team team-a on the current context: WorkloadPriorityClass dev has value 150 on the cluster, 100 in the config"
    ]
