"""The controller's issue-25 metrics beyond the counters: the ``cluster_queue`` label, the wait
after a preemption, and the predicted spend of a burst; driven through the real engine and
detection on Workloads shaped as Kueue writes them, observed as the manager reports them."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from sky_kueue.controller.burst_cost import (
    BurstPricing,
    UnpricedReason,
    expected_runtime_seconds,
    predict,
    workload_gpus,
)
from sky_kueue.controller.clock import ManualClock
from sky_kueue.controller.detection import classify
from sky_kueue.controller.engine import AgingEngine
from sky_kueue.controller.events import ControllerEvent, ControllerEventKind
from sky_kueue.controller.metric_teams import MetricTeam, MetricTeams, metric_teams
from sky_kueue.controller.metrics import KUEUE_WAIT_BUCKETS_SECONDS, UNKNOWN_CLUSTER_QUEUE, ControllerMetrics
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from sky_kueue.skypilot.config import ConfigError, parse_config

from .builders import T0, WorkloadBuilder, skypilot_pod
from .test_engine import GROUP, SETTINGS, engine_for

C = "sky_kueue_controller"
RUNTIME = "sky-kueue.io/expected-runtime-seconds"
TEAMS = MetricTeams(
    {"team-b": MetricTeam("bees", BurstPricing(("aws", "gcp"), {"aws": Decimal("3.5"), "gcp": Decimal("2")}))}
)


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(f"{C}_{name}", labels) or 0.0


class _Job:
    """One SkyPilot job's Workloads through the engine, each reconcile reported to the metrics."""

    def __init__(self, engine: AgingEngine, clock: ManualClock, metrics: ControllerMetrics, pods: list[Any]) -> None:
        self.engine, self.clock, self.metrics, self.pods = engine, clock, metrics, pods

    def reconcile(self, builder: WorkloadBuilder, at: float, cluster_queue: str | None = "team-b-cq") -> None:
        self.clock.now = T0 + at
        obj = builder.obj()
        detection = classify(obj, self.pods)
        outcome = self.engine.reconcile(detection)
        event = ControllerEvent(
            ControllerEventKind.RECONCILED,
            self.clock.now,
            obj,
            detection,
            outcome,
            cluster_queue=cluster_queue,
            pods=tuple(self.pods),
        )
        self.metrics.observe(event)

    def preempted_once(self, gpus: str = "2") -> WorkloadBuilder:
        """The first Workload: pending, admitted at 10 s, preempted at 1000 s, finished at 1005 s."""
        wl = _gpu_workload("w0", gpus).pending(T0)
        self.reconcile(wl, 0)
        self.reconcile(wl.admitted(T0 + 10, "team-b-cq"), 10)
        self.reconcile(wl.preempted(T0 + 1_000, preemptor_uid="uid-prod", reason="InCohortReclamation"), 1_000)
        self.reconcile(wl.finished(T0 + 1_005, message="Pods succeeded: 0/2."), 1_005)
        return wl


def _gpu_workload(uid: str, gpus: str) -> WorkloadBuilder:
    builder = WorkloadBuilder(GROUP, uid=uid).pod_group().priority(100).created(T0).evictions()
    obj = builder.obj()
    pod_set = obj["spec"]["podSets"][0]
    pod_set["count"] = 1
    pod_set["template"] = {
        "spec": {"containers": [{"name": "ray", "resources": {"requests": {"nvidia.com/gpu": gpus}}}]}
    }
    builder._obj = obj  # the builder has no pod-template method; the template is Kueue's shape
    return builder


def _pods(runtime: str | None) -> list[Any]:
    pod = skypilot_pod(f"{GROUP}-head", GROUP, job_id="17")
    if runtime is not None:
        pod["metadata"]["annotations"][RUNTIME] = runtime
    return [pod]


def test_wait_after_preemption_is_first_preemption_to_the_admission_the_job_finished_in(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    metrics = ControllerMetrics(clock=clock, teams=TEAMS)
    engine, _ = engine_for(store, clock)
    job = _Job(engine, clock, metrics, _pods(None))
    job.preempted_once()
    assert _value(metrics.registry, "preemptions_total", namespace="team-b", cluster_queue="team-b-cq",
                  reason="InCohortReclamation") == 1  # fmt: skip
    labels = {"team": "bees", "cluster_queue": "team-b-cq"}
    # The first relaunch is admitted at 1,300 s and preempted again at 1,400 s: not capacity kept.
    first = _gpu_workload("w1", "2").pending(T0 + 1_010)
    job.reconcile(first, 1_010)
    job.reconcile(first.admitted(T0 + 1_300, "team-b-cq"), 1_300)
    job.reconcile(first.preempted(T0 + 1_400, preemptor_uid="uid-prod", reason="InCohortReclamation"), 1_400)
    job.reconcile(first.finished(T0 + 1_405, message="Pods succeeded: 0/2."), 1_405)
    assert _value(metrics.registry, "wait_after_preemption_seconds_count", **labels) == 0
    # The second relaunch is admitted at 1,600 s and finishes there: 1,600 - 1,000 (the first preemption).
    second = _gpu_workload("w2", "2").pending(T0 + 1_410)
    job.reconcile(second, 1_410)
    job.reconcile(second.admitted(T0 + 1_600, "team-b-cq"), 1_600)
    assert _value(metrics.registry, "wait_after_preemption_seconds_count", **labels) == 0  # not kept yet
    job.reconcile(second.finished(T0 + 5_000, message="Pods succeeded: 2/2."), 5_000)
    assert _value(metrics.registry, "wait_after_preemption_seconds_count", **labels) == 1
    assert _value(metrics.registry, "wait_after_preemption_seconds_sum", **labels) == 600.0
    # Kueue's admission-wait buckets: 600 s falls in (320, 640].
    assert _value(metrics.registry, "wait_after_preemption_seconds_bucket", le="320.0", **labels) == 0
    assert _value(metrics.registry, "wait_after_preemption_seconds_bucket", le="640.0", **labels) == 1
    assert len(KUEUE_WAIT_BUCKETS_SECONDS) == 14 and KUEUE_WAIT_BUCKETS_SECONDS[-1] == 2.5 * 2**12
    # Observed once per job: a later snapshot of the same finish adds nothing.
    job.reconcile(second.finished(T0 + 5_000, message="Pods succeeded: 2/2."), 5_100)
    assert _value(metrics.registry, "wait_after_preemption_seconds_count", **labels) == 1


def test_an_admission_without_a_preemption_before_it_is_no_wait_after_preemption(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    metrics = ControllerMetrics(clock=clock, teams=TEAMS)
    engine, _ = engine_for(store, clock)
    job = _Job(engine, clock, metrics, _pods(None))
    wl = _gpu_workload("w0", "1").pending(T0)
    job.reconcile(wl, 0, cluster_queue=None)
    job.reconcile(wl.admitted(T0 + 50, "team-b-cq"), 50)
    samples = [s for f in metrics.registry.collect() for s in f.samples if s.name.startswith(f"{C}_wait_after")]
    assert samples == []
    # A Workload whose ClusterQueue is unknown is labelled so, not dropped.
    assert metrics.preempted_at.kept("anything") is None
    assert UNKNOWN_CLUSTER_QUEUE == "unknown"


def _burst_run(
    store: SqliteHistoryStore, clock: ManualClock, teams: MetricTeams, runtime: str | None
) -> CollectorRegistry:
    metrics = ControllerMetrics(clock=clock, teams=teams)
    engine, _ = engine_for(store, clock, settings=replace(SETTINGS, burst_after_preemptions=1))
    job = _Job(engine, clock, metrics, _pods(runtime))
    job.preempted_once()
    job.reconcile(_gpu_workload("w1", "2").pending(T0 + 1_010), 1_010)
    return metrics.registry


def test_a_burst_is_priced_gpus_times_expected_run_time_times_the_first_targets_price(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    registry = _burst_run(store, clock, TEAMS, runtime="7200")
    assert _value(registry, "bursts_total", namespace="team-b", cluster_queue="team-b-cq", reason="preemptions") == 1
    # 2 GPUs x 2 h x $3.5 (aws, the first of [aws, gcp]).
    assert _value(registry, "burst_predicted_gpu_hours_total", team="bees", cloud="aws") == 4.0
    assert _value(registry, "burst_predicted_cost_usd_total", team="bees", cloud="aws") == 14.0
    assert _value(registry, "burst_predicted_cost_usd_total", team="bees", cloud="gcp") == 0
    assert _value(registry, "burst_unpriced_total", team="bees", reason="no-runtime") == 0


def test_a_burst_without_a_run_time_or_a_price_is_unpriced_not_guessed(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    registry = _burst_run(store, clock, TEAMS, runtime=None)
    assert _value(registry, "burst_unpriced_total", team="bees", reason="no-runtime") == 1
    assert _value(registry, "burst_predicted_cost_usd_total", team="bees", cloud="aws") == 0
    assert _value(registry, "burst_predicted_gpu_hours_total", team="bees", cloud="aws") == 0


def test_a_burst_of_a_target_without_a_price_counts_its_gpu_hours_only(tmp_path: Any, clock: ManualClock) -> None:
    unpriced = MetricTeams({"team-b": MetricTeam("bees", BurstPricing(("gcp",), {}))})
    store = SqliteHistoryStore(tmp_path / "h.db")
    try:
        registry = _burst_run(store, clock, unpriced, runtime="1800")
    finally:
        store.close()
    assert _value(registry, "burst_unpriced_total", team="bees", reason="no-price") == 1
    assert _value(registry, "burst_predicted_gpu_hours_total", team="bees", cloud="gcp") == 1.0
    assert _value(registry, "burst_predicted_cost_usd_total", team="bees", cloud="gcp") == 0


def test_burst_cost_inputs_are_read_as_kueue_and_the_policy_write_them() -> None:
    workload = {
        "spec": {
            "podSets": [
                {"count": 2, "template": {"spec": {"containers": [
                    {"resources": {"requests": {"nvidia.com/gpu": "4", "cpu": "8"}}},
                    {"resources": {"limits": {"nvidia.com/gpu": 1}}},
                ]}}},
                {"count": 1, "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}}},
            ]
        }
    }  # fmt: skip
    assert workload_gpus(workload) == Decimal(10)  # 2 x (4 + 1 from the limit) + 0
    assert workload_gpus(workload, "amd.com/gpu") == 0
    assert workload_gpus({"spec": {"podSets": "junk"}}) == 0
    pod = {"metadata": {"annotations": {RUNTIME: "5400"}}}
    assert expected_runtime_seconds({}, [pod]) == 5400.0
    assert expected_runtime_seconds({"metadata": {"annotations": {RUNTIME: "60"}}}, [pod]) == 60.0
    assert expected_runtime_seconds({}, [{"metadata": {"annotations": {RUNTIME: "soon"}}}]) is None
    assert expected_runtime_seconds({}, [{"metadata": {"annotations": {RUNTIME: "-5"}}}]) is None
    pricing = BurstPricing(("aws",), {"aws": Decimal("2.40")})
    cost = predict(Decimal(3), 1_800.0, pricing)
    assert (cost.cloud, cost.gpu_hours, cost.cost_usd, cost.unpriced) == ("aws", Decimal("1.5"), Decimal("3.6"), None)
    assert predict(Decimal(3), 1_800.0, None).unpriced is UnpricedReason.NO_TEAM


def test_metric_teams_come_from_the_plugin_config() -> None:
    config = parse_config(
        """
teams:
  alpha:
    namespace: ns-a
    local_queue: a-lq
    priority_classes: {allowed: [p], default: p}
    burst: {max_queue_wait_seconds: 60, clouds: [gcp, aws], price_per_gpu_hour_usd: {gcp: 2.93}}
  beta:
    namespace: ns-b
    local_queue: b-lq
    priority_classes: {allowed: [p], default: p}
kubernetes: {gpu_resource: amd.com/gpu}
"""
    )
    teams = metric_teams(config)
    assert teams.gpu_resource == "amd.com/gpu"
    assert teams.team_name("ns-a") == "alpha" and teams.team_name("elsewhere") == "elsewhere"
    alpha = teams.team("ns-a")
    assert alpha is not None and alpha.pricing == BurstPricing(("gcp", "aws"), {"gcp": Decimal("2.93")})
    beta = teams.team("ns-b")
    assert beta is not None and beta.pricing is None


_PRICED_TEAM = """
teams:
  alpha:
    namespace: ns-a
    local_queue: a-lq
    priority_classes: {allowed: [p], default: p}
    burst:
      max_queue_wait_seconds: 60
      clouds: [aws, gcp]
      price_per_gpu_hour_usd: %s
"""


@pytest.mark.parametrize(
    ("prices", "message"),
    [
        ("{azure: 1}", "teams.alpha.burst.price_per_gpu_hour_usd.azure: 'azure' is not one of the team's burst.clouds"),
        ("{aws: -1}", "teams.alpha.burst.price_per_gpu_hour_usd.aws: Input should be greater than or equal to 0"),
        ("{aws: .nan}", "teams.alpha.burst.price_per_gpu_hour_usd.aws: Input should be a finite number"),
        ("{aws: cheap}", "teams.alpha.burst.price_per_gpu_hour_usd.aws: Input should be a valid decimal"),
        ("{aws: 30000}", "teams.alpha.burst.price_per_gpu_hour_usd.aws: Input should be less than or equal to 10000"),
    ],
)
def test_a_bad_burst_price_is_a_one_line_error_naming_the_key(prices: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(_PRICED_TEAM % prices)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_burst_price_is_read_exactly() -> None:
    config = parse_config(_PRICED_TEAM % "{aws: 3.06, gcp: 0}")
    burst = config.teams["alpha"].burst
    assert burst is not None and burst.price_per_gpu_hour_usd == {"aws": Decimal("3.06"), "gcp": Decimal(0)}
