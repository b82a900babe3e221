"""``sky-kueue sandbox serve``/``up``: foreground server, kubeconfig, clean stop on SIGTERM."""

from __future__ import annotations

import os
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


SANDBOX_NAMES = ("ctx-1", "ctx-2", "ctx-3")


def test_three_named_sandboxes_share_one_kubeconfig_variable(tmp_path: pathlib.Path) -> None:
    """``up --name``: each sandbox's cluster, user and context carry its name, so
    ``KUBECONFIG=kc1:kc2:kc3`` shows three contexts, each reaching its own sandbox."""
    paths = [tmp_path / name / "kubeconfig" for name in SANDBOX_NAMES]
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "sky_kueue.cli.main", "sandbox", "up", "--name", name, "--kubeconfig", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, path in zip(SANDBOX_NAMES, paths, strict=True)
    ]
    try:
        urls = []
        for process in processes:
            assert process.stdout is not None
            first_line = process.stdout.readline()
            assert first_line.startswith("sandbox cluster (Kueue emulation) listening on "), first_line
            urls.append(first_line.rsplit(" ", 1)[1].strip())
        env = {**os.environ, "KUBECONFIG": os.pathsep.join(map(str, paths))}
        kubectl = ["kubectl", "config"]
        contexts = subprocess.run(
            [*kubectl, "get-contexts", "-o", "name"], capture_output=True, text=True, env=env, timeout=30, check=False
        )
        servers = subprocess.run(
            [*kubectl, "view", "-o", "jsonpath={range .contexts[*]}{.name}={.context.cluster} {end}"],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
            check=False,
        )
        queues = subprocess.run(
            ["kubectl", "--context", SANDBOX_NAMES[2], "get", "clusterqueues", "-o", "name"],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
            check=False,
        )
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.communicate(timeout=SHUTDOWN_TIMEOUT_SECONDS)
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait()
    assert contexts.returncode == 0, contexts.stderr
    assert sorted(contexts.stdout.split()) == list(SANDBOX_NAMES)
    assert sorted(servers.stdout.split()) == [f"{n}={n}" for n in SANDBOX_NAMES]
    assert len(set(urls)) == 3
    for name, path, url in zip(SANDBOX_NAMES, paths, urls, strict=True):
        written = yaml.safe_load(path.read_text())
        assert written["current-context"] == name
        assert written["clusters"] == [{"name": name, "cluster": {"server": url}}]
    assert queues.returncode == 0, queues.stderr
    assert "clusterqueue.kueue.x-k8s.io/shared-cq" in queues.stdout.split()
    assert all(process.returncode == 0 for process in processes)


def test_a_named_sandbox_gets_its_own_kubeconfig_and_a_bad_name_one_line() -> None:
    from click.testing import CliRunner

    from sky_kueue.cli.main import cli
    from sky_kueue.cli.sandbox_cmd import DEFAULT_UP_KUBECONFIG_PATH, up_kubeconfig_path

    assert up_kubeconfig_path("sky-kueue-sandbox", None) == DEFAULT_UP_KUBECONFIG_PATH
    assert up_kubeconfig_path("ctx-2", None) == "~/.sky-kueue/sandbox/ctx-2/kubeconfig"
    assert up_kubeconfig_path("ctx-2", "/tmp/kc") == "/tmp/kc"
    refused = CliRunner(mix_stderr=False).invoke(cli, ["sandbox", "up", "--name", "a/b"])
    assert refused.exit_code == 2
    assert len(refused.stderr.strip().splitlines()) == 1 and "--name" in refused.stderr, refused.stderr


#: How the SkyPilot process below reports what it reads from the prepared home.
SKYPILOT_READS = (
    "from sky import skypilot_config; from sky.clouds import kubernetes as k; "
    "print(skypilot_config.get_nested(('admin_policy',), None)); "
    "print(','.join(k.Kubernetes.existing_allowed_contexts(silent=True)))"
)


def test_up_prepares_a_skypilot_home_and_prints_its_exports(tmp_path: pathlib.Path) -> None:
    """From the demo to one's own ``sky``: the exports make SkyPilot use the sandbox with the policy."""
    home = tmp_path / "skypilot"
    no_config = {**os.environ, "HOME": str(tmp_path / "user"), "SKY_KUEUE_CONFIG": ""}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sky_kueue.cli.main",
            "sandbox",
            "up",
            "--kubeconfig",
            str(tmp_path / "kubeconfig"),
            "--skypilot-home",
            str(home),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=no_config,
    )
    try:
        assert process.stdout is not None
        lines: list[str] = []
        while not lines or not lines[-1].strip().startswith("sky check"):
            line = process.stdout.readline()
            assert line, process.stderr.read() if process.stderr else "no output"
            lines.append(line)
        exports = dict(
            line.strip().removeprefix("export ").split("=", 1) for line in lines if line.strip().startswith("export ")
        )
        env = {**os.environ, **exports}
        env.pop("SKYPILOT_CONFIG", None)
        read = subprocess.run(
            [sys.executable, "-c", SKYPILOT_READS], env=env, capture_output=True, text=True, timeout=120, check=False
        )
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=SHUTDOWN_TIMEOUT_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    assert set(exports) == {
        "HOME",
        "KUBECONFIG",
        "SKYPILOT_GLOBAL_CONFIG",
        "SKYPILOT_PROJECT_CONFIG",
        "SKYPILOT_API_SERVER_LOCAL_PORT",
        "SKY_KUEUE_CONFIG",
    }
    assert exports["KUBECONFIG"] == str(tmp_path / "kubeconfig")
    assert (pathlib.Path(exports["HOME"]) / ".sky" / "catalogs" / "v8" / "kubernetes" / "images.csv").is_file()
    assert "the demo's, with open teams" in "".join(lines)
    plugin = yaml.safe_load(pathlib.Path(exports["SKY_KUEUE_CONFIG"]).read_text())
    assert plugin["teams"]["team-a"]["users"] == ["*"]
    assert read.returncode == 0, read.stderr
    assert read.stdout.split() == ["sky_kueue.skypilot.policy.KueuePolicy", "sky-kueue-sandbox"]
