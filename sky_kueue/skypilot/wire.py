"""SkyPilot's RestfulAdminPolicy wire format, decoded and encoded without importing SkyPilot.

The format (SkyPilot 0.14.1, ``sky/admin_policy.py`` ``RestfulAdminPolicy``; the tests run it
against this server offline):

* Request: ``POST`` with ``requests.post(json=user_request.encode())``. ``encode()`` already
  returns JSON text, so the HTTP body is a JSON *string* whose content is the JSON object
  ``{"task": <YAML>, "skypilot_config": <YAML>, "request_name": str, "request_options":
  {...}|null, "at_client_side": bool, "user": <YAML "id: ..\\nname: .."> or "",
  "client_api_version": int|null, "client_version": str|null}``.
* Success: HTTP 200 whose JSON body is again a *string* holding
  ``{"task": <YAML>, "skypilot_config": <YAML>}``; a plain object fails to decode.
* Rejection: HTTP 400; the response text becomes the user's error message.

For convenience (``curl``), a body that is the inner object itself is accepted too.
Everything that does not fit raises :class:`WireError`, which the server answers with 400.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

from sky_kueue.inputs import yaml_reader
from sky_kueue.inputs.errors import InputError
from sky_kueue.skypilot import task_schema
from sky_kueue.skypilot.request import PolicyRequest, RequestOptions, UserIdentity


class WireError(ValueError):
    """A request body that is not a RestfulAdminPolicy request; the message is one line."""


def decode_request(body: bytes) -> PolicyRequest:
    """Decode a RestfulAdminPolicy request body.

    Args:
        body: the raw HTTP body.

    Returns:
        The request as plain data.

    Raises:
        WireError: the body is not JSON, not the expected shape, or holds invalid YAML.
    """
    try:
        outer = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise WireError("body is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise WireError(f"body is not JSON ({exc.msg} at position {exc.pos})") from None
    except RecursionError:
        raise WireError("body nests JSON too deeply") from None
    except ValueError as exc:  # an integer beyond Python's digit limit
        raise WireError(f"body is not usable JSON ({str(exc).splitlines()[0]})") from None
    if isinstance(outer, str):
        try:
            inner = json.loads(outer)
        except json.JSONDecodeError as exc:
            raise WireError(f"body is a JSON string but its content is not JSON ({exc.msg})") from None
        except RecursionError:
            raise WireError("body nests JSON too deeply") from None
        except ValueError as exc:
            raise WireError(f"body is not usable JSON ({str(exc).splitlines()[0]})") from None
    else:
        inner = outer
    if not isinstance(inner, dict):
        raise WireError("expected a JSON object with 'task', 'skypilot_config' and 'request_name'")
    task = _yaml_mapping(_required_str(inner, "task"), "task")
    if not task:
        raise WireError("'task' is empty")
    problem = task_schema.task_problem(task)
    if problem is not None:
        raise WireError(f"'task' is not a valid SkyPilot task: {problem}")
    skypilot_config = _yaml_mapping(_optional_str(inner, "skypilot_config"), "skypilot_config")
    problem = task_schema.config_problem(skypilot_config)
    if problem is not None:
        raise WireError(f"'skypilot_config' is not a valid SkyPilot config: {problem}")
    request_name = _required_str(inner, "request_name").strip()
    if not request_name:
        raise WireError("'request_name' is empty")
    at_client_side = inner.get("at_client_side", False)
    if not isinstance(at_client_side, bool):
        raise WireError("'at_client_side' must be a boolean")
    return PolicyRequest(
        task=task,
        skypilot_config=skypilot_config,
        request_name=request_name,
        at_client_side=at_client_side,
        user=_user(inner.get("user", "")),
        request_options=_options(inner.get("request_options")),
    )


def encode_response(task: Mapping[str, Any], skypilot_config: Mapping[str, Any]) -> bytes:
    """Encode a (possibly mutated) request as SkyPilot expects it: a JSON string of JSON."""
    inner = json.dumps({"task": _dump_yaml(task), "skypilot_config": _dump_yaml(skypilot_config)})
    return json.dumps(inner).encode("utf-8")


def _dump_yaml(value: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(value), default_flow_style=False, sort_keys=False)


def _required_str(obj: Mapping[str, Any], key: str) -> str:
    if key not in obj:
        raise WireError(f"missing {key!r}")
    return _as_str(obj[key], key)


def _optional_str(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    return "" if value is None else _as_str(value, key)


def _as_str(value: object, key: str) -> str:
    if not isinstance(value, str):
        raise WireError(f"{key!r} must be a string (YAML text), not {type(value).__name__}")
    return value


def _yaml_mapping(text: str, key: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        documents = yaml_reader.load_all(text, repr(key))
    except InputError as exc:
        raise WireError(f"{key!r} is not valid YAML ({exc.reason})") from None
    if not documents:
        return {}
    first = documents[0]
    if not isinstance(first, dict):
        raise WireError(f"{key!r} must be a YAML mapping, not {type(first).__name__}")
    return first


def _user(value: object) -> UserIdentity | None:
    if value in (None, ""):
        return None
    data = _yaml_mapping(_as_str(value, "user"), "user")
    if "id" not in data:
        raise WireError("'user' must hold an 'id'")
    # As SkyPilot's own ``models.User`` stores it, so ``id:`` entries of the config match.
    user_id = str(data["id"]).strip().lower()
    name = data.get("name")
    return UserIdentity(id=user_id, name=str(name) if name else user_id)


def _options(value: object) -> RequestOptions | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise WireError("'request_options' must be an object or null")
    idle = value.get("idle_minutes_to_autostop")
    if idle is not None and (not isinstance(idle, int) or isinstance(idle, bool)):
        raise WireError("'request_options.idle_minutes_to_autostop' must be an integer or null")
    cluster = value.get("cluster_name")
    return RequestOptions(
        cluster_name=str(cluster) if cluster is not None else None,
        idle_minutes_to_autostop=idle,
        down=bool(value.get("down", False)),
        dryrun=bool(value.get("dryrun", False)),
    )
