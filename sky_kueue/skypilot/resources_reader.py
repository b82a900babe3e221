"""A task's ``resources:`` as SkyPilot 0.14.1 writes them back, read without importing SkyPilot.

Why: ``sky-kueue launch --dry-run`` needs the task in the form SkyPilot's own parser gives
(``Resources.from_yaml_config(...)`` then ``to_yaml_config()``, ``sky/resources.py``), because
the policy's verdict and the task it prints are built from that form. Importing SkyPilot for it
costs 3-10 s on two cores; the spellings an ordinary Kubernetes task uses are few and their
normalisation is small, so this module applies it here, for exactly those spellings:

* ``infra: k8s`` / ``kubernetes[/<context>]`` (or ``cloud: kubernetes`` + ``region``) becomes
  ``kubernetes[/<context>]`` (``InfraInfo.from_str`` / ``to_str`` in ``sky/utils/infra_utils.py``);
* ``cpus`` (``4``, ``4.5``, ``'4+'``) becomes its text (``Resources._set_cpus``);
* ``memory`` (``16``, ``'8+'``, ``16GB``, ``512MB``, ``16Gi``, ``1TB+``, ``2x``) becomes GB as
  text: a bare number unchanged, a unit converted (``16GB`` -> ``'16.0'``,
  ``parse_memory_resource`` in ``sky/utils/resources_utils.py``);
* ``accelerators`` (``A100:2``, ``{A100: 2}``, ``A100``, ``{A100: null}``, ``A100:0.5``; alias
  ``gpus``) becomes ``{A100: 2}``; several (``[A100:2, H100:1]`` or ``{A100: 2, H100: 1}``)
  become ``ordered`` (a list) or ``any_of`` (a mapping) candidates, one per accelerator;
* ``labels``, ``priority_class`` (stripped), ``instance_type`` as written; ``job_recovery``
  (``FAILOVER`` or ``{strategy: ..., max_restarts_on_errors: N}``) as ``{strategy: <UPPER>}``;
* ``any_of`` / ``ordered``: the shared keys copied into each candidate, a candidate's own keys
  winning (``_override_resources``); one candidate is written as a plain ``resources``;
* the task's ``config:`` block on every candidate as ``_cluster_config_overrides``.

Anything else is left to SkyPilot's parser (:class:`LeaveToSkyPilot`, one line saying which
field): any other key (``disk_size``, ``ports``, ``use_spot``, ``image_id``, ...), another
cloud than Kubernetes (regions and zones SkyPilot checks in its catalog), an accelerator
given by memory (``80GB+``: SkyPilot looks the devices up in its catalog) or a TPU (SkyPilot
picks the cloud and its arguments), a value SkyPilot would refuse (it then says why, in its
own words), several accelerators with ``any_of``/``ordered``, and shared ``labels`` with a
candidate's own ``labels`` (SkyPilot 0.14.1 merges the candidate's into the shared mapping in
place, so each later candidate carries the earlier ones' labels too; that stays SkyPilot's
to do). ``tests/skypilot/test_task_reader_equivalence.py`` compares every spelling with
SkyPilot's own parser.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping
from typing import Any

from sky_kueue.skypilot.task_yaml import KUBERNETES_CLOUD as KUBERNETES
from sky_kueue.skypilot.task_yaml import OVERRIDES_KEY

#: Keys of one candidate (and of the shared part of ``any_of``/``ordered``) read here.
CANDIDATE_KEYS = frozenset(
    {"infra", "cloud", "region", "instance_type", "cpus", "memory", "accelerators", "labels", "priority_class"}
    | {"job_recovery"}
)
#: Keys holding a list of candidates.
GROUP_KEYS = ("any_of", "ordered")
#: SkyPilot's alias of ``accelerators`` (``RESOURCE_CONFIG_ALIASES`` in ``sky/resources.py``).
ACCELERATORS_ALIAS = "gpus"
#: ``job_recovery`` keys read here (SkyPilot also has ``recover_on_exit_codes`` and plugin keys).
JOB_RECOVERY_KEYS = frozenset({"strategy", "max_restarts_on_errors"})
#: The strategy name that means "no recovery" (SkyPilot drops ``job_recovery`` for it).
NO_RECOVERY = "none"
#: Contexts SkyPilot keeps for its SSH node pools (``to_str`` drops this prefix when writing).
SSH_CONTEXT_PREFIX = "ssh-"
_WILDCARD = "*"

#: Bytes of each memory unit SkyPilot accepts (``MEMORY_SIZE_UNITS`` in ``sky/skylet/constants.py``).
_UNIT_BYTES = {
    "kb": 2**10,
    "ki": 2**10,
    "mb": 2**20,
    "mi": 2**20,
    "gb": 2**30,
    "gi": 2**30,
    "tb": 2**40,
    "ti": 2**40,
    "pb": 2**50,
    "pi": 2**50,
}
_GB = _UNIT_BYTES["gb"]

_NUMBER = r"\d+(?:\.\d+)?"
_CPUS_RE = re.compile(rf"{_NUMBER}\+?")
_MEMORY_RE = re.compile(rf"({_NUMBER})((?i:[kmgtp][bi])?)([+x]?)")
_KUBERNETES_INFRA_RE = re.compile(r"(?:kubernetes|k8s)(?:/(.+))?", re.IGNORECASE)
#: An accelerator name read here (``A100``, ``H100-80GB``, ``RTX-4090``, ``L40S``).
_ACCELERATOR_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_ACCELERATOR_COUNT_RE = re.compile(_NUMBER)
#: An accelerator given by its memory (``_parse_accelerators_from_str`` in ``sky/resources.py``).
_ACCELERATOR_MEMORY_RE = re.compile(r"[0-9]+[GgMmTt][Bb]\+?")
#: Accelerator names SkyPilot treats as TPUs.
_TPU = "tpu"


class LeaveToSkyPilot(ValueError):
    """The task uses something this reader does not read as SkyPilot would; the message names it."""


def resources_config(raw: Any, overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """The task's ``resources`` as ``Task.to_yaml_config()`` writes them.

    Args:
        raw: the task's ``resources`` value as written (None for none).
        overrides: the task's ``config:`` block (None or empty for none).

    Raises:
        LeaveToSkyPilot: a field outside what this module reads (see the module docstring).
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise LeaveToSkyPilot("resources is not a mapping")
    shared = _aliased(raw, "resources")
    groups = [key for key in GROUP_KEYS if shared.get(key) is not None]
    _check_keys(shared, "resources", CANDIDATE_KEYS | set(GROUP_KEYS))
    options = _accelerator_options(shared.get("accelerators"), "resources.accelerators", shared_level=True)
    if not groups:
        if len(options) <= 1:
            return _candidate(shared, options[0] if options else None, overrides, "resources")
        group = "ordered" if isinstance(shared["accelerators"], list) else "any_of"
        return {group: [_candidate(shared, option, overrides, "resources") for option in options]}
    if len(groups) > 1 or len(options) > 1:
        raise LeaveToSkyPilot("resources: any_of with ordered, or several accelerators with either")
    group = groups[0]
    items = shared[group]
    if not isinstance(items, list) or not items:
        raise LeaveToSkyPilot(f"resources.{group} is not a non-empty list")
    base = {k: v for k, v in shared.items() if k not in GROUP_KEYS}
    candidates = []
    for index, item in enumerate(items):
        where = f"resources.{group}[{index}]"
        if not isinstance(item, Mapping):
            raise LeaveToSkyPilot(f"{where} is not a mapping")
        own = _aliased(item, where)
        _check_keys(own, where, CANDIDATE_KEYS)
        if any(value is None for value in own.values()):
            raise LeaveToSkyPilot(f"{where}: a null value (SkyPilot's schema refuses it in a candidate)")
        own_labels = own.pop("labels", None)
        if own_labels is not None and base.get("labels") is not None:
            raise LeaveToSkyPilot(f"{where}.labels with resources.labels")
        merged = {**base, **own}
        if own_labels is not None:
            merged["labels"] = own_labels
        chosen = options
        if own.get("accelerators") is not None:
            chosen = _accelerator_options(own["accelerators"], f"{where}.accelerators", shared_level=False)
        candidates.append(_candidate(merged, chosen[0] if chosen else None, overrides, where))
    return candidates[0] if len(candidates) == 1 else {group: candidates}


def _aliased(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``raw`` with ``gpus`` renamed ``accelerators`` (``_apply_resource_config_aliases``)."""
    out = dict(raw)
    if ACCELERATORS_ALIAS in out:
        if "accelerators" in out:
            raise LeaveToSkyPilot(f"{where}: both gpus and accelerators")
        out["accelerators"] = out.pop(ACCELERATORS_ALIAS)
    return out


def _check_keys(raw: Mapping[Any, Any], where: str, known: frozenset[str] | set[str]) -> None:
    for key in raw:
        if not isinstance(key, str) or key not in known:
            raise LeaveToSkyPilot(f"{where}.{key} is not read by sky-kueue's task reader")


def _candidate(
    raw: Mapping[str, Any], accelerator: dict[str, int | float] | None, overrides: Mapping[str, Any] | None, where: str
) -> dict[str, Any]:
    """One candidate in ``Resources.to_yaml_config``'s key order."""
    out: dict[str, Any] = {}
    infra = _infra(raw, where)
    if infra is not None:
        out["infra"] = infra
    instance_type = raw.get("instance_type")
    if instance_type is not None:
        out["instance_type"] = _text(instance_type, f"{where}.instance_type")
    cpus = _cpus(raw.get("cpus"), f"{where}.cpus")
    if cpus is not None:
        out["cpus"] = cpus
    memory = _memory(raw.get("memory"), f"{where}.memory")
    if memory is not None:
        out["memory"] = memory
    if accelerator is not None:
        out["accelerators"] = accelerator
    recovery = _job_recovery(raw.get("job_recovery"), f"{where}.job_recovery")
    if recovery is not None:
        out["job_recovery"] = recovery
    labels = raw.get("labels")
    if labels is not None:
        out["labels"] = _labels(labels, f"{where}.labels")
    priority_class = raw.get("priority_class")
    if priority_class is not None:
        stripped = _text(priority_class, f"{where}.priority_class").strip()
        if stripped:
            out["priority_class"] = stripped
    if overrides:
        out[OVERRIDES_KEY] = copy.deepcopy(dict(overrides))
    return out


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise LeaveToSkyPilot(f"{where} is not text")
    return value


def _infra(raw: Mapping[str, Any], where: str) -> str | None:
    """``kubernetes[/<context>]``, or None for no location; other clouds are SkyPilot's."""
    infra, cloud, region = raw.get("infra"), raw.get("cloud"), raw.get("region")
    if infra is not None:
        if cloud is not None or region is not None:
            raise LeaveToSkyPilot(f"{where}: infra with cloud or region")
        match = _KUBERNETES_INFRA_RE.fullmatch(_text(infra, f"{where}.infra"))
        if match is None:
            raise LeaveToSkyPilot(f"{where}.infra {infra!r} is not Kubernetes")
        return _kubernetes_infra(match.group(1), f"{where}.infra")
    if cloud is not None:
        if _text(cloud, f"{where}.cloud").lower() != KUBERNETES:
            raise LeaveToSkyPilot(f"{where}.cloud {cloud!r} is not Kubernetes")
        return _kubernetes_infra(None if region is None else _text(region, f"{where}.region"), f"{where}.region")
    if region is not None:
        raise LeaveToSkyPilot(f"{where}.region without a cloud")
    return None


def _kubernetes_infra(context: str | None, where: str) -> str:
    if context is None or context == _WILDCARD:
        return KUBERNETES
    parts = context.split("/")
    if any(not part or part != part.strip() for part in parts) or context.startswith(SSH_CONTEXT_PREFIX):
        raise LeaveToSkyPilot(f"{where}: context {context!r} is not one the reader writes back unchanged")
    return f"{KUBERNETES}/{context}"


def _positive_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _cpus(value: Any, where: str) -> str | None:
    """``str(cpus)`` when SkyPilot reads it as a positive number (``Resources._set_cpus``)."""
    if value is None:
        return None
    if _positive_number(value):
        return str(value)
    if isinstance(value, str) and _CPUS_RE.fullmatch(value) and float(value.rstrip("+")) > 0:
        return value
    raise LeaveToSkyPilot(f"{where} {value!r} is not a spelling the reader knows")


def _memory(value: Any, where: str) -> str | None:
    """Memory in GB as SkyPilot writes it (``parse_memory_resource``: a bare number unchanged,
    a unit converted with ``value * unit / GB``, ``+`` or ``x`` kept at the end)."""
    if value is None:
        return None
    if _positive_number(value):
        return str(value)
    match = _MEMORY_RE.fullmatch(value) if isinstance(value, str) else None
    if match is None or float(match.group(1)) <= 0:
        raise LeaveToSkyPilot(f"{where} {value!r} is not a spelling the reader knows")
    number, unit, suffix = match.groups()
    if not unit:
        return f"{number}{suffix}"
    converted = float(number) * _UNIT_BYTES[unit.lower()] / _GB
    return f"{converted}{suffix}"


def _accelerator_options(raw: Any, where: str, *, shared_level: bool) -> list[dict[str, int | float]]:
    """Each accelerator a field allows, as ``{name: count}``, in the field's order.

    ``shared_level``: the task's own ``resources`` (a list, several names and a null count are
    allowed there); a candidate of ``any_of``/``ordered`` names one, with a number.
    """
    if raw is None:
        return []
    names: list[str]
    if isinstance(raw, str):
        names = [raw]
    elif isinstance(raw, Mapping) and raw and (shared_level or len(raw) == 1):
        names = []
        for name, count in raw.items():
            if not isinstance(name, str) or not (_positive_number(count) or (count is None and shared_level)):
                raise LeaveToSkyPilot(f"{where} {raw!r} is not a spelling the reader knows")
            names.append(name if count is None else f"{name}:{count}")
    elif isinstance(raw, list) and raw and shared_level and all(isinstance(item, str) for item in raw):
        names = list(raw)
    else:
        raise LeaveToSkyPilot(f"{where} {raw!r} is not a spelling the reader knows")
    unique = list(dict.fromkeys(names))  # SkyPilot keeps the first of equal names
    return [_accelerator(name, where) for name in unique]


def _accelerator(text: str, where: str) -> dict[str, int | float]:
    """``A100`` -> ``{A100: 1}``, ``A100:2`` -> ``{A100: 2}``, ``A100:0.5`` -> ``{A100: 0.5}``."""
    parts = text.split(":")
    if len(parts) > 2 or any(_ACCELERATOR_MEMORY_RE.fullmatch(part) for part in parts):
        raise LeaveToSkyPilot(f"{where} {text!r} names accelerators by memory (SkyPilot's catalog)")
    name = parts[0]
    if not _ACCELERATOR_NAME_RE.fullmatch(name) or _TPU in name.lower():
        raise LeaveToSkyPilot(f"{where} {text!r} is not an accelerator name the reader knows")
    if len(parts) == 1:
        return {name: 1}
    if not _ACCELERATOR_COUNT_RE.fullmatch(parts[1]):
        raise LeaveToSkyPilot(f"{where} {text!r} has no count the reader knows")
    count = float(parts[1])
    if count <= 0:
        raise LeaveToSkyPilot(f"{where} {text!r} has no positive count")
    return {name: int(count) if count.is_integer() else count}


def _job_recovery(value: Any, where: str) -> dict[str, Any] | None:
    """``{strategy: <UPPER>, ...}``, or None for ``none`` (``Resources.__init__``)."""
    if value is None:
        return None
    if isinstance(value, str):
        return None if value == NO_RECOVERY else {"strategy": value.upper()}
    if not isinstance(value, Mapping):
        raise LeaveToSkyPilot(f"{where} is not text or a mapping")
    _check_keys(value, where, JOB_RECOVERY_KEYS)
    out = dict(value)
    strategy = out.setdefault("strategy", None)
    restarts = out.get("max_restarts_on_errors")
    if restarts is not None and (not isinstance(restarts, int) or isinstance(restarts, bool) or restarts < 0):
        raise LeaveToSkyPilot(f"{where}.max_restarts_on_errors is not a whole number >= 0")
    if strategy is None:
        return out
    if strategy == NO_RECOVERY:
        return None
    out["strategy"] = _text(strategy, f"{where}.strategy").upper()
    return out


def _labels(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise LeaveToSkyPilot(f"{where} is not a mapping of text to text")
    return dict(value)
