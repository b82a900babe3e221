"""A team cluster that is down costs the user's terminal one line, not hundreds (issue 26)."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from sky_kueue.skypilot import background_logs, cluster_view
from sky_kueue.skypilot.cluster_view import LIVE_RECONNECT_INTERVAL_SECONDS, LiveContextViews
from sky_kueue.skypilot.config_view import ConfigClusterView
from sky_kueue.skypilot.decision import Placement
from sky_kueue.skypilot.engine import evaluate
from sky_kueue.skypilot.view import ContextHealth
from tests.skypilot.builders import SEED_SCENARIO, config, request, task


class Terminal(logging.Handler):
    """What a terminal shows: records at warning or above, as Python's last-resort handler."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name}: {record.getMessage()}")


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    handler = Terminal()
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)
        cluster_view.close_live_mirrors()
        background_logs.uninstall()


def dead_kubeconfig(tmp_path: Path, contexts: tuple[str, ...]) -> Path:
    """A kubeconfig whose contexts all point at a port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": contexts[0],
                "clusters": [{"name": "dead", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": c, "context": {"cluster": "dead", "user": "u"}} for c in contexts],
            }
        )
    )
    return path


@pytest.mark.slow
def test_a_dead_cluster_is_one_warning_however_many_launches_and_retries(terminal: Terminal, tmp_path: Path) -> None:
    kubeconfig = dead_kubeconfig(tmp_path, ("up", "down"))
    cfg = config(
        kubernetes={"contexts": ["down"]},
        teams={"team-a": {"clusters": [{"context": "down"}]}},
    )
    now = [0.0]
    views = LiveContextViews(cfg, str(kubeconfig), ConfigClusterView(cfg), clock=lambda: now[0])
    for _ in range(2):  # two launches, the second after the reconnect interval: two connection attempts
        result = evaluate(request(task()), cfg, views)
        assert isinstance(result.decision, Placement)
        now[0] += LIVE_RECONNECT_INTERVAL_SECONDS + 1
    assert views.lookup("down").health is ContextHealth.UNREACHABLE
    assert len(terminal.lines) == 1, terminal.lines
    assert "the live cluster (down) cannot be reached" in terminal.lines[0]
    assert "retrying every 30s" in terminal.lines[0]


def test_the_filter_lowers_only_background_records(terminal: Terminal) -> None:
    background_logs.install()
    pool = logging.getLogger("urllib3.connectionpool")
    # Its own level for the test: its parent "urllib3" is set to ERROR by other code in the
    # process (SkyPilot's imports, the kubernetes client's Configuration), which would drop the
    # foreground warning before the filter is asked.
    previous_level = pool.level
    pool.setLevel(logging.WARNING)
    try:
        pool.warning("foreground retry")  # a command's own request: still shown
        with background_logs.quiet():
            pool.warning("probe retry")
        name = "sky-kueue-reflector-workloads"
        thread = threading.Thread(target=pool.warning, args=("reflector retry",), name=name)
        thread.start()
        thread.join()
        logging.getLogger("somebody.else").warning("unrelated")
    finally:
        pool.setLevel(previous_level)
    assert terminal.lines == ["urllib3.connectionpool: foreground retry", "somebody.else: unrelated"]


@pytest.mark.slow
def test_a_cluster_that_goes_down_is_one_warning_and_its_mirror_stops(
    terminal: Terminal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flood measured in issue 26: reflectors retrying and urllib3 warning on each retry."""
    from sky_kueue.sandbox.sandbox import Sandbox

    box = Sandbox(run_emulator=False).__enter__()
    try:
        box.apply([d for d in yaml.safe_load_all(SEED_SCENARIO.read_text()) if d and d["kind"] != "Workload"])
        monkeypatch.setenv("KUBECONFIG", str(box.kubeconfig_path))
        cfg = config(cluster={"discover": True})
        views = cluster_view.build_views(cfg)
        first = evaluate(request(task()), cfg, views)
        assert isinstance(first.decision, Placement) and first.decision.verdict.admits
    finally:
        box.__exit__(None, None, None)
    deadline = time.monotonic() + 4.0
    while time.monotonic() < deadline:
        evaluate(request(task()), cfg, views)
        time.sleep(0.2)
    assert len(terminal.lines) == 1, terminal.lines[:5]
    assert "cannot be reached" in terminal.lines[0]
    assert not cluster_view._live_mirrors  # stopped and forgotten: no reflector retries on
