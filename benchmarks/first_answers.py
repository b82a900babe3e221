"""Benchmark of a newcomer's first answers: ``check-config`` and ``launch --dry-run``; prints JSON.

What is measured (issue 35, item 6): the wall time of each command as a fresh process, the
median of ``--repeats`` runs after one warm-up run (a warm machine: files in the page cache,
``.pyc`` written), against two baselines measured in the same run with the same interpreter:
``python -c pass`` (the interpreter's start) and ``python -c 'import sky'`` (what importing
SkyPilot alone costs). The target is 2 s per command on a warm machine; the ratios make the
figures comparable across machines.

* ``check_config``: ``sky-kueue check-config configs/sky-kueue.yaml`` with a SkyPilot config
  that lists the sandbox's context and a kubeconfig that has it (so the SkyPilot context check
  runs, as on a user's machine);
* ``launch_dry_run``: ``sky-kueue launch task_templates/team-a-gpu-train.yaml --dry-run`` with
  the demo config and ``--snapshot`` of the seed scenario (no cluster needed).

Run: ``.venv/bin/python benchmarks/first_answers.py [--repeats 5]`` (about a minute).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
#: The target of issue 35 for each command on a warm machine.
TARGET_SECONDS = 2.0
DEFAULT_REPEATS = 5
#: How long one command may take before the benchmark gives up on it.
COMMAND_TIMEOUT_SECONDS = 120
SANDBOX_CONTEXT = "sky-kueue-sandbox"


def timed(argv: list[str], env: dict[str, str]) -> float:
    """Seconds one process takes; a failing command fails the benchmark (with its stderr)."""
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_SECONDS, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    return elapsed


def median_of(argv: list[str], env: dict[str, str], repeats: int) -> float:
    timed(argv, env)  # warm-up: page cache and .pyc files
    return statistics.median(timed(argv, env) for _ in range(repeats))


def environment(root: Path) -> dict[str, str]:
    """An isolated HOME with a SkyPilot config naming the sandbox context and a kubeconfig with it."""
    home = root / "home"
    (home / ".sky").mkdir(parents=True)
    global_config = home / ".sky" / "config.yaml"
    global_config.write_text(yaml.safe_dump({"kubernetes": {"allowed_contexts": [SANDBOX_CONTEXT]}}))
    kubeconfig = root / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "benchmark"}}],
                "contexts": [{"name": SANDBOX_CONTEXT, "context": {"cluster": "c", "user": "u"}}],
                "current-context": SANDBOX_CONTEXT,
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKYPILOT_") and k != "SKY_KUEUE_CONFIG"}
    env.update(HOME=str(home), KUBECONFIG=str(kubeconfig), PYTHONPATH=str(REPO))
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=DEFAULT_REPEATS)
    args = parser.parse_args(argv)
    python = sys.executable
    cli = [python, "-m", "sky_kueue.cli.main"]
    snapshot = REPO / "tests" / "oracle" / "seeds" / "scenarios" / "a-gpu-borrow-preempt.yaml"
    with tempfile.TemporaryDirectory(prefix="sky-kueue-first-answers-") as tmp:
        env = environment(Path(tmp))
        baselines = {
            "python_pass": median_of([python, "-c", "pass"], env, args.repeats),
            "import_sky": median_of([python, "-c", "import sky"], env, args.repeats),
        }
        commands = {
            "check_config": [*cli, "check-config", str(REPO / "configs" / "sky-kueue.yaml")],
            "launch_dry_run": [
                *cli,
                "launch",
                str(REPO / "task_templates" / "team-a-gpu-train.yaml"),
                "--dry-run",
                "--config",
                str(REPO / "configs" / "sky-kueue-demo.yaml"),
                "--snapshot",
                str(snapshot),
            ],
        }
        results: dict[str, Any] = {}
        for name, command in commands.items():
            seconds = median_of(command, env, args.repeats)
            results[name] = {
                "seconds": round(seconds, 3),
                "x_python_pass": round(seconds / baselines["python_pass"], 1),
                "x_import_sky": round(seconds / baselines["import_sky"], 2),
                "target_seconds": TARGET_SECONDS,
                "met": seconds < TARGET_SECONDS,
            }
    print(
        json.dumps(
            {
                "repeats": args.repeats,
                "baselines_seconds": {k: round(v, 3) for k, v in baselines.items()},
                "commands": results,
                "load_average": [round(x, 2) for x in os.getloadavg()],
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
