"""Both Kueue API versions mean the same thing; lists and headers are read like kubectl output."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from sky_kueue.kueue import loader, parse, predictor
from sky_kueue.kueue.errors import ModelError

ORACLE = Path(__file__).resolve().parent.parent / "oracle"
SAMPLE = (
    sorted((ORACLE / "public" / "scenarios").glob("*.yaml"))[:8]
    + sorted((ORACLE / "hier-public" / "scenarios").glob("*.yaml"))[:4]
)


def _to_v1beta2(doc: dict[str, Any]) -> dict[str, Any]:
    """Write a v1beta1 object the way the v1beta2 API serves it."""
    doc = copy.deepcopy(doc)
    if not str(doc.get("apiVersion", "")).startswith("kueue.x-k8s.io/"):
        return doc
    doc["apiVersion"] = "kueue.x-k8s.io/v1beta2"
    spec = doc.get("spec") or {}
    if doc["kind"] == "ClusterQueue" and "cohort" in spec:
        spec["cohortName"] = spec.pop("cohort")
    if doc["kind"] == "Workload" and "priorityClassName" in spec:
        name = spec.pop("priorityClassName")
        source = spec.pop("priorityClassSource", "kueue.x-k8s.io/workloadpriorityclass")
        group = "kueue.x-k8s.io" if source == "kueue.x-k8s.io/workloadpriorityclass" else "scheduling.k8s.io"
        kind = "WorkloadPriorityClass" if group == "kueue.x-k8s.io" else "PriorityClass"
        spec["priorityClassRef"] = {"group": group, "kind": kind, "name": name}
    return doc


@pytest.mark.parametrize("path", SAMPLE, ids=lambda p: p.stem)
def test_v1beta2_objects_predict_the_same_as_v1beta1(path: Path) -> None:
    text = path.read_text()
    docs = loader.load_documents(text)
    config = parse.parse_header(text)
    v1 = predictor.predict(parse.parse_documents(docs, config)).to_json()
    v2 = predictor.predict(parse.parse_documents([_to_v1beta2(d) for d in docs], config)).to_json()
    assert v1 == v2


def test_a_kind_list_is_expanded() -> None:
    text = (ORACLE / "seeds" / "scenarios" / "a-gpu-borrow-preempt.yaml").read_text()
    docs = loader.load_documents(text)
    as_list = [{"apiVersion": "v1", "kind": "List", "items": docs}]
    assert (
        predictor.predict(parse.parse_documents(as_list)).to_json()
        == predictor.predict(parse.parse_documents(docs)).to_json()
    )


def test_deprecated_fungibility_aliases_become_may_stop_search() -> None:
    doc = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "a"},
        "spec": {"flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}},
    }
    cq = parse.parse_cluster_queue(doc)
    assert cq.flavor_fungibility.when_can_borrow.value == "MayStopSearch"
    assert cq.flavor_fungibility.when_can_preempt.value == "MayStopSearch"


def test_header_lines_select_the_scheduling_mode() -> None:
    config = parse.parse_header(
        "# kueue-config: admissionFairSharing usageHalfLifeTime=1h30m usageSamplingInterval=5m "
        "resourceWeights=cpu:2,memory:0.000000001\n# cycle-cap: 10\n# scenario: x\n"
    )
    assert config.admission_fair_sharing is not None
    assert config.admission_fair_sharing.usage_half_life_seconds == 5400
    assert config.admission_fair_sharing.resource_weights["cpu"] == 2
    assert config.cycle_cap == 10
    assert parse.parse_header("# kueue-config: fairSharing\n").fair_sharing is not None
    with pytest.raises(ModelError, match="unknown setting"):
        parse.parse_header("# kueue-config: turbo\n")
    with pytest.raises(ModelError, match="invalid duration"):
        parse.parse_header("# kueue-config: admissionFairSharing usageHalfLifeTime=soon\n")


def test_pod_requests_follow_kubernetes_rules() -> None:
    from sky_kueue.kueue import resources

    spec = {
        "containers": [
            {"resources": {"requests": {"cpu": "1"}}},
            {"resources": {"limits": {"nvidia.com/gpu": "2"}}},  # a limit alone is the request
        ],
        "initContainers": [
            {"resources": {"requests": {"cpu": "3"}}},  # a regular init phase: max with the sum
            {"restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},  # a sidecar adds
        ],
        "overhead": {"cpu": "100m"},
    }
    assert resources.pod_requests(spec) == {"cpu": 3100, "nvidia.com/gpu": 2}
