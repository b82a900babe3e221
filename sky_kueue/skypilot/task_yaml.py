"""The YAML form of a SkyPilot task, read and rewritten as plain dicts.

Why dicts and not ``sky.Task``: the same decision has to be made in-process (the admin
policy receives a ``sky.Task``) and in the policy server (which receives YAML over HTTP and
should not import SkyPilot). SkyPilot's own RESTful policy round-trips tasks through
``Task.to_yaml_config()`` / ``Task.from_yaml_config()`` (``sky/admin_policy.py``), so this
form is what SkyPilot itself treats as the task's complete description of its resources.

Shape handled here (SkyPilot 0.14.1, ``sky/task.py`` and ``sky/resources.py``):

* ``resources`` is either one candidate mapping, or shared keys plus ``ordered:`` (a list,
  tried in order) or ``any_of:`` (a set) of candidates. Candidate keys override shared keys,
  except ``labels``, which are merged.
* The task's top-level ``config:`` block is a per-task SkyPilot config override. SkyPilot
  stores it on every candidate as ``_cluster_config_overrides`` and serialises it back there
  (``config.hooks`` is task metadata and stays top-level).

Every function returns new objects; inputs are never mutated.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Keys of ``resources`` that hold a list of candidates.
GROUP_KEYS = ("ordered", "any_of")

#: Per-candidate key holding the task-level SkyPilot config override.
OVERRIDES_KEY = "_cluster_config_overrides"

#: ``config:`` sub-key that is task metadata rather than a config override.
HOOKS_KEY = "hooks"

KUBERNETES_CLOUD = "kubernetes"
_CLOUD_ALIASES = {"k8s": KUBERNETES_CLOUD}
_ANY = "*"


@dataclass(frozen=True)
class Infra:
    """Where one resource candidate may run.

    Attributes:
        cloud: lower-case cloud name (``kubernetes`` for ``k8s``), or None for "any cloud".
        region: region; for Kubernetes, the kubeconfig context.
        zone: zone, if any.
    """

    cloud: str | None = None
    region: str | None = None
    zone: str | None = None

    @property
    def is_kubernetes(self) -> bool:
        """True if the candidate names Kubernetes explicitly."""
        return self.cloud == KUBERNETES_CLOUD

    def to_infra_string(self) -> str:
        """The ``infra:`` value for this location (``*`` for unknown parts)."""
        parts = [self.cloud or _ANY]
        if self.region is not None or self.zone is not None:
            parts.append(self.region or _ANY)
        if self.zone is not None:
            parts.append(self.zone)
        return "/".join(parts)


def parse_infra(candidate: Mapping[str, Any]) -> Infra:
    """Read a candidate's location from ``infra:`` or the legacy ``cloud:``/``region:`` keys."""
    infra = candidate.get("infra")
    if isinstance(infra, str) and infra.strip():
        parts = [p.strip() for p in infra.strip().strip("/").split("/")]
        cloud: str | None = _CLOUD_ALIASES.get(parts[0].lower(), parts[0].lower())
        if cloud == KUBERNETES_CLOUD:
            # Kubernetes context names may contain "/" (e.g. EKS ARNs): the rest is the context.
            region = "/".join(parts[1:]) or None
            zone = None
        else:
            region = parts[1] if len(parts) > 1 else None
            zone = parts[2] if len(parts) > 2 else None
    else:
        raw_cloud = candidate.get("cloud")
        cloud = _CLOUD_ALIASES.get(str(raw_cloud).lower(), str(raw_cloud).lower()) if raw_cloud else None
        region = candidate.get("region")
        zone = candidate.get("zone")
    return Infra(
        cloud=None if cloud == _ANY else cloud,
        region=None if region == _ANY else region,
        zone=None if zone == _ANY else zone,
    )


def with_infra(candidate: Mapping[str, Any], infra: Infra) -> dict[str, Any]:
    """A copy of ``candidate`` whose location is ``infra`` (legacy keys removed)."""
    out = {k: copy.deepcopy(v) for k, v in candidate.items() if k not in ("cloud", "region", "zone")}
    out["infra"] = infra.to_infra_string()
    return out


def resource_group(task: Mapping[str, Any]) -> str | None:
    """``"ordered"``, ``"any_of"`` or None (a single candidate)."""
    resources = task.get("resources") or {}
    return next((key for key in GROUP_KEYS if key in resources), None)


def candidates(task: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The task's resource candidates, each complete (shared keys and config override merged).

    Args:
        task: a task in YAML form.

    Returns:
        One mapping per candidate, in the task's order. The task-level ``config:`` block
        (minus ``hooks``) is merged into each candidate's ``_cluster_config_overrides``.
    """
    resources = copy.deepcopy(task.get("resources") or {})
    group = resource_group(task)
    if group is None:
        result = [resources]
    else:
        shared = {k: v for k, v in resources.items() if k not in GROUP_KEYS}
        result = []
        for item in resources.get(group) or []:
            merged = copy.deepcopy(shared)
            own = dict(item or {})
            labels = own.pop("labels", None)
            merged.update(own)
            if labels is not None:
                merged["labels"] = {**(merged.get("labels") or {}), **labels}
            result.append(merged)
    task_overrides = {k: v for k, v in (task.get("config") or {}).items() if k != HOOKS_KEY}
    if task_overrides:
        for item in result:
            item[OVERRIDES_KEY] = deep_merge(task_overrides, item.get(OVERRIDES_KEY) or {})
    return result


def with_candidates(task: Mapping[str, Any], group: str | None, new: list[dict[str, Any]]) -> dict[str, Any]:
    """A copy of ``task`` whose resources are exactly ``new``.

    Args:
        task: a task in YAML form.
        group: ``"ordered"``, ``"any_of"`` or None; ignored (treated as None) for one candidate.
        new: complete candidates, as returned by :func:`candidates` and then rewritten.

    Returns:
        The task with ``resources`` replaced; the top-level ``config:`` keeps only ``hooks``
        because every other override now lives on the candidates.
    """
    out = copy.deepcopy(dict(task))
    if len(new) == 1:
        out["resources"] = copy.deepcopy(new[0])
    else:
        out["resources"] = {group or "ordered": copy.deepcopy(new)}
    hooks = (task.get("config") or {}).get(HOOKS_KEY)
    out.pop("config", None)
    if hooks is not None:
        out["config"] = {HOOKS_KEY: copy.deepcopy(hooks)}
    return out


def get_path(mapping: Mapping[str, Any] | None, *keys: str) -> Any:
    """``mapping[k1][k2]...`` or None when any level is missing or not a mapping."""
    node: Any = mapping
    for key in keys:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def set_path(mapping: dict[str, Any], keys: tuple[str, ...], value: Any) -> None:
    """Set ``mapping[k1][k2]... = value`` in place, creating (or replacing non-dict) levels."""
    node = mapping
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[keys[-1]] = value


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Recursive merge; ``override`` wins on conflicts. Neither input is modified."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
