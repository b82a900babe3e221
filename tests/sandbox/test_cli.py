"""``sky-kueue sandbox serve``: foreground server, kubeconfig, clean stop on SIGTERM."""

from __future__ import annotations

import pathlib
import signal
import subprocess
import sys
import urllib.request

import yaml

STARTUP_TIMEOUT_SECONDS = 30
SHUTDOWN_TIMEOUT_SECONDS = 10


def test_serve_writes_a_kubeconfig_and_stops_on_sigterm(tmp_path: pathlib.Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [sys.executable, "-m", "sky_kueue.cli.main", "sandbox", "serve", "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first_line = process.stdout.readline()
        assert first_line.startswith("API server listening on http://127.0.0.1:"), first_line
        url = first_line.rsplit(" ", 1)[1].strip()
        written = yaml.safe_load(kubeconfig.read_text())
        with urllib.request.urlopen(f"{url}/healthz", timeout=STARTUP_TIMEOUT_SECONDS) as response:
            health = response.read()

        process.send_signal(signal.SIGTERM)
        output, errors = process.communicate(timeout=SHUTDOWN_TIMEOUT_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    assert health == b"ok"
    assert written["clusters"][0]["cluster"]["server"] == url
    assert written["current-context"] == "sky-kueue-sandbox"
    assert process.returncode == 0, errors
    assert "stopping" in output
