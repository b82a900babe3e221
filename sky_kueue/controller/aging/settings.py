"""Tunables of priority aging: each a named default with its unit, and a config key.

The defaults follow two sources. Slurm's multifactor priority gives the age factor
``min(wait / PriorityMaxAge, 1)`` times a weight; Slurm's ``PriorityMaxAge`` defaults to
7 days, which is long for interactive GPU queues, so we default to one day. KEP-7990
(Kueue's ``priority-boost`` annotation) warns that Kueue has no anti-flapping of its own
and suggests bumping only every Nth preemption, hence ``preemptions_per_step`` and the
minimum run before a boosted job may be boosted again (kueue#3779 shows the infinite
preempt/recreate loop this guards against).

In ``sky-kueue.yaml`` these keys sit under ``aging.parameters`` (the ladder may instead be
given as ``aging.ladder`` class names, see :meth:`AgingSettings.from_plugin_section`);
every key is optional. ``AgingSettings.from_mapping`` rejects unknown keys and wrong types with one line
naming the key, what was expected and what was found. Priorities are Kueue priority
*points* (the int32 ``value`` of a WorkloadPriorityClass).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any

from sky_kueue.controller.aging import registry
from sky_kueue.kueue.api import INT32_MAX, INT32_MIN

#: The default policy (see :mod:`sky_kueue.controller.aging.band`): the only one that did no harm
#: against SkyPilot alone on the reclaim storms, seeds 0-2 (``benchmarks/anti_starvation.py``).
DEFAULT_POLICY_NAME = "rank"
#: One boost step every N counted preemptions (KEP-7990: "bump only every Nth preemption").
DEFAULT_PREEMPTIONS_PER_STEP = 2
#: Priority points added per step.
DEFAULT_BOOST_PER_STEP_POINTS = 100
#: Wait after which the Slurm-style age factor ``min(wait / max_age, 1)`` saturates.
DEFAULT_MAX_AGE_SECONDS = 86_400.0
#: Priority points the age factor is worth at saturation (Slurm's PriorityWeightAge).
DEFAULT_AGE_WEIGHT_POINTS = 100
#: Upper bound of the boost, whatever the history.
DEFAULT_MAX_BOOST_POINTS = 500
#: Absolute cap on the effective priority (base + boost); None = no absolute cap.
DEFAULT_CEILING_PRIORITY: int | None = None
#: Keep the effective priority strictly below the class priority of the job's preemptors; with
#: none known, keep the age points below the next ``priority_class_ladder`` rung (0 without one).
DEFAULT_CAP_AT_PREEMPTOR_PRIORITY = True
#: A job admitted with a boost must run this long before a preemption counts again.
DEFAULT_MIN_RUN_BEFORE_REBOOST_SECONDS = 600.0
#: A run at least this long is a successful run: accrued credit and wait decay.
DEFAULT_DECAY_AFTER_RUN_SECONDS = 3_600.0
#: Multiplier applied to accrued preemption credit and wait after a successful run.
DEFAULT_DECAY_FACTOR = 0.5
#: Mark the job for cloud fallback after this many preemptions without a successful run.
DEFAULT_BURST_AFTER_PREEMPTIONS: int | None = None
#: Mark the job for cloud fallback when its predicted wait exceeds this many seconds.
DEFAULT_BURST_MAX_PREDICTED_WAIT_SECONDS: float | None = None
#: Band policies (:mod:`sky_kueue.controller.aging.band`): priority levels below the class value
#: that order waiting relaunches ahead of fresh arrivals.
DEFAULT_RANK_LEVELS = 8
#: Band policies: a waiting job's rank rises one level each time its age since first submission
#: doubles from this many seconds (None: one level per preemption instead).
DEFAULT_RANK_AGE_STEP_SECONDS: float | None = None
#: Band policies: priority levels below the class value that order readmitted relaunches as
#: the last victims of their class.
DEFAULT_PROTECT_LEVELS = 8
#: Band policies: a job is protected once readmitted only after this many preemptions (the first
#: ones leave Kueue's own victim order, newest admission first, which loses the least work).
DEFAULT_PROTECT_AFTER_PREEMPTIONS = 1
#: Band policies: how long a readmitted relaunch stays protected (None: until its run ends).
DEFAULT_PROTECT_SECONDS: float | None = None
#: Largest rank_levels/protect_levels accepted (a band wider than this would swallow classes).
MAX_BAND_LEVELS = 1_000

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class ActuatorKind(str, Enum):
    """How a decided boost reaches Kueue (``actuator:`` key)."""

    #: ``boost-annotation`` when the cluster runs the PriorityBoost gate, else ``spec-priority``.
    AUTO = "auto"
    #: Set ``kueue.x-k8s.io/priority-boost`` on the pending Workload (KEP-7990).
    BOOST_ANNOTATION = "boost-annotation"
    #: Merge-patch ``spec.priority`` of the pending Workload (always mutable).
    SPEC_PRIORITY = "spec-priority"
    #: SkyPilot level: relabel the relaunch with a WorkloadPriorityClass from the ladder.
    PRIORITY_CLASS = "priority-class"
    #: Decide and record only; patch nothing (dry run).
    RECORD_ONLY = "record-only"


class SettingsError(ValueError):
    """An ``aging:`` setting is invalid; the message is one line naming the key."""


@dataclass(frozen=True, order=True)
class PriorityClassRung:
    """A WorkloadPriorityClass the ``priority-class`` actuator may relabel a job with."""

    value: int
    name: str


def _spec(unit: str, kind: str, minimum: float | None = None, maximum: float | None = None) -> dict[str, Any]:
    return {"unit": unit, "kind": kind, "min": minimum, "max": maximum}


@dataclass(frozen=True)
class AgingSettings:
    """All aging tunables; construct with :meth:`from_mapping` to validate user input."""

    policy: str = field(default=DEFAULT_POLICY_NAME, metadata=_spec("policy name", "policy"))
    preemptions_per_step: int = field(
        default=DEFAULT_PREEMPTIONS_PER_STEP, metadata=_spec("preemptions", "int", 1, INT32_MAX)
    )
    boost_per_step: int = field(
        default=DEFAULT_BOOST_PER_STEP_POINTS, metadata=_spec("priority points", "int", 0, INT32_MAX)
    )
    max_age_seconds: float = field(default=DEFAULT_MAX_AGE_SECONDS, metadata=_spec("seconds", "seconds>0"))
    age_weight: int = field(default=DEFAULT_AGE_WEIGHT_POINTS, metadata=_spec("priority points", "int", 0, INT32_MAX))
    max_boost: int = field(default=DEFAULT_MAX_BOOST_POINTS, metadata=_spec("priority points", "int", 0, INT32_MAX))
    ceiling_priority: int | None = field(
        default=DEFAULT_CEILING_PRIORITY, metadata=_spec("priority points", "int?", INT32_MIN, INT32_MAX)
    )
    cap_at_preemptor_priority: bool = field(
        default=DEFAULT_CAP_AT_PREEMPTOR_PRIORITY, metadata=_spec("boolean", "bool")
    )
    min_run_before_reboost_seconds: float = field(
        default=DEFAULT_MIN_RUN_BEFORE_REBOOST_SECONDS, metadata=_spec("seconds", "seconds>=0")
    )
    decay_after_run_seconds: float = field(
        default=DEFAULT_DECAY_AFTER_RUN_SECONDS, metadata=_spec("seconds", "seconds>0")
    )
    decay_factor: float = field(default=DEFAULT_DECAY_FACTOR, metadata=_spec("fraction", "fraction"))
    burst_after_preemptions: int | None = field(
        default=DEFAULT_BURST_AFTER_PREEMPTIONS, metadata=_spec("preemptions", "int?", 1, INT32_MAX)
    )
    burst_max_predicted_wait_seconds: float | None = field(
        default=DEFAULT_BURST_MAX_PREDICTED_WAIT_SECONDS, metadata=_spec("seconds", "seconds>0?")
    )
    rank_levels: int = field(default=DEFAULT_RANK_LEVELS, metadata=_spec("priority points", "int", 0, MAX_BAND_LEVELS))
    rank_age_step_seconds: float | None = field(
        default=DEFAULT_RANK_AGE_STEP_SECONDS, metadata=_spec("seconds", "seconds>0?")
    )
    protect_levels: int = field(
        default=DEFAULT_PROTECT_LEVELS, metadata=_spec("priority points", "int", 0, MAX_BAND_LEVELS)
    )
    protect_after_preemptions: int = field(
        default=DEFAULT_PROTECT_AFTER_PREEMPTIONS, metadata=_spec("preemptions", "int", 1, INT32_MAX)
    )
    protect_seconds: float | None = field(default=DEFAULT_PROTECT_SECONDS, metadata=_spec("seconds", "seconds>0?"))
    actuator: ActuatorKind = field(default=ActuatorKind.AUTO, metadata=_spec("actuator", "actuator"))
    priority_class_ladder: tuple[PriorityClassRung, ...] = field(
        default=(), metadata=_spec("WorkloadPriorityClasses", "ladder")
    )

    def __post_init__(self) -> None:
        _validate({f.name: getattr(self, f.name) for f in fields(self)}, "aging")

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, *, where: str = "aging") -> AgingSettings:
        """Builds settings from a config mapping; absent keys take their defaults.

        Args:
            data: the ``aging:`` section (None or empty means all defaults).
            where: prefix for error messages, e.g. ``"/etc/sky-kueue.yaml: aging"``.

        Raises:
            SettingsError: unknown key, wrong type, or value out of range (one line).
        """
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise SettingsError(f"{where}: expected a mapping of settings, got {type(data).__name__}")
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for raw_key, raw_value in data.items():
            key = str(raw_key)
            if key not in known:
                close = difflib.get_close_matches(key, list(known), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise SettingsError(f"{where}: unknown key '{key}'{hint}; known keys: {', '.join(sorted(known))}")
            values[key] = _coerce(where, key, known[key].metadata, raw_value)
        defaults = {f.name: f.default for f in fields(cls)}
        _validate({**defaults, **values}, where)
        return cls(**values)

    @classmethod
    def from_plugin_section(
        cls,
        parameters: Mapping[str, Any] | None,
        ladder: Sequence[tuple[str, int]] = (),
        *,
        where: str = "aging.parameters",
    ) -> AgingSettings:
        """Builds settings from the ``aging:`` section of ``sky-kueue.yaml``.

        That section (``sky_kueue.skypilot.config``) carries these keys under
        ``parameters`` and the ladder as class names whose values come from the top-level
        ``priority_classes``; an explicit ``parameters.priority_class_ladder`` wins.

        Args:
            parameters: ``aging.parameters``.
            ladder: ``(class name, value)`` pairs, e.g. ``PluginConfig.aging_ladder()``.
            where: prefix for error messages.

        Raises:
            SettingsError: as :meth:`from_mapping`.
        """
        if parameters is not None and not isinstance(parameters, Mapping):
            raise SettingsError(f"{where}: expected a mapping of settings, got {type(parameters).__name__}")
        values = dict(parameters or {})
        if ladder and "priority_class_ladder" not in values:
            values["priority_class_ladder"] = [{"name": name, "value": value} for name, value in ladder]
        return cls.from_mapping(values, where=where)

    def to_mapping(self) -> dict[str, Any]:
        """The settings as plain config values (round-trips through :meth:`from_mapping`)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, ActuatorKind):
                value = value.value
            elif f.name == "priority_class_ladder":
                value = [{"name": r.name, "value": r.value} for r in value]
            out[f.name] = value
        return out


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _coerce(where: str, key: str, meta: Mapping[str, Any], value: Any) -> Any:
    kind: str = meta["kind"]
    unit: str = meta["unit"]
    label = f"{where}.{key}"
    optional = kind.endswith("?")
    base = kind.rstrip("?")
    if value is None:
        if optional:
            return None
        raise SettingsError(f"{label}: a value is required ({unit}), got null")
    if base == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise SettingsError(f"{label}: expected an integer ({unit}), got {_describe(value)}")
        return value
    if base.startswith("seconds") or base == "fraction":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SettingsError(f"{label}: expected a number ({unit}), got {_describe(value)}")
        return float(value)
    if base == "bool":
        if not isinstance(value, bool):
            raise SettingsError(f"{label}: expected true or false, got {_describe(value)}")
        return value
    if base == "policy":
        if not isinstance(value, str):
            raise SettingsError(f"{label}: expected a policy name, got {_describe(value)}")
        return value
    if base == "actuator":
        choices = ", ".join(k.value for k in ActuatorKind)
        if not isinstance(value, str):
            raise SettingsError(f"{label}: expected one of {choices}, got {_describe(value)}")
        try:
            return ActuatorKind(value)
        except ValueError:
            raise SettingsError(f"{label}: expected one of {choices}, got {value!r}") from None
    if base == "ladder":
        return _ladder(label, value)
    raise AssertionError(f"unhandled setting kind {kind}")  # pragma: no cover


def _ladder(label: str, value: Any) -> tuple[PriorityClassRung, ...]:
    if isinstance(value, Mapping):
        items = [{"name": k, "value": v} for k, v in value.items()]
    elif isinstance(value, list):
        items = value
    else:
        raise SettingsError(
            f"{label}: expected a list of {{name, value}} or a mapping name: value, got {_describe(value)}"
        )
    rungs: list[PriorityClassRung] = []
    for index, item in enumerate(items):
        here = f"{label}[{index}]"
        if not isinstance(item, Mapping):
            raise SettingsError(f"{here}: expected a mapping with 'name' and 'value', got {_describe(item)}")
        extra = sorted(set(map(str, item)) - {"name", "value"})
        if extra:
            raise SettingsError(f"{here}: unknown key '{extra[0]}' (expected 'name' and 'value')")
        name, number = item.get("name"), item.get("value")
        if not isinstance(name, str):
            raise SettingsError(f"{here}.name: expected a WorkloadPriorityClass name, got {_describe(name)}")
        if isinstance(number, bool) or not isinstance(number, int):
            raise SettingsError(f"{here}.value: expected an integer (priority points), got {_describe(number)}")
        rungs.append(PriorityClassRung(value=number, name=name))
    return tuple(sorted(rungs))


def _validate(values: Mapping[str, Any], where: str) -> None:
    """Checks every setting's range, then the rules that relate several settings."""
    for f in fields(AgingSettings):
        if f.name in values:
            _check(where, f.name, f.metadata, values[f.name])
    if values.get("actuator") is ActuatorKind.PRIORITY_CLASS and not values.get("priority_class_ladder"):
        raise SettingsError(
            f"{where}.actuator: 'priority-class' needs a non-empty priority_class_ladder "
            "(a list of {name, value} WorkloadPriorityClasses)"
        )


def _check(where: str, key: str, meta: Mapping[str, Any], value: Any) -> None:
    """Range checks shared by the constructor and :meth:`AgingSettings.from_mapping`."""
    label = f"{where}.{key}"
    kind: str = meta["kind"]
    if value is None and kind.endswith("?"):
        return
    base = kind.rstrip("?")
    if base == "int":
        low, high = meta["min"], meta["max"]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise SettingsError(f"{label}: expected an integer in [{low}, {high}] ({meta['unit']}), got {value!r}")
    elif base in ("seconds>0", "seconds>=0"):
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            raise SettingsError(f"{label}: expected a finite number of seconds, got {value!r}")
        if value < 0 or (base == "seconds>0" and value == 0):
            bound = "> 0" if base == "seconds>0" else ">= 0"
            raise SettingsError(f"{label}: expected seconds {bound}, got {value!r}")
    elif base == "fraction":
        if not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise SettingsError(f"{label}: expected a fraction in [0, 1], got {value!r}")
    elif base == "policy":
        if value not in registry.policy_names():
            raise SettingsError(
                f"{label}: unknown policy {value!r}; known policies: {', '.join(registry.policy_names())}"
            )
    elif base == "actuator":
        if not isinstance(value, ActuatorKind):
            raise SettingsError(f"{label}: expected an ActuatorKind, got {value!r}")
    elif base == "ladder":
        names = [r.name for r in value]
        for rung in value:
            if not _DNS_SUBDOMAIN.match(rung.name):
                raise SettingsError(
                    f"{label}: {rung.name!r} is not a valid WorkloadPriorityClass name (DNS-1123 subdomain)"
                )
            if not INT32_MIN <= rung.value <= INT32_MAX:
                raise SettingsError(f"{label}: value {rung.value} of {rung.name!r} is outside int32")
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise SettingsError(f"{label}: WorkloadPriorityClass {duplicates[0]!r} is listed twice")
