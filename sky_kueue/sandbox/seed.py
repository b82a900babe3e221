"""The seed setup: two teams sharing a cohort (the demo scenario, without its workloads).

It is exactly the non-Workload objects of the seed scenario shipped in
``sky_kueue/data/seed-scenario.yaml`` (namespaces team-a/team-b, LocalQueues team-a-lq/team-b-lq,
ClusterQueues team-a-cq/team-b-cq/shared-cq in cohort team-ab, flavors default-flavor/gpu-flavor,
classes prod-priority/dev-priority); ``configs/kueue/seed-setup.yaml`` is the same set as a file.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

SEED_SCENARIO = "seed-scenario.yaml"


def seed_documents() -> list[dict[str, Any]]:
    text = resources.files("sky_kueue.data").joinpath(SEED_SCENARIO).read_text(encoding="utf-8")
    return [d for d in yaml.safe_load_all(text) if d]


def seed_setup() -> list[dict[str, Any]]:
    """The seed cluster's Kueue objects and namespaces, without workloads."""
    return [d for d in seed_documents() if d.get("kind") != "Workload"]
