"""Splitting a job's preemptions by cause: reclaim, its own higher class, its own class or lower, other."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console

from sky_kueue.sim import compare, metrics, policies, report
from sky_kueue.sim.metrics import CauseSplit, PreemptionCause
from sky_kueue.sim.results import JobOutcome, JobResult, PreemptionEvent, RunResult
from sky_kueue.sim.simulator import Simulator
from tests.sim.builders import NO_DELAY, TraceBuilder, by_id

LOW, MEDIUM, HIGH = 50, 100, 200


def victim(job_id: str = "v", *, events: tuple[PreemptionEvent, ...] = (), priority: int = MEDIUM) -> JobResult:
    return JobResult(
        job_id=job_id,
        team="a",
        cluster_queue="a-cq",
        priority_class="medium",
        base_priority=priority,
        gpus=1,
        submit_s=0.0,
        duration_s=100.0,
        outcome=JobOutcome.FINISHED,
        wait_s=0.0,
        first_admission_wait_s=0.0,
        preemptions=len(events),
        lost_gpu_s=0.0,
        max_boost=0,
        launches=len(events) + 1,
        preemption_events=events,
    )


def event(reason: str, queue: str | None, priority: int | None) -> PreemptionEvent:
    return PreemptionEvent(at=1.0, reason=reason, preemptor_cluster_queue=queue, preemptor_priority=priority)


RECLAIM = event("InCohortReclamation", "b-cq", LOW)
HIGHER = event("InClusterQueue", "a-cq", HIGH)
SAME = event("InClusterQueue", "a-cq", MEDIUM)
LOWER = event("InClusterQueue", "a-cq", LOW)
WHILE_BORROWING = event("InCohortReclaimWhileBorrowing", "b-cq", HIGH)


def test_each_cause_from_the_reason_and_the_preemptors_queue_and_class() -> None:
    job = victim()
    assert metrics.preemption_cause(job, RECLAIM) is PreemptionCause.RECLAIM  # an owner, any priority
    assert metrics.preemption_cause(job, HIGHER) is PreemptionCause.HIGHER_CLASS
    assert metrics.preemption_cause(job, SAME) is PreemptionCause.OWN_CLASS_OR_LOWER  # a boost or band level
    assert metrics.preemption_cause(job, LOWER) is PreemptionCause.OWN_CLASS_OR_LOWER
    assert metrics.preemption_cause(job, WHILE_BORROWING) is PreemptionCause.OTHER


def test_unknown_preemptors_and_reasons_that_contradict_the_queues_are_other_not_guessed() -> None:
    job = victim()
    assert metrics.preemption_cause(job, event("InClusterQueue", None, HIGH)) is PreemptionCause.OTHER
    assert metrics.preemption_cause(job, event("InCohortReclamation", "b-cq", None)) is PreemptionCause.OTHER
    assert metrics.preemption_cause(job, event("InClusterQueue", "b-cq", HIGH)) is PreemptionCause.OTHER
    assert metrics.preemption_cause(job, event("InCohortReclamation", "a-cq", HIGH)) is PreemptionCause.OTHER
    assert metrics.preemption_cause(job, event("InCohortFairSharing", "b-cq", HIGH)) is PreemptionCause.OTHER


def test_a_jobs_split_counts_every_preemption_once() -> None:
    split = metrics.cause_split(victim(events=(RECLAIM, HIGHER, RECLAIM, SAME, WHILE_BORROWING, HIGHER, HIGHER)))
    assert split == CauseSplit(reclaim=2, higher_class=3, own_class_or_lower=1, other=1)
    assert split.total == 7
    assert split.to_json() == {"reclaim": 2, "higher_class": 3, "own_class_or_lower": 1, "other": 1}
    assert split + CauseSplit(1, 0, 0, 2) == CauseSplit(3, 3, 1, 3)


def test_the_top_job_is_the_most_preempted_and_ties_go_to_the_earliest() -> None:
    jobs = [
        victim("never"),
        victim("first-top", events=(RECLAIM, RECLAIM, RECLAIM, HIGHER)),
        victim("twice", events=(HIGHER, HIGHER)),
        victim("tied-top", events=(HIGHER, HIGHER, HIGHER, SAME)),
        victim("thrice", events=(RECLAIM, WHILE_BORROWING, LOWER)),
    ]
    causes = metrics.preemption_causes(jobs)
    assert causes.top_job_id == "first-top"
    assert causes.top == CauseSplit(reclaim=3, higher_class=1)
    assert causes.top_tied_jobs == 2
    assert causes.max_higher_class == 3  # tied-top's, not the top job's
    # Preempted 3+ times: first-top, tied-top, thrice (not twice).
    assert causes.repeat_jobs == 3
    assert causes.repeat == CauseSplit(reclaim=4, higher_class=4, own_class_or_lower=2, other=1)


def test_no_preempted_job_gives_an_empty_split() -> None:
    causes = metrics.preemption_causes([victim("a"), victim("b")])
    assert causes.top_job_id is None
    assert causes.top.total == 0 and causes.repeat_jobs == 0 and causes.max_higher_class == 0


def test_summary_and_its_json_carry_the_split() -> None:
    jobs = (victim("x", events=(RECLAIM, HIGHER, HIGHER)), replace(victim("y"), priority_class="low"))
    run = RunResult(
        policy="p", jobs=jobs, window_s=100.0, end_s=100.0, gpu_capacity=1, busy_gpu_s=0.0, useful_gpu_s=0.0, cycles=1
    )
    m = metrics.summarize(run, ["low", "medium"])
    assert m.causes.top_job_id == "x"
    data = m.to_json()["preempted_jobs"]
    assert isinstance(data, dict)
    assert data["causes"]["top_job_by_cause"] == {"reclaim": 1, "higher_class": 2, "own_class_or_lower": 0, "other": 0}
    assert data["causes"]["repeat_jobs"] == 1


def test_the_simulator_records_who_preempted_a_job() -> None:
    """Team a's low job borrows all of b's quota: b's owner reclaims it (another ClusterQueue, a
    reclaim), then, running again on borrowed quota, a's own high-class arrival preempts it in a's
    ClusterQueue (its own higher class)."""
    builder = TraceBuilder().team("a", gpus=4, cohort="org").team("b", gpus=4, cohort="org")
    builder.job("a-big", at=0, gpus=8, run=3000, team="a")
    builder.job("b-owner", at=100, gpus=4, run=100, klass="high", team="b")
    builder.job("a-high", at=1000, gpus=4, run=100, klass="high", team="a")
    run = Simulator(builder.trace(), policies.resolve("baseline"), NO_DELAY).run()
    jobs = by_id(run)
    big = jobs["a-big"]
    assert big.preemptions == 2
    assert [(e.at, e.reason) for e in big.preemption_events] == [
        (100.0, "InCohortReclamation"),
        (1000.0, "InClusterQueue"),
    ]
    assert [e.preemptor_cluster_queue for e in big.preemption_events] == [
        jobs["b-owner"].cluster_queue,
        big.cluster_queue,
    ]
    assert big.cluster_queue != jobs["b-owner"].cluster_queue
    assert all(e.preemptor_priority == jobs["a-high"].base_priority > big.base_priority for e in big.preemption_events)
    assert metrics.cause_split(big) == CauseSplit(reclaim=1, higher_class=1)
    assert metrics.summarize(run, run_classes(run)).causes.top_job_id == "a-big"


def run_classes(run: RunResult) -> list[str]:
    """The run's classes, lowest priority first."""
    return [name for _, name in sorted({(j.base_priority, j.priority_class) for j in run.jobs})]


def test_the_text_report_shows_the_top_jobs_split() -> None:
    builder = TraceBuilder().team("a", gpus=4, cohort="org").team("b", gpus=4, cohort="org")
    builder.job("a-big", at=0, gpus=8, run=3000, team="a")
    builder.job("b-owner", at=100, gpus=4, run=100, klass="high", team="b")
    builder.job("a-high", at=1000, gpus=4, run=100, klass="high", team="a")
    comparison = compare.compare(builder.trace(), ["baseline"], NO_DELAY)
    console = Console(record=True, width=300)
    report.print_text(comparison, console)
    text = console.export_text()
    assert "top job a/b/c/d" in text
    assert "1/1/0/0" in text  # a-big: one reclaim by b's owner, one by its own team's high class
