"""The examples docs/user-journey.md shows run as shown: the policy server's request body and
``predict --add``'s ``job.yaml``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from sky_kueue.skypilot.policy_server import PolicyServer, make_server, serve_in_thread
from tests.skypilot.builders import DEMO_CONFIG, REPO, SEED_SCENARIO

JOURNEY = REPO / "docs" / "user-journey.md"
TIMEOUT_SECONDS = 30


def block(section: str, language: str) -> str:
    """The first fenced ``language`` block of the journey's section starting with ``section``."""
    text = JOURNEY.read_text()
    start = text.index(f"\n## {section}")
    end = text.find("\n## ", start + 1)
    found = re.search(rf"```{language}\n(.*?)```", text[start : end if end > 0 else None], re.S)
    assert found is not None, f"no {language} block in section {section}"
    return found.group(1)


@pytest.fixture()
def policy_server() -> Iterator[PolicyServer]:
    server = make_server(DEMO_CONFIG, port=0)
    thread = serve_in_thread(server)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_the_policy_request_shown_is_labelled_for_team_a(policy_server: PolicyServer) -> None:
    body = block("2. Enable the admin policy", "json").encode()
    request = urllib.request.Request(
        policy_server.url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
        assert response.status == 200
        answer = json.loads(json.loads(response.read()))
    task = yaml.safe_load(answer["task"])
    labels = task["resources"]["_cluster_config_overrides"]["kubernetes"]["pod_config"]["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "team-a-lq"


def test_the_job_yaml_shown_is_predicted(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(block("5. Ask the predictor", "yaml"))
    proc = subprocess.run(
        [sys.executable, "-m", "sky_kueue.cli.main", "predict", "--snapshot", str(SEED_SCENARIO), "--add", str(job)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "team-a/what-if-train" in proc.stdout
