"""The RestfulAdminPolicy wire format, decoded and encoded without SkyPilot."""

from __future__ import annotations

import json

import pytest
import yaml

from sky_kueue.skypilot.wire import WireError, decode_request, encode_response


def body(inner: object, double: bool = True) -> bytes:
    text = json.dumps(inner)
    return json.dumps(text).encode() if double else text.encode()


REQUEST = {
    "task": "name: train\nresources:\n  infra: kubernetes\n",
    "skypilot_config": "active_workspace: default\n",
    "request_name": "jobs.launch",
    "request_options": {"cluster_name": "train-7", "idle_minutes_to_autostop": 10, "down": True, "dryrun": False},
    "at_client_side": False,
    "user": "id: abc123\nname: alice\n",
    "client_api_version": 1,
    "client_version": "0.14.1",
}


def test_decodes_the_double_encoded_request() -> None:
    request = decode_request(body(REQUEST))
    assert request.task == {"name": "train", "resources": {"infra": "kubernetes"}}
    assert request.workspace == "default"
    assert request.request_name == "jobs.launch"
    assert request.user is not None and (request.user.id, request.user.name) == ("abc123", "alice")
    assert request.request_options is not None and request.request_options.down is True
    assert request.request_options.idle_minutes_to_autostop == 10


def test_single_encoded_object_and_empty_user_are_accepted() -> None:
    request = decode_request(body({**REQUEST, "user": "", "request_options": None}, double=False))
    assert request.user is None and request.request_options is None


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"\xff\xfe", "not UTF-8"),
        (b"{not json", "not JSON"),
        (json.dumps("{not json").encode(), "content is not JSON"),
        (body([1, 2]), "expected a JSON object"),
        (body({k: v for k, v in REQUEST.items() if k != "task"}), "missing 'task'"),
        (body({**REQUEST, "task": {"name": "x"}}), "'task' must be a string"),
        (body({**REQUEST, "task": "name: [x\n"}), "'task' is not valid YAML"),
        (body({**REQUEST, "task": "- a\n"}), "'task' must be a YAML mapping"),
        (body({**REQUEST, "task": ""}), "'task' is empty"),
        (body({**REQUEST, "request_name": " "}), "'request_name' is empty"),
        (body({**REQUEST, "at_client_side": "yes"}), "'at_client_side' must be a boolean"),
        (body({**REQUEST, "user": "name: alice\n"}), "'user' must hold an 'id'"),
        (body({**REQUEST, "request_options": "x"}), "'request_options' must be an object"),
    ],
)
def test_malformed_bodies_are_explained(raw: bytes, reason: str) -> None:
    with pytest.raises(WireError, match=None) as info:
        decode_request(raw)
    assert reason in str(info.value)


def test_response_is_a_json_string_holding_yaml() -> None:
    encoded = json.loads(encode_response({"name": "t", "resources": {"cpus": "2"}}, {"kubernetes": {}}))
    assert isinstance(encoded, str)
    inner = json.loads(encoded)
    assert yaml.safe_load(inner["task"]) == {"name": "t", "resources": {"cpus": "2"}}
    assert yaml.safe_load(inner["skypilot_config"]) == {"kubernetes": {}}
