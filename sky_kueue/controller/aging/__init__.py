"""Priority aging: named, pure policies from a job's history to a priority boost.

Public surface (everything else is internal)::

    from sky_kueue.controller import aging
    settings = aging.AgingSettings.from_mapping(config.get("aging"))
    decision = aging.decide(history, settings, now)        # uses settings.policy
    decision = aging.get_policy("ladder").decide(history, settings, now)

``history`` is a :class:`sky_kueue.controller.history.JobHistory`, loaded from a store or
built with its ``with_*``/``queued``/``admitted`` methods (the simulator does the latter).
The formula and its rationale are in :mod:`sky_kueue.controller.aging.policies`.
"""

from __future__ import annotations

# Import order matters: policies register themselves before settings validate names.
from sky_kueue.controller.aging import band as band
from sky_kueue.controller.aging import policies as policies
from sky_kueue.controller.aging.decision import AgingDecision, ExplanationStep
from sky_kueue.controller.aging.registry import (
    AgingPolicy,
    UnknownPolicyError,
    all_policies,
    get_policy,
    policy_names,
    register_policy,
)
from sky_kueue.controller.aging.settings import (
    ActuatorKind,
    AgingSettings,
    PriorityClassRung,
    SettingsError,
)
from sky_kueue.controller.history import JobHistory

__all__ = [
    "ActuatorKind",
    "AgingDecision",
    "AgingPolicy",
    "AgingSettings",
    "ExplanationStep",
    "PriorityClassRung",
    "SettingsError",
    "UnknownPolicyError",
    "all_policies",
    "decide",
    "get_policy",
    "policy_names",
    "register_policy",
]


def decide(history: JobHistory, settings: AgingSettings, now: float) -> AgingDecision:
    """Runs the policy named by ``settings.policy`` on ``history`` at time ``now``.

    Raises:
        UnknownPolicyError: ``settings.policy`` is not registered.
    """
    return get_policy(settings.policy).decide(history, settings, now)
