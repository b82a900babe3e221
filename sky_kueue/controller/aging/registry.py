"""The registry of named aging policies.

Why a registry: the controller, ``sky-kueue aging explain`` and the trace simulator must
agree on what "policy X" computes, and the simulator compares policies side by side
(e.g. ``bounded`` against the ``ladder`` that has no anti-flapping). A policy is looked up
by the name in the ``aging.policy`` setting; built-ins are registered when
:mod:`sky_kueue.controller.aging` is imported, and a plugin or a study may add its own with
:func:`register_policy`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from sky_kueue.controller.aging.decision import AgingDecision
    from sky_kueue.controller.aging.settings import AgingSettings
    from sky_kueue.controller.history import JobHistory


class AgingPolicy(Protocol):
    """A pure function from a job's history and the settings to a boost decision."""

    @property
    def name(self) -> str: ...

    @property
    def summary(self) -> str: ...

    def decide(self, history: JobHistory, settings: AgingSettings, now: float) -> AgingDecision:
        """The boost for the job's next pending Workload, considering events up to ``now``."""
        ...


class UnknownPolicyError(KeyError):
    """No policy is registered under the requested name."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable.
        return str(self.args[0]) if self.args else "unknown aging policy"


_POLICIES: dict[str, AgingPolicy] = {}
PolicyT = TypeVar("PolicyT", bound=AgingPolicy)


def register_policy(policy: PolicyT, *, replace: bool = False) -> PolicyT:
    """Adds ``policy`` under ``policy.name`` and returns it (as its own type, so a module-level
    ``RANK = register_policy(BandPolicy(...))`` stays a ``BandPolicy``).

    Raises:
        ValueError: the name is empty, or taken and ``replace`` is False.
    """
    if not policy.name:
        raise ValueError("an aging policy needs a non-empty name")
    if policy.name in _POLICIES and not replace:
        raise ValueError(f"aging policy {policy.name!r} is already registered")
    _POLICIES[policy.name] = policy
    return policy


def get_policy(name: str) -> AgingPolicy:
    """The policy registered as ``name``.

    Raises:
        UnknownPolicyError: no such policy (the message lists the known ones).
    """
    try:
        return _POLICIES[name]
    except KeyError:
        known = ", ".join(policy_names()) or "none registered"
        raise UnknownPolicyError(f"unknown aging policy {name!r}; known policies: {known}") from None


def policy_names() -> tuple[str, ...]:
    return tuple(sorted(_POLICIES))


def all_policies() -> tuple[AgingPolicy, ...]:
    return tuple(_POLICIES[name] for name in policy_names())
