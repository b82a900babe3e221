"""The policy server's ``/metrics``: scraped over HTTP from a server whose live view is the
sandbox, after one placement, one rejection and one malformed body, each counted once."""

from __future__ import annotations

import datetime
import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from sky_kueue.metrics_http import serve_metrics
from sky_kueue.sandbox.apiserver.clock import ManualClock
from sky_kueue.sandbox.sandbox import Sandbox
from sky_kueue.skypilot import cluster_view
from sky_kueue.skypilot.config_cache import ConfigCache
from sky_kueue.skypilot.policy_server import PolicyServer
from tests.skypilot.builders import SEED_SCENARIO, TEMPLATES, demo_config_data
from tests.skypilot.test_policy_server import running

TIMEOUT_SECONDS = 10


def _body(task: dict[str, object]) -> bytes:
    inner = {"task": yaml.safe_dump(task), "skypilot_config": "{}\n", "request_name": "jobs.launch"}
    return json.dumps(json.dumps(inner)).encode()


def _post(port: int, body: bytes) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_SECONDS)
    try:
        connection.request("POST", "/policy", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``url`` (a /metrics endpoint) by (name, sorted labels)."""
    connection = http.client.HTTPConnection(url.split("/")[2], timeout=TIMEOUT_SECONDS)
    try:
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
    finally:
        connection.close()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[PolicyServer]:
    clock = ManualClock(datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.timezone.utc))
    with Sandbox(clock=clock, run_emulator=False) as box:
        box.apply([d for d in yaml.safe_load_all(SEED_SCENARIO.read_text()) if d])
        data = demo_config_data()
        data["cluster"] = {**(data.get("cluster") or {}), "kubeconfig": str(box.kubeconfig_path)}
        path = tmp_path / "sky-kueue.yaml"
        path.write_text(yaml.safe_dump(data))
        try:
            yield from running(PolicyServer(("127.0.0.1", 0), ConfigCache(path)))
        finally:
            cluster_view.close_live_mirrors()


def test_policy_metrics_count_each_answer_once(live_server: PolicyServer) -> None:
    metrics = serve_metrics(live_server.metrics.registry)
    try:
        assert metrics.url.startswith("http://127.0.0.1:")
        port = live_server.server_address[1]
        task = yaml.safe_load((TEMPLATES / "team-b-cpu-dev.yaml").read_text())
        assert _post(port, _body(task)) == 200
        task["resources"]["priority_class"] = "prod-priority"  # not allowed for team-b
        assert _post(port, _body(task)) == 400
        assert _post(port, b"not json") == 400
        samples = scrape(metrics.url)
    finally:
        metrics.stop()

    requests = {labels: value for (name, labels), value in samples.items() if name == "sky_kueue_policy_requests_total"}
    assert requests == {
        (("reason", ""), ("verdict", "placed")): 1.0,
        (("reason", "priority-not-allowed"), ("verdict", "rejected")): 1.0,
        (("reason", ""), ("verdict", "malformed")): 1.0,
    }
    latency = {
        dict(labels)["verdict"]: value
        for (name, labels), value in samples.items()
        if name == "sky_kueue_policy_request_duration_seconds_count"
    }
    assert latency == {"placed": 1.0, "rejected": 1.0, "malformed": 1.0}
    # the live view of the sandbox (the kubeconfig's current context) was current at the last decision
    assert samples[("sky_kueue_policy_view_staleness_seconds", (("context", ""),))] == 0.0
