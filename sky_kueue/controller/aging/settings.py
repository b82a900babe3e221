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
every key is optional. Priorities are Kueue priority *points* (the int32 ``value`` of a
WorkloadPriorityClass).

One declared schema: :class:`AgingSettings` is a pydantic dataclass whose field types carry
the bounds (``Field(ge=..., le=...)``, finite seconds, strict ints and booleans), so
constructing it validates, ``dataclasses.replace`` re-validates, and the plugin config
(``sky_kueue.skypilot.config``) checks ``aging.parameters`` with the same declaration.
:meth:`AgingSettings.from_mapping` turns pydantic's first error into one line naming the
key, what was expected and what was found (:class:`SettingsError`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from enum import Enum
from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from sky_kueue.controller.aging import registry
from sky_kueue.kueue.api import INT32_MAX, INT32_MIN

#: The default policy: ``none``, which records each job's preemptions, explains them and exports
#: them but changes no priority, so the cluster behaves exactly as with SkyPilot alone. Why not an
#: ordering policy: none measured does no harm against SkyPilot alone on every shipped trace and
#: seed (``benchmarks/anti_starvation.py``, "no harm"; benchmarks/README.md): ``rank`` harms on 24
#: of 30 runs (Kueue's perf mix: one job preempted 49 times against 8), ``safe-place`` on 13 of 25,
#: every relaunch lane somewhere. A team opts in to ``rank`` (or a lane) where its traces show the
#: gain (README, "Does aging end starvation?").
DEFAULT_POLICY_NAME = "none"
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
#: Band policies: a job ranks ahead of its class's fresh arrivals only while it has been preempted
#: at most this many times; after that its relaunches wait at the fresh arrivals' level, in
#: arrival order (None: always ranked). Why a cap: see :mod:`sky_kueue.controller.aging.band`,
#: "The closed loop".
DEFAULT_RANK_MAX_PREEMPTIONS: int | None = None
#: Band policies: priority levels below the class value that order readmitted relaunches as
#: the last victims of their class.
DEFAULT_PROTECT_LEVELS = 8
#: Band policies: a job is protected once readmitted only after this many preemptions (the first
#: ones leave Kueue's own victim order, newest admission first, which loses the least work).
DEFAULT_PROTECT_AFTER_PREEMPTIONS = 1
#: Band policies: how long a readmitted relaunch stays protected (None: until its run ends).
DEFAULT_PROTECT_SECONDS: float | None = None
#: Band policies: grant the protected level at admission only when the relaunch fits its
#: ClusterQueue's nominal quota with every admitted Workload at that level or above
#: (:mod:`sky_kueue.controller.aging.protected_slot`); off: every relaunch past
#: protect_after_preemptions is protected. Only a policy that protects (``keep-place``,
#: ``protect``) takes it on; with any other policy the settings are refused.
DEFAULT_PROTECT_WITHIN_NOMINAL = False
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


class _Located(ValueError):
    """A validator's error with its own position below the field (``[0].value``)."""

    def __init__(self, suffix: str, message: str) -> None:
        super().__init__(message)
        self.suffix = suffix
        self.message = message


@dataclass(frozen=True, order=True)
class PriorityClassRung:
    """A WorkloadPriorityClass the ``priority-class`` actuator may relabel a job with."""

    value: int
    name: str


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _ladder(value: Any) -> tuple[PriorityClassRung, ...]:
    """A ladder from a list of ``{name, value}`` or a mapping ``name: value``, lowest first."""
    if isinstance(value, tuple) and all(isinstance(r, PriorityClassRung) for r in value):
        return value
    if isinstance(value, Mapping):
        items = [{"name": k, "value": v} for k, v in value.items()]
    elif isinstance(value, list):
        items = value
    else:
        raise _Located("", f"expected a list of {{name, value}} or a mapping name: value, got {_describe(value)}")
    rungs: list[PriorityClassRung] = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise _Located(f"[{index}]", f"expected a mapping with 'name' and 'value', got {_describe(item)}")
        extra = sorted(set(map(str, item)) - {"name", "value"})
        if extra:
            raise _Located(f"[{index}]", f"unknown key '{extra[0]}' (expected 'name' and 'value')")
        name, number = item.get("name"), item.get("value")
        if not isinstance(name, str):
            raise _Located(f"[{index}].name", f"expected a WorkloadPriorityClass name, got {_describe(name)}")
        if isinstance(number, bool) or not isinstance(number, int):
            raise _Located(f"[{index}].value", f"expected an integer (priority points), got {_describe(number)}")
        if not _DNS_SUBDOMAIN.match(name):
            raise _Located("", f"{name!r} is not a valid WorkloadPriorityClass name (DNS-1123 subdomain)")
        if not INT32_MIN <= number <= INT32_MAX:
            raise _Located("", f"value {number} of {name!r} is outside int32")
        rungs.append(PriorityClassRung(value=number, name=name))
    names = [r.name for r in rungs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise _Located("", f"WorkloadPriorityClass {duplicates[0]!r} is listed twice")
    return tuple(sorted(rungs))


#: Priority points: an int32 (a WorkloadPriorityClass ``value``).
Points = Annotated[int, Field(ge=0, le=INT32_MAX)]
#: A count of preemptions.
Preemptions = Annotated[int, Field(ge=1, le=INT32_MAX)]
#: Priority levels of a band policy's band (at most :data:`MAX_BAND_LEVELS`).
BandLevels = Annotated[int, Field(ge=0, le=MAX_BAND_LEVELS)]
#: A finite, positive duration.
PositiveSeconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Ladder = Annotated[tuple[PriorityClassRung, ...], BeforeValidator(_ladder)]

#: ``defer_build``: pydantic builds the validator on first use, not at import, because
#: building it loads pydantic's plugins through ``importlib.metadata`` (which imports
#: ``email`` and ``socket``); importing this pure module stays free of them
#: (``tests/controller/test_layering.py``).
_CONFIG = ConfigDict(strict=True, extra="forbid", arbitrary_types_allowed=True, defer_build=True)


@pydantic_dataclass(frozen=True, config=_CONFIG)
class AgingSettings:
    """All aging tunables, declared once: each field's type is its validation rule."""

    policy: str = DEFAULT_POLICY_NAME
    preemptions_per_step: Preemptions = DEFAULT_PREEMPTIONS_PER_STEP
    boost_per_step: Points = DEFAULT_BOOST_PER_STEP_POINTS
    max_age_seconds: PositiveSeconds = DEFAULT_MAX_AGE_SECONDS
    age_weight: Points = DEFAULT_AGE_WEIGHT_POINTS
    max_boost: Points = DEFAULT_MAX_BOOST_POINTS
    ceiling_priority: Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX)] | None = DEFAULT_CEILING_PRIORITY
    cap_at_preemptor_priority: bool = DEFAULT_CAP_AT_PREEMPTOR_PRIORITY
    min_run_before_reboost_seconds: Annotated[float, Field(ge=0, allow_inf_nan=False)] = (
        DEFAULT_MIN_RUN_BEFORE_REBOOST_SECONDS
    )
    decay_after_run_seconds: PositiveSeconds = DEFAULT_DECAY_AFTER_RUN_SECONDS
    decay_factor: Annotated[float, Field(ge=0, le=1)] = DEFAULT_DECAY_FACTOR
    burst_after_preemptions: Preemptions | None = DEFAULT_BURST_AFTER_PREEMPTIONS
    burst_max_predicted_wait_seconds: PositiveSeconds | None = DEFAULT_BURST_MAX_PREDICTED_WAIT_SECONDS
    rank_levels: BandLevels = DEFAULT_RANK_LEVELS
    rank_max_preemptions: Preemptions | None = DEFAULT_RANK_MAX_PREEMPTIONS
    protect_levels: BandLevels = DEFAULT_PROTECT_LEVELS
    protect_after_preemptions: Preemptions = DEFAULT_PROTECT_AFTER_PREEMPTIONS
    protect_seconds: PositiveSeconds | None = DEFAULT_PROTECT_SECONDS
    protect_within_nominal: bool = DEFAULT_PROTECT_WITHIN_NOMINAL
    actuator: Annotated[ActuatorKind, Field(strict=False)] = ActuatorKind.AUTO
    priority_class_ladder: Ladder = ()

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        if value not in registry.policy_names():
            raise _Located("", f"unknown policy {value!r}; known policies: {', '.join(registry.policy_names())}")
        return value

    @model_validator(mode="after")
    def _ladder_for_the_class_actuator(self) -> AgingSettings:
        if self.actuator is ActuatorKind.PRIORITY_CLASS and not self.priority_class_ladder:
            raise _Located(
                ".actuator",
                "'priority-class' needs a non-empty priority_class_ladder "
                "(a list of {name, value} WorkloadPriorityClasses)",
            )
        return self

    @model_validator(mode="after")
    def _within_nominal_for_a_protecting_policy(self) -> AgingSettings:
        # Only a band policy that protects readmitted relaunches has a protected level to
        # grant or withhold; elsewhere the setting would silently do nothing.
        if self.protect_within_nominal and self.policy not in protecting_policies():
            raise _Located(
                ".protect_within_nominal",
                "applies only to the policies that protect readmitted relaunches "
                f"({', '.join(protecting_policies())}), not to policy {self.policy!r}",
            )
        return self

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
        known = cls.keys()
        for raw_key in data:
            key = str(raw_key)
            if key not in known:
                close = difflib.get_close_matches(key, list(known), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise SettingsError(f"{where}: unknown key '{key}'{hint}; known keys: {', '.join(sorted(known))}")
        try:
            return cls(**{str(k): v for k, v in data.items()})
        except ValidationError as err:
            raise one_line(err, where) from None

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


def protecting_policies() -> tuple[str, ...]:
    """Names of the registered policies that protect readmitted relaunches (band policies with
    ``protect``: ``keep-place`` and ``protect`` built in), the ones ``protect_within_nominal``
    applies to."""
    return tuple(p.name for p in registry.all_policies() if getattr(p, "protect", False) is True)


def _expected(error: Mapping[str, Any]) -> str:
    """Pydantic's message, as "expected ..." where it names a type or a bound."""
    kind, ctx = str(error.get("type", "")), error.get("ctx") or {}
    if kind in ("int_type", "int_from_float"):
        return "expected an integer"
    if kind in ("float_type", "finite_number"):
        return "expected a finite number" if kind == "finite_number" else "expected a number"
    if kind == "bool_type":
        return "expected true or false"
    if kind == "string_type":
        return "expected a name"
    if kind == "enum":
        return f"expected one of {', '.join(k.value for k in ActuatorKind)}"
    for bound, words in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        if bound in ctx:
            return f"expected a value {words} {ctx[bound]}"
    message = str(error.get("msg", "invalid"))
    return message[:1].lower() + message[1:]


def one_line(err: ValidationError, where: str) -> SettingsError:
    """The first error of ``err`` as one line: ``<where>.<key>: expected ..., got ...``."""
    error = err.errors()[0]
    location = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.get("loc", ()))
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, _Located):
        return SettingsError(f"{where}{location}{cause.suffix}: {cause.message}")
    if error.get("input") is None and error.get("type") != "missing":
        return SettingsError(f"{where}{location}: a value is required, got null")
    return SettingsError(f"{where}{location}: {_expected(error)}, got {_describe(error.get('input'))}")
