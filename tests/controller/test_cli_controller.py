"""``sky-kueue controller status`` and ``run`` as a user meets them; structured, redacted logs.

``run`` itself is exercised end to end by the crash test (a real process, SIGKILL and a
graceful SIGTERM); here: its one-line input errors, and ``status`` over a state file written
by a live controller.
"""

from __future__ import annotations

import functools
import io
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sky_kueue.cli.main import cli
from sky_kueue.controller import kube_store, logs
from sky_kueue.controller.liveness import PERIOD_KEY, STOPPED_KEY
from sky_kueue.controller.runtime_state import RuntimeState
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from sky_kueue.sandbox.apiserver import ApiServer

from .live_support import POD_GRACE_SECONDS, demo_aging, group_pod, live_sandbox

REPO = Path(__file__).resolve().parents[2]


def _state_with_a_preempted_job(tmp_path: Path) -> Path:
    with live_sandbox(tmp_path) as live:
        live.new_controller(demo_aging(burst_after_preemptions=1))
        live.apply(group_pod("dev", "1", "team-b", "dev-priority", "5"))
        live.step()
        live.apply(group_pod("train", "2", "team-a", "prod-priority", "7", gpus="2"))
        live.step(60)
        live.step(POD_GRACE_SECONDS)  # the preempted pod runs out its grace period; SkyPilot relaunches
        live.apply(group_pod("dev", "1", "team-b", "dev-priority", "5"))
        live.step(20)
        return live.state_path


def test_status_lists_jobs_preemptions_boosts_and_bursts(tmp_path: Path) -> None:
    state = _state_with_a_preempted_job(tmp_path)
    result = CliRunner().invoke(cli, ["controller", "status", "--state", str(state), "--output", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    jobs = {j["job"]: j for j in document["jobs"]}
    dev = jobs["managed-job/1"]
    assert (dev["preemptions"], dev["boost"], dev["pod_group"]) == (1, 100, "dev-1-fcd1e5cf")
    assert dev["last_preemption"]["reason"] == "InCohortReclaimWhileBorrowing"
    assert dev["last_preemption"]["preemptor_priority"] == 1000
    assert dev["burst"]["reason"] == "preemptions"
    assert jobs["managed-job/2"]["preemptions"] == 0
    assert document["controller"]["identity"] == "replica-a" and document["controller"]["leader"] is False
    assert int(document["cursors"]["workloads"]) > 0

    text = CliRunner().invoke(cli, ["controller", "status", "--state", str(state)])
    assert text.exit_code == 0 and "managed-job/1" in text.output and "+100" in text.output

    stale = CliRunner().invoke(cli, ["controller", "status", "--state", str(state), "--max-heartbeat-age", "0"])
    assert stale.exit_code == 1
    assert document["controller"]["liveness"] == "stopped"  # its last beat, written on shutdown


def _state_with_a_beat(tmp_path: Path, *, leader: bool, age_seconds: float, **details: Any) -> Path:
    path = tmp_path / "state.db"
    SqliteHistoryStore(path).close()
    runtime = RuntimeState(path)
    try:
        runtime.beat("replica-a", leader, time.time() - age_seconds, {"lease": "ns/lease", **details})
    finally:
        runtime.close()
    return path


@pytest.mark.parametrize(
    ("leader", "age", "details", "line"),
    [
        (True, 0, {PERIOD_KEY: 2.0}, "controller replica-a (leader), last heartbeat 0s ago; lease ns/lease"),
        (False, 0, {PERIOD_KEY: 2.0}, "controller replica-a (follower), last heartbeat 0s ago; lease ns/lease"),
        (False, 300, {PERIOD_KEY: 2.0, STOPPED_KEY: True}, "controller replica-a stopped: shut down 300s ago"),
        (
            True,
            300,
            {PERIOD_KEY: 2.0},
            "controller replica-a not running: its last heartbeat is 300s old (it beats every 2s); it was stopped "
            "without shutting down, or cannot write to this store; lease ns/lease",
        ),
        (False, 300, {}, "not running: its last heartbeat is 300s old (it beats every 2s)"),  # a beat from before
    ],
)
def test_status_tells_a_stopped_or_silent_controller_from_a_live_one(
    tmp_path: Path, leader: bool, age: float, details: dict[str, Any], line: str
) -> None:
    state = _state_with_a_beat(tmp_path, leader=leader, age_seconds=age, **details)
    result = CliRunner().invoke(cli, ["controller", "status", "--state", str(state)])
    assert result.exit_code == 0, result.output
    assert line in " ".join(result.output.split())


def test_status_of_an_unreachable_store_names_the_url_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        kube_store, "RetryPolicy", functools.partial(kube_store.RetryPolicy, max_attempts=2, sleep=lambda _: None)
    )
    with ApiServer() as gone:
        kubeconfig = gone.write_kubeconfig(tmp_path / "kubeconfig")
        url = gone.url
    result = CliRunner(mix_stderr=False).invoke(
        cli, ["controller", "status", "--state", "kubernetes", "--kubeconfig", str(kubeconfig)]
    )
    assert result.exit_code == 1
    assert result.stderr.endswith(f"cannot reach the Kubernetes API server at {url}: connection refused\n")
    assert result.stderr.count("\n") == 1 and "HTTPConnection" not in result.stderr


def test_status_reads_the_history_from_its_home_cluster_and_the_heartbeat_from_its_own(tmp_path: Path) -> None:
    """``--state kubernetes --state-kubeconfig HOME``: the jobs are the home cluster's JobHistory
    objects (every cluster's controller writes there); the heartbeat is this cluster's."""
    from sky_kueue.controller.history import PreemptionRecord
    from sky_kueue.controller.keys import EpisodeKey
    from sky_kueue.controller.kube_store import KubernetesRuntimeState
    from sky_kueue.mirror.identity import JobIdentity

    from .conftest import STORE_NAMESPACE, kubernetes_store, sandbox_client

    with ApiServer() as home, ApiServer() as own:
        job = JobIdentity("team-b", pod_group="x-1-ab", managed_job_id="1", skypilot_owned=True)
        kubernetes_store(home).record_preemption(job, PreemptionRecord(EpisodeKey("w1", 1), 1.0, "x-1-ab"))
        kubernetes_store(own)  # the namespace
        KubernetesRuntimeState(sandbox_client(own), STORE_NAMESPACE).beat("replica-b", True, time.time(), {})
        home_kubeconfig = home.write_kubeconfig(tmp_path / "home")
        own_kubeconfig = own.write_kubeconfig(tmp_path / "own")
        args = ["controller", "status", "--state", "kubernetes", "--kubeconfig", str(own_kubeconfig), "-o", "json"]
        result = CliRunner(mix_stderr=False).invoke(cli, [*args, "--state-kubeconfig", str(home_kubeconfig)])
        assert result.exit_code == 0, result.stderr
        document = json.loads(result.stdout)
        assert [(j["job"], j["preemptions"]) for j in document["jobs"]] == [("managed-job/1", 1)]
        assert document["controller"]["identity"] == "replica-b"
        alone = json.loads(CliRunner(mix_stderr=False).invoke(cli, args).stdout)
        assert alone["jobs"] == [] and alone["controller"]["identity"] == "replica-b"


def test_bad_input_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(cli, ["controller", "status", "--state", str(tmp_path / "nope.db")])
    assert missing.exit_code == 2 and "does not exist" in missing.output
    config = runner.invoke(cli, ["controller", "run", "--config", str(tmp_path / "nope.yaml")])
    assert config.exit_code == 2 and "nope.yaml does not exist" in config.output
    both = runner.invoke(cli, ["controller", "run", "--no-reage", "--reage-interval", "60"])
    assert both.exit_code == 2 and "contradict" in both.output and "Traceback" not in both.output
    zero = runner.invoke(cli, ["controller", "run", "--reage-interval", "0"])
    assert zero.exit_code == 2 and "--reage-interval" in zero.output
    kubeconfig = runner.invoke(
        cli,
        [
            "controller",
            "run",
            "--config",
            str(REPO / "configs" / "sky-kueue.yaml"),
            "--kubeconfig",
            str(tmp_path / "k"),
        ],
    )
    assert kubeconfig.exit_code == 2 and "--kubeconfig" in kubeconfig.output
    sqlite_home = runner.invoke(
        cli, ["controller", "status", "--state", str(tmp_path / "x.db"), "--state-context", "home"]
    )
    assert sqlite_home.exit_code == 2 and "--state-kubeconfig/--state-context" in sqlite_home.output
    for result in (missing, config, kubeconfig, sqlite_home):
        assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_json_logs_carry_fields_and_never_a_credential() -> None:
    stream = io.StringIO()
    root = logging.getLogger("sky_kueue")
    saved = (root.level, root.propagate)
    handler = logs.configure("json", "info", stream)
    try:
        log = logging.getLogger("sky_kueue.controller.test")
        log.info(
            "reconciled %s",
            "team-b/dev",
            extra={"fields": {"job": "managed-job/1", "boost": 100, "token": "s3cr3t", "url": "https://u:pw@host/x"}},
        )
        log.warning("request failed: Authorization: Bearer abc.def.ghi")
    finally:
        root.removeHandler(handler)
        root.setLevel(saved[0])
        root.propagate = saved[1]
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["msg"] == "reconciled team-b/dev" and first["level"] == "info"
    assert (first["job"], first["boost"], first["token"]) == ("managed-job/1", 100, logs.REDACTED)
    assert "pw" not in first["url"]
    assert "abc.def.ghi" not in second["msg"]


def test_run_refuses_band_settings_before_it_starts(tmp_path: Path) -> None:
    # A band policy with an actuator that can only raise priorities: one line, exit 2, and no
    # request to the (unreachable) cluster: nothing starts, no Lease is taken.
    import yaml

    data = yaml.safe_load((REPO / "configs" / "sky-kueue.yaml").read_text())
    data["aging"]["parameters"] = {"policy": "rank", "actuator": "boost-annotation"}
    config = tmp_path / "sky-kueue.yaml"
    config.write_text(yaml.safe_dump(data))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    result = CliRunner().invoke(
        cli,
        [
            "controller",
            "run",
            "--config",
            str(config),
            "--kubeconfig",
            str(kubeconfig),
            "--state",
            f"sqlite:{tmp_path / 'state.db'}",
        ],
    )
    assert result.exit_code == 2, result.output
    assert "'boost-annotation' can only raise it" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
