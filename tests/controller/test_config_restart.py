"""``controller run`` starts again from its config when the file changes: a team added while
it runs gets its pods watched, without anyone restarting the controller; a broken edit changes
nothing."""

from __future__ import annotations

import datetime
import json
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from sky_kueue.sandbox.sandbox import Sandbox

from .test_controller_crash import REPO, SETUP, STARTUP_TIMEOUT_SECONDS, _config, controller_command

#: The config poll of the controller under test (its default is 10 s).
POLL_SECONDS = 0.2
STOP_TIMEOUT_SECONDS = 30.0
NEW_NAMESPACE = "zeta"


class Process:
    """The controller process; its JSON log lines, parsed, as they come."""

    def __init__(self, command: list[str]) -> None:
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO)
        self.lines: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self._changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            text = line.decode(errors="replace").strip()
            with self._changed:
                self.raw.append(text)
                if text.startswith("{"):  # a JSON log line (not a Python warning)
                    self.lines.append(json.loads(text))
                self._changed.notify_all()

    def wait_for(self, msg: str, count: int = 1, timeout: float = STARTUP_TIMEOUT_SECONDS) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = [line for line in self.lines if line.get("msg") == msg]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                assert left > 0 and self.proc.poll() is None, (msg, self.raw[-20:])
                self._changed.wait(min(left, 0.5))

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(STOP_TIMEOUT_SECONDS)


@pytest.mark.slow
def test_a_team_added_to_the_config_is_watched_after_the_controller_starts_again(tmp_path: Path) -> None:
    with Sandbox(run_emulator=False, start=datetime.datetime.now(datetime.timezone.utc)) as sandbox:
        sandbox.apply(SETUP)
        sandbox.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NEW_NAMESPACE}})
        config = _config(tmp_path)
        command = controller_command(
            sandbox,
            f"sqlite:{tmp_path / 'state.db'}",
            config,
            lease_namespace="default",
            lease_seconds=(4.0, 3.0, 0.5),
            extra=("--config-poll-interval", str(POLL_SECONDS)),
        )
        controller = Process(command)
        try:
            first = controller.wait_for("controller starting")[0]
            controller.wait_for("session started")
            assert NEW_NAMESPACE not in first["pod_namespaces"]

            data = yaml.safe_load(config.read_text())
            config.write_text("teams: [not, a, mapping]\n")  # a broken edit: logged, nothing restarts
            controller.wait_for("config changed but is not valid; running on the config read at start")
            data["teams"]["team-z"] = dict(data["teams"]["team-b"], namespace=NEW_NAMESPACE, local_queue="zeta-lq")
            config.write_text(yaml.safe_dump(data))

            controller.wait_for("config changed; starting again from it")
            controller.wait_for("controller restarting to read its config")
            again = controller.wait_for("controller starting", count=2)[1]
            controller.wait_for("session started", count=2)
        finally:
            code = controller.stop()
        assert NEW_NAMESPACE in again["pod_namespaces"], again
        assert again["pid"] == first["pid"]  # the same process: a pod keeps running
        assert code == 0, controller.raw[-20:]
        assert not any(line.get("level") == "error" and "not valid" not in line["msg"] for line in controller.lines)
        messages = [line["msg"] for line in controller.lines]
        assert messages.count("controller stopped") == 1, messages  # the first run restarted, never stopped
