"""Declared schema of the SkyPilot task and config fields the policy reads from a request.

Why: the policy server receives a task as YAML text from any client, and the policy reads
it as plain dicts (``task_yaml``). Before this schema, a ``resources`` that was a string
or a ``config`` that was a list crashed the policy with ``AttributeError`` (a 500 and a
traceback in the server log; SkyPilot then fails closed with no reason), and
``num_nodes: -1`` was accepted (issue 17). The types follow SkyPilot 0.14.1's own task
schema (``sky/utils/schemas.py``: ``get_task_schema`` / ``get_resources_schema``) for the
fields the policy reads; everything else passes through, since SkyPilot validates it
again when it builds the ``Task``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, ValidationError

from sky_kueue.kueue.api import INT32_MAX
from sky_kueue.kueue.schema import StrictFields as _Fields
from sky_kueue.kueue.schema import StrMap, reason

#: A number-or-text resource amount (``cpus: 4``, ``cpus: 4+``, ``memory: 32``).
Amount = Annotated[str | int | float, Field(union_mode="left_to_right")]


class KubernetesConfig(_Fields):
    pod_config: dict[str, Any] | None = None
    context_configs: dict[str, Any] | None = None


class TaskConfig(_Fields):
    kubernetes: KubernetesConfig | None = None
    hooks: Any = None


class JobRecovery(_Fields):
    strategy: str | None = None


class Candidate(_Fields):
    """One resources candidate (also the shared part of ``ordered``/``any_of``)."""

    infra: str | None = None
    cloud: str | None = None
    region: str | None = None
    zone: str | None = None
    instance_type: str | None = None
    accelerators: str | dict[str, int | float | None] | list[str] | None = None
    cpus: Amount | None = None
    memory: Amount | None = None
    labels: StrMap | None = None
    priority_class: str | None = None
    job_recovery: str | JobRecovery | None = None


class Resources(Candidate):
    ordered: list[Candidate] | None = None
    any_of: list[Candidate] | None = None


class Task(_Fields):
    name: str | None = None
    num_nodes: Annotated[int, Field(ge=1, le=INT32_MAX)] | None = None
    resources: Resources | None = None
    config: TaskConfig | None = None
    envs: dict[str, str | int | float | bool | None] | None = None


class Workspace(_Fields):
    kubernetes: dict[str, Any] | None = None


class SkyPilotConfig(_Fields):
    active_workspace: str | None = None
    workspaces: dict[str, Workspace | None] | None = None
    kubernetes: dict[str, Any] | None = None


_UNION_TAGS = frozenset({"str", "int", "float", "bool", "none", "constrained-int"})


def _is_union_tag(part: object) -> bool:
    """pydantic names the member of a union in the location (``str``, ``dict[str,int]``)."""
    return isinstance(part, str) and (part in _UNION_TAGS or "[" in part)


def _first_problem(exc: ValidationError) -> str:
    # Unions report one error per member; the shortest location is the field itself.
    errors = sorted(exc.errors(include_url=False), key=lambda e: len(e["loc"]))
    first = errors[0]
    path = ".".join(str(p) for p in first["loc"] if not _is_union_tag(p))
    return f"{path}: {reason(first)}" if path else reason(first)


def task_problem(task: Mapping[str, Any]) -> str | None:
    """The first type problem of a task mapping (``resources.cpus: expected ...``), or None."""
    try:
        Task.model_validate(task)
    except ValidationError as exc:
        return _first_problem(exc)
    return None


def config_problem(config: Mapping[str, Any]) -> str | None:
    """The first type problem of a SkyPilot config mapping, or None."""
    try:
        SkyPilotConfig.model_validate(config)
    except ValidationError as exc:
        return _first_problem(exc)
    return None
