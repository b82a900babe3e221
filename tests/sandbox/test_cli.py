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


def test_up_serves_the_seed_setup_to_kubectl(tmp_path: pathlib.Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sky_kueue.cli.main",
            "sandbox",
            "up",
            "--kubeconfig",
            str(kubeconfig),
            "--time-scale",
            "60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first_line = process.stdout.readline()
        assert first_line.startswith("sandbox cluster (Kueue emulation) listening on http://127.0.0.1:"), first_line
        listed = subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), "get", "clusterqueues", "-o", "name"],
            capture_output=True,
            text=True,
            timeout=STARTUP_TIMEOUT_SECONDS,
            check=False,
        )
        process.send_signal(signal.SIGTERM)
        output, errors = process.communicate(timeout=SHUTDOWN_TIMEOUT_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert listed.returncode == 0, listed.stderr
    assert sorted(listed.stdout.split()) == [
        "clusterqueue.kueue.x-k8s.io/shared-cq",
        "clusterqueue.kueue.x-k8s.io/team-a-cq",
        "clusterqueue.kueue.x-k8s.io/team-b-cq",
    ]
    assert process.returncode == 0, errors
    assert "stopping" in output


def test_up_rejects_an_unknown_scheduling_mode(tmp_path: pathlib.Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sky_kueue.cli.main",
            "sandbox",
            "up",
            "--kubeconfig",
            str(tmp_path / "k"),
            "--kueue-config",
            "turbo",
        ],
        capture_output=True,
        text=True,
        timeout=STARTUP_TIMEOUT_SECONDS,
        check=False,
    )
    assert proc.returncode != 0
    assert "unknown setting" in proc.stderr and "Traceback" not in proc.stderr
