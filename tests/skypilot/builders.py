"""Small builders that keep the front-door tests short: tasks, requests, configs, views."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sky_kueue.skypilot.config import PluginConfig, validate_config
from sky_kueue.skypilot.demand import WorkloadDemand
from sky_kueue.skypilot.request import PolicyRequest, RequestOptions, UserIdentity
from sky_kueue.skypilot.task_yaml import deep_merge
from sky_kueue.skypilot.verdict import UNKNOWN_VERDICT, AdmissionVerdict
from sky_kueue.skypilot.view import UNKNOWN_CAPACITY, CapacityFacts, QueueFacts

REPO = Path(__file__).resolve().parents[2]
DEMO_CONFIG = REPO / "configs" / "sky-kueue-demo.yaml"
PRODUCTION_CONFIG = REPO / "configs" / "sky-kueue.yaml"
SEED_SETUP = REPO / "configs" / "kueue" / "seed-setup.yaml"
TEMPLATES = REPO / "task_templates"
SEED_SCENARIO = REPO / "tests" / "oracle" / "seeds" / "scenarios" / "a-gpu-borrow-preempt.yaml"
CONTEXT = "sky-kueue-sandbox"


def demo_config_data() -> dict[str, Any]:
    """The shipped plugin config as a mapping (a fresh copy each call)."""
    return yaml.safe_load(DEMO_CONFIG.read_text())


def config(**changes: Any) -> PluginConfig:
    """The shipped config with ``changes`` deep-merged in (e.g. ``teams={"team-b": {...}}``)."""
    return validate_config(deep_merge(demo_config_data(), changes))


def task(
    team: str | None = "team-a",
    name: str = "train",
    num_nodes: int = 1,
    labels: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    envs: Mapping[str, str] | None = None,
    **resources: Any,
) -> dict[str, Any]:
    """A task in YAML form (``Task.to_yaml_config()`` shape) with one Kubernetes candidate."""
    res: dict[str, Any] = {"infra": "kubernetes", "cpus": "2", **resources}
    all_labels = dict(labels or {})
    if team is not None:
        all_labels["sky-kueue.io/team"] = team
    if all_labels:
        res["labels"] = all_labels
    if overrides:
        res["_cluster_config_overrides"] = copy.deepcopy(dict(overrides))
    out: dict[str, Any] = {"name": name, "resources": res, "num_nodes": num_nodes, "run": "echo hi"}
    if envs:
        out["envs"] = dict(envs)
    return out


def request(
    task_dict: Mapping[str, Any],
    request_name: str = "jobs.launch",
    user: str | None = None,
    workspace: str | None = "default",
    skypilot_config: Mapping[str, Any] | None = None,
    options: RequestOptions | None = None,
) -> PolicyRequest:
    """A policy request; ``user`` is a user name (its id is ``id-<name>``)."""
    cfg = dict(skypilot_config or {})
    if workspace is not None:
        cfg.setdefault("active_workspace", workspace)
    return PolicyRequest(
        task=task_dict,
        skypilot_config=cfg,
        request_name=request_name,
        user=UserIdentity(id=f"id-{user}", name=user) if user else None,
        request_options=options,
    )


def pod_labels(candidate: Mapping[str, Any]) -> dict[str, str]:
    """The pod labels a candidate's config override sets."""
    overrides = candidate.get("_cluster_config_overrides") or {}
    return dict(overrides.get("kubernetes", {}).get("pod_config", {}).get("metadata", {}).get("labels", {}))


def kueue_settings(candidate: Mapping[str, Any]) -> dict[str, Any]:
    """The ``kubernetes.kueue`` block of a candidate's config override."""
    return dict((candidate.get("_cluster_config_overrides") or {}).get("kubernetes", {}).get("kueue", {}))


@dataclass
class FakeView:
    """A ClusterView with canned answers, for the decision's cluster checks."""

    queues: dict[tuple[str, str], QueueFacts] = field(default_factory=dict)
    classes: dict[str, int] | None = None
    capacity_answer: CapacityFacts = UNKNOWN_CAPACITY
    verdict: AdmissionVerdict = UNKNOWN_VERDICT
    seen_demands: list[WorkloadDemand] = field(default_factory=list)
    source: str = "the fake cluster"

    def local_queue(self, namespace: str, name: str) -> QueueFacts | None:
        return self.queues.get((namespace, name))

    def priority_classes(self) -> Mapping[str, int] | None:
        return self.classes

    def capacity(self, queue: QueueFacts, demand: WorkloadDemand) -> CapacityFacts:
        self.seen_demands.append(demand)
        return self.capacity_answer

    def predict(self, queue: QueueFacts, demand: WorkloadDemand, priority_class: str) -> AdmissionVerdict:
        return self.verdict


def fake_view(**queue_facts: Any) -> FakeView:
    """A FakeView whose team-a and team-b queues exist with ``queue_facts`` (for team-a's)."""
    team_a = QueueFacts("team-a", "team-a-lq", **{"cluster_queue": "team-a-cq", **queue_facts})
    team_b = QueueFacts("team-b", "team-b-lq", cluster_queue="team-b-cq")
    return FakeView(
        queues={("team-a", "team-a-lq"): team_a, ("team-b", "team-b-lq"): team_b},
        classes={"prod-priority": 1000, "dev-priority": 100},
    )
