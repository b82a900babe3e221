"""Objects Kueue would reject are reported with the object and field, never predicted on."""

from __future__ import annotations

from typing import Any

import pytest

from sky_kueue.kueue import predictor
from sky_kueue.kueue.errors import ModelError

from .builders import cohort, cq, flavor, lq, namespace, state, workload

T0 = "2026-01-01T10:00:00Z"


def _base(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [namespace("t"), flavor("f"), *extra]


@pytest.mark.parametrize(
    ("docs", "message"),
    [
        (
            _base(cq("a", [{"f": {"cpu": {"nominalQuota": "1", "borrowingLimit": "1"}}}])),
            "ClusterQueue a: spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: must be nil when cohort "
            "is empty",
        ),
        (
            _base(cq("a", [{"f": {"cpu": "1"}}], cohort="c", reclaim="Never", borrow="LowerPriority")),
            "ClusterQueue a: spec.preemption: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
        ),
        (
            _base(cq("a", [{"f": {"cpu": "1"}}], preference="BorrowingOverPreemption")),
            "ClusterQueue a: spec.flavorFungibility.preference: preference 'BorrowingOverPreemption' requires both "
            "whenCanBorrow and whenCanPreempt to be TryNextFlavor",
        ),
        (
            _base(cq("a", [{"f": {"cpu": {"nominalQuota": "1", "lendingLimit": "2"}}}], cohort="c")),
            "ClusterQueue a: spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: must be less than or equal "
            "to the nominalQuota",
        ),
        (
            _base(cq("a", [{"f": {"cpu": "1"}}], cohort="c", weight="0.0000000001")),
            "ClusterQueue a: spec.fairSharing.weight: must be 0 or greater than 0.000000001",
        ),
        (
            _base(cohort("root", groups=[{"f": {"cpu": {"nominalQuota": "1", "lendingLimit": "1"}}}])),
            "Cohort root: spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: must be nil when parent is "
            "empty",
        ),
        (
            _base(cohort("x", parent="y"), cohort("y", parent="x")),
            "Cohort x: spec.parentName: cycle in the cohort tree",
        ),
        (_base(lq("t", "q", "missing")), "LocalQueue t/q: spec.clusterQueue: ClusterQueue 'missing' not found"),
        (
            _base(cq("a", [{"f": {"cpu": "1"}}]), lq("t", "q", "a"), workload("w", "t", "nope", {"cpu": "1"}, T0)),
            "Workload t/w: spec.queueName: LocalQueue t/nope not found",
        ),
    ],
)
def test_invalid_objects_are_rejected_with_object_and_field(docs: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ModelError) as info:
        predictor.predict(state(*docs))
    assert str(info.value).startswith(message)


def test_every_flavor_lists_each_covered_resource() -> None:
    doc = cq("a", [{"f": {"cpu": "1", "memory": "1Gi"}}])
    doc["spec"]["resourceGroups"][0]["flavors"][0]["resources"].reverse()
    with pytest.raises(ModelError, match=r"resources\[0\]\.name: must match the name in coveredResources"):
        predictor.predict(state(*_base(doc)))


def test_parse_errors_name_the_field() -> None:
    doc = cq("a", [{"f": {"cpu": "lots"}}])
    with pytest.raises(ModelError, match=r"ClusterQueue a: spec\.resourceGroups\[0\]\.flavors\[0\]\.resources\[0\]"):
        state(*_base(doc))
    with pytest.raises(ModelError, match="unknown kind 'Deployment'"):
        state({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}})
    with pytest.raises(ModelError, match="unsupported value 'Sometimes'"):
        state(*_base(cq("a", [{"f": {"cpu": "1"}}], within="Sometimes")))
