"""The RESTful policy server on 127.0.0.1, called by SkyPilot's own ``RestfulAdminPolicy``:
same answers as the in-process policy; malformed bodies, wrong tokens and internal errors
are refused with one-line reasons."""

from __future__ import annotations

import copy
import http.client
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from click.testing import CliRunner

from sky_kueue.cli.main import cli
from sky_kueue.skypilot.config_cache import ConfigCache
from sky_kueue.skypilot.policy_server import (
    MAX_BODY_BYTES,
    PolicyServer,
    TokenError,
    authorized,
    is_loopback,
    load_token,
    make_server,
    serve_in_thread,
)
from sky_kueue.skypilot.wire import decode_request
from tests.skypilot.builders import DEMO_CONFIG, TEMPLATES
from tests.skypilot.conftest import SkyEnv

TOKEN = "s3cret-token"


def running(server: PolicyServer) -> Iterator[PolicyServer]:
    thread = serve_in_thread(server)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def server() -> Iterator[PolicyServer]:
    yield from running(make_server(DEMO_CONFIG, port=0))


@pytest.fixture(scope="module")
def token_server() -> Iterator[PolicyServer]:
    yield from running(make_server(DEMO_CONFIG, port=0, token=TOKEN))


def user_request(env: SkyEnv, template: str | dict[str, Any], request_name: str = "jobs.launch") -> Any:
    from sky import admin_policy
    from sky.server.requests.request_names import AdminPolicyRequestName

    if isinstance(template, str):
        task = env.sky.Task.from_yaml(str(TEMPLATES / f"{template}.yaml"))
    else:
        task = env.sky.Task.from_yaml_config(copy.deepcopy(template))
    return admin_policy.UserRequest(
        task=task,
        skypilot_config=env.sky.Config({"active_workspace": "default"}),
        request_name=AdminPolicyRequestName(request_name),
        user=env.sky.models.User(id="abc123", name="alice") if hasattr(env.sky, "models") else None,
    )


def without_policy(config: Any) -> dict[str, Any]:
    plain = json.loads(json.dumps(dict(config)))
    plain.pop("admin_policy", None)
    return plain


@pytest.mark.parametrize("template", ["team-a-gpu-train", "team-b-cpu-dev", "multinode-ray", "burst-finetune"])
def test_same_result_as_in_process_through_admin_policy_utils(
    sky_env: SkyEnv, server: PolicyServer, template: str
) -> None:
    from sky import skypilot_config
    from sky.server.requests.request_names import AdminPolicyRequestName
    from sky.utils import admin_policy_utils

    def apply() -> tuple[dict[str, Any], dict[str, Any]]:
        task = sky_env.sky.Task.from_yaml(str(TEMPLATES / f"{template}.yaml"))
        dag, config = admin_policy_utils.apply(task, request_name=AdminPolicyRequestName.JOBS_LAUNCH)
        return dag.tasks[0].to_yaml_config(), without_policy(config)

    in_process = apply()
    with skypilot_config.replace_skypilot_config(sky_env.sky.Config({"admin_policy": server.url})):
        assert skypilot_config.get_nested(("admin_policy",), None) == server.url
        over_http = apply()
    assert over_http == in_process
    assert "kueue.x-k8s.io/priority-class" in json.dumps(over_http[0])


def test_rejection_reaches_the_user_through_restful_admin_policy(sky_env: SkyEnv, server: PolicyServer) -> None:
    from sky import admin_policy, exceptions

    config = yaml.safe_load((TEMPLATES / "team-b-cpu-dev.yaml").read_text())
    config["resources"]["priority_class"] = "prod-priority"
    with pytest.raises(exceptions.UserRequestRejectedByPolicy) as info:
        admin_policy.RestfulAdminPolicy(server.url).apply(user_request(sky_env, config))
    assert "sky-kueue: priority class 'prod-priority' is not allowed for team 'team-b'" in str(info.value)


def test_relaunch_validate_is_accepted_over_http(sky_env: SkyEnv, server: PolicyServer) -> None:
    from sky import admin_policy

    config = yaml.safe_load((TEMPLATES / "team-b-cpu-dev.yaml").read_text())
    config["envs"] = {"SKYPILOT_MANAGED_JOB_ID": "3"}
    config["resources"]["labels"] = {}
    request = user_request(sky_env, config, "validate")
    mutated = admin_policy.RestfulAdminPolicy(server.url).apply(request)
    assert mutated.task.to_yaml_config() == request.task.to_yaml_config()


def test_wrong_or_missing_token_is_refused(sky_env: SkyEnv, token_server: PolicyServer) -> None:
    from sky import admin_policy, exceptions

    port = token_server.server_address[1]
    for url in (token_server.url, f"http://sky-kueue:wrong@127.0.0.1:{port}/policy"):
        with pytest.raises(exceptions.RestfulPolicyError, match="401"):
            admin_policy.RestfulAdminPolicy(url).apply(user_request(sky_env, "team-a-gpu-train"))
    good = f"http://sky-kueue:{TOKEN}@127.0.0.1:{port}/policy"
    mutated = admin_policy.RestfulAdminPolicy(good).apply(user_request(sky_env, "team-a-gpu-train"))
    assert next(iter(mutated.task.resources)).priority_class == "prod-priority"


def test_token_from_netrc(
    sky_env: SkyEnv, token_server: PolicyServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sky import admin_policy

    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1 login sky-kueue password {TOKEN}\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    mutated = admin_policy.RestfulAdminPolicy(token_server.url).apply(user_request(sky_env, "team-b-cpu-dev"))
    assert next(iter(mutated.task.resources)).priority_class == "dev-priority"


def test_bearer_token_and_health_without_token(token_server: PolicyServer) -> None:
    body = json.dumps(json.dumps(_inner_request())).encode()
    ok = requests.post(token_server.url, data=body, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert ok.status_code == 200
    inner = json.loads(ok.json())
    assert "team-a-lq" in inner["task"]
    health = requests.get(token_server.url.replace("/policy", "/health"), timeout=10)
    assert health.status_code == 200 and health.json() == {"status": "ok"}


def _inner_request(**changes: Any) -> dict[str, Any]:
    inner = {
        "task": "name: t\nresources:\n  infra: kubernetes\n  labels:\n    sky-kueue.io/team: team-a\n",
        "skypilot_config": "{}\n",
        "request_name": "jobs.launch",
        "request_options": None,
        "at_client_side": False,
        "user": "",
    }
    inner.update(changes)
    return inner


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"not json", "body is not JSON"),
        (json.dumps(json.dumps({"task": "name: t\n"})).encode(), "missing 'request_name'"),
        (json.dumps(json.dumps(_inner_request(task="resources: [\n"))).encode(), "'task' is not valid YAML"),
        (b"", "body is not JSON"),
    ],
)
def test_malformed_bodies_get_400_with_reason(server: PolicyServer, body: bytes, reason: str) -> None:
    response = requests.post(server.url, data=body, timeout=10)
    assert response.status_code == 400
    assert response.text.startswith("malformed policy request: ")
    assert reason in response.text
    assert "Traceback" not in response.text


def test_http_level_errors(server: PolicyServer) -> None:
    host, port = server.server_address[0], server.server_address[1]
    assert requests.post(server.url.replace("/policy", "/other"), data=b"{}", timeout=10).status_code == 404
    assert requests.get(server.url, timeout=10).status_code == 404
    connection = http.client.HTTPConnection(str(host), port, timeout=10)
    connection.putrequest("POST", "/policy")
    connection.endheaders()
    assert connection.getresponse().status == 411
    connection.close()
    connection = http.client.HTTPConnection(str(host), port, timeout=10)
    connection.putrequest("POST", "/policy")
    connection.putheader("Content-Length", str(MAX_BODY_BYTES + 1))
    connection.endheaders()
    response = connection.getresponse()
    assert response.status == 413 and b"larger than" in response.read()
    connection.close()


def test_internal_error_is_a_one_line_500(server: PolicyServer, monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(request: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(server.cache, "evaluate", explode)
    response = requests.post(server.url, data=json.dumps(json.dumps(_inner_request())).encode(), timeout=10)
    assert response.status_code == 500
    assert response.text == "internal error in the sky-kueue policy server"


def test_server_binds_loopback_by_default() -> None:
    server = make_server(DEMO_CONFIG, port=0)
    try:
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.server_close()


def test_cli_refuses_to_serve_beyond_the_loopback_without_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    def bind(sock: socket.socket, address: Any) -> None:
        raise AssertionError(f"bound {address} without a token")

    monkeypatch.setattr(socket.socket, "bind", bind)
    for host in ("0.0.0.0", "::", "10.1.2.3", "policy.example.com"):
        result = CliRunner().invoke(cli, ["policy-server", "--config", str(DEMO_CONFIG), "--host", host, "--port", "0"])
        assert result.exit_code == 2, result.output
        assert result.output.strip().count("\n") == 0
        assert result.output.startswith(f"error: refusing to serve the policy on {host} without a token: ")
        assert "--token-file" in result.output


def test_a_server_beyond_the_loopback_needs_a_token() -> None:
    assert all(is_loopback(host) for host in ("127.0.0.1", "127.8.9.10", "::1", "localhost"))
    assert not any(is_loopback(host) for host in ("0.0.0.0", "::", "", "192.0.2.1", "policy.example.com"))
    with pytest.raises(TokenError, match="without a token"):
        PolicyServer(("192.0.2.1", 0), ConfigCache(DEMO_CONFIG))  # TEST-NET-1: never this machine's


def test_authorization_header_parsing() -> None:
    import base64

    basic = "Basic " + base64.b64encode(f"anyone:{TOKEN}".encode()).decode()
    assert authorized(basic, TOKEN) and authorized(f"Bearer {TOKEN}", TOKEN)
    for header in (
        None,
        "",
        f"Bearer {TOKEN}x",
        "Basic !!!",
        "Basic " + base64.b64encode(TOKEN.encode()).decode(),
        f"Token {TOKEN}",
    ):
        assert not authorized(header, TOKEN)


def test_token_file(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(f"  {TOKEN}\n")
    path.chmod(0o600)
    assert load_token(path) == TOKEN
    path.write_text("two words\n")
    with pytest.raises(ValueError, match="one token"):
        load_token(path)


def test_cli_refuses_a_bad_config_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "plugin.yaml"
    bad.write_text("teams:\n  team-a: {namespace: team-a}\n")
    result = CliRunner().invoke(cli, ["policy-server", "--config", str(bad), "--port", "0"])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0
    assert f"{bad}:2: teams.team-a.local_queue: required key is missing" in result.output


def test_decoding_what_skypilot_sends(sky_env: SkyEnv) -> None:
    encoded = user_request(sky_env, "multinode-ray").encode()
    request = decode_request(json.dumps(encoded).encode())
    assert request.task["num_nodes"] == 3
    assert request.user is not None and request.user.name == "alice"


def test_cli_serves_until_terminated(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(0o600)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sky_kueue.cli.main",
            "policy-server",
            "--port",
            "0",
            "--config",
            str(DEMO_CONFIG),
            "--token-file",
            str(token),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("sky-kueue policy server: admin_policy: http://127.0.0.1:")
        url = line.split("admin_policy: ", 1)[1].strip()
        assert requests.get(url.replace("/policy", "/health"), timeout=10).json() == {"status": "ok"}
        assert requests.post(url, data=b"{}", timeout=10).status_code == 401
    finally:
        process.terminate()
        process.wait(timeout=10)
