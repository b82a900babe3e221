"""What bursting cost a run, judged against the baseline of the same run.

Why beside the wait metrics: a burst ends a job's wait by construction, so the wait figures
alone make any burst setting look free. Issue 27 asks every run with bursts to show the
price paid and what it displaced:

* **cloud GPU-hours and USD**: billed GPU-hours of the bursts (start-up plus run time, as a
  provisioned node is billed) and their price (:attr:`PolicyMetrics.burst_gpu_hours`,
  :attr:`PolicyMetrics.burst_cost`);
* **on-prem goodput against the baseline**: the policy's on-prem GPU goodput minus the
  baseline's, in percentage points (negative: work that bursting sent away, or the churn it
  caused, left on-prem GPUs without useful work);
* **cloud spend per starved job avoided**: the cloud USD over (baseline's starved jobs -
  the policy's starved jobs), where "starved" is :class:`~sky_kueue.sim.metrics.StarvationRule`
  over all classes; None when the policy avoided no starved job (the spend bought none).
"""

from __future__ import annotations

from dataclasses import dataclass

from sky_kueue.sim.metrics import PolicyMetrics


@dataclass(frozen=True)
class BurstCost:
    """One policy's bursts, against the reference (baseline) run when there is one."""

    policy: str
    bursts: int
    cloud_gpu_hours: float
    cloud_usd: float
    #: None without a reference run.
    reference: str | None
    onprem_goodput_delta_points: float | None
    starved_jobs_avoided: int | None
    #: None without a reference, or when no starved job was avoided.
    usd_per_starved_job_avoided: float | None

    def to_json(self) -> dict[str, object]:
        def rounded(value: float | None, digits: int) -> float | None:
            return None if value is None else round(value, digits)

        return {
            "bursts": self.bursts,
            "cloud_gpu_hours": round(self.cloud_gpu_hours, 3),
            "cloud_usd": round(self.cloud_usd, 2),
            "reference": self.reference,
            "onprem_goodput_delta_points": rounded(self.onprem_goodput_delta_points, 3),
            "starved_jobs_avoided": self.starved_jobs_avoided,
            "usd_per_starved_job_avoided": rounded(self.usd_per_starved_job_avoided, 2),
        }


def burst_cost(policy: PolicyMetrics, reference: PolicyMetrics | None) -> BurstCost:
    """``policy``'s bursts, priced and judged against ``reference`` (see the module docstring)."""
    if reference is None:
        return BurstCost(
            policy=policy.policy,
            bursts=policy.bursts,
            cloud_gpu_hours=policy.burst_gpu_hours,
            cloud_usd=policy.burst_cost,
            reference=None,
            onprem_goodput_delta_points=None,
            starved_jobs_avoided=None,
            usd_per_starved_job_avoided=None,
        )
    avoided = reference.starved - policy.starved
    return BurstCost(
        policy=policy.policy,
        bursts=policy.bursts,
        cloud_gpu_hours=policy.burst_gpu_hours,
        cloud_usd=policy.burst_cost,
        reference=reference.policy,
        onprem_goodput_delta_points=(policy.gpu_goodput - reference.gpu_goodput) * 100.0,
        starved_jobs_avoided=avoided,
        usd_per_starved_job_avoided=policy.burst_cost / avoided if avoided > 0 else None,
    )


def burst_costs(metrics: dict[str, PolicyMetrics], reference: str | None) -> dict[str, BurstCost]:
    """:func:`burst_cost` of every policy whose run burst at least once (the reference's too)."""
    ref = metrics.get(reference) if reference is not None else None
    return {name: burst_cost(m, ref) for name, m in metrics.items() if m.bursts > 0}
