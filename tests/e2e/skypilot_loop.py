"""The whole loop with the real SkyPilot, on the sandbox, stage by stage, with evidence.

Run it with ``scripts/e2e-skypilot.sh`` (or ``SKY_KUEUE_E2E=1 pytest tests/e2e``). What runs:
the sandbox (Kueue emulation, Nodes, the local kubelet), SkyPilot 0.14.1's own API server with
the sky-kueue admin policy and its jobs controller in consolidation mode (isolated ``HOME`` with
an offline catalog), and the sky-kueue resubmission controller. Then ``sky jobs launch`` of
team-b's dev job, team-a's prod job, Kueue's preemption of team-b, SkyPilot's relaunch and the
controller's aging of it.

Where it stops, and why (printed as the last stage): SkyPilot's runtime setup
(``setup_commands`` of ``sky/templates/kubernetes-ray.yml.j2``) waits for the pod's own
container command to install packages with apt, start sshd and install Ray and SkyPilot
(markers ``/tmp/apt_ssh_setup_complete``, ``/tmp/ray_skypilot_installation_complete``), then
rewrites ``/etc/security/limits.conf``, ``/etc/systemd/system.conf`` and ``/etc/fuse.conf``
with sudo. The sandbox's kubelet runs exec'd commands as local processes, not in containers
(no container runtime exists on these machines), so running that init would reconfigure the
host itself; the kubelet never starts a pod's main command. A job therefore never reaches
RUNNING here: the loop is verified up to SkyPilot's runtime setup, through a preemption, a
relaunch and its aging.
"""

from __future__ import annotations

import copy
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import yaml

from sky_kueue.sandbox import seed
from sky_kueue.sandbox.apiserver.events import StoreEvent
from sky_kueue.sandbox.sandbox import Sandbox
from sky_kueue.sandbox.skypilot_home import isolated_environment

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
CONTEXT = "sky-kueue-sandbox"
WORKLOADS = "workloads.kueue.x-k8s.io"
#: How long each stage may take (SkyPilot backs off ~100 s before a relaunch).
STAGE_TIMEOUT_SECONDS = 240
POLL_SECONDS = 1.0
DEV_BASE_PRIORITY = 100

T = TypeVar("T")


class StageFailed(AssertionError):
    """A stage did not reach its expected state in time (the message says what was seen)."""


@dataclass
class Evidence:
    stages: list[tuple[str, str]] = field(default_factory=list)

    def record(self, stage: str, evidence: str) -> None:
        self.stages.append((stage, evidence))
        print(f"[stage {len(self.stages)}] {stage}\n    {evidence}", flush=True)


def _wait(what: str, probe: Callable[[], T | None], timeout: float = STAGE_TIMEOUT_SECONDS) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(POLL_SECONDS)
    raise StageFailed(f"timed out after {timeout:.0f} s waiting for {what}")


def plugin_config(root: pathlib.Path) -> pathlib.Path:
    """The demo config with the boost policy ``bounded`` aging one step per preemption (the
    default ``rank`` only orders a relaunch inside its class), so that a single preemption shows
    in the relaunch's priority (tests/controller/test_live_band.py shows ``rank`` live)."""
    data = yaml.safe_load((REPO / "configs" / "sky-kueue-demo.yaml").read_text())
    data["aging"]["parameters"] = {"policy": "bounded", "preemptions_per_step": 1}
    path = root / "sky-kueue.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@contextmanager
def skypilot_world(root: pathlib.Path) -> Iterator[tuple[Sandbox, dict[str, str], pathlib.Path]]:
    """The sandbox (with kubelet) and an environment for ``sky`` commands against it."""
    with Sandbox(kubelet=True, kubelet_root=root / "pods") as box:
        box.apply(seed.seed_cluster())
        env = isolated_environment(
            root,
            box.kubeconfig_path,
            plugin_config(root),
            CONTEXT,
            {"jobs": {"controller": {"consolidation_mode": True}}},
        )
        env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
        try:
            yield box, env, pathlib.Path(env["HOME"])
        finally:
            subprocess.run([str(BIN / "sky"), "api", "stop"], env=env, capture_output=True, timeout=120, check=False)


def sky(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(BIN / "sky"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=STAGE_TIMEOUT_SECONDS,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if result.returncode != 0:
        raise StageFailed(f"sky {' '.join(args)} exited {result.returncode}: {(result.stdout + result.stderr)[-1500:]}")
    return result


def _pods(box: Sandbox, namespace: str) -> list[dict[str, Any]]:
    return [p for p in box.store.list("pods", namespace).items if not p["metadata"].get("deletionTimestamp")]


def _workload_of(box: Sandbox, namespace: str, pod: dict[str, Any]) -> dict[str, Any] | None:
    group = pod["metadata"].get("labels", {}).get("kueue.x-k8s.io/pod-group-name")
    return box.store.try_get(WORKLOADS, group, namespace) if group else None


def _conditions(obj: dict[str, Any] | None) -> dict[str, tuple[str, str]]:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return {c["type"]: (c["status"], c.get("reason", "")) for c in conditions}


def _effective_priority(workload: dict[str, Any]) -> int:
    boost = (workload["metadata"].get("annotations") or {}).get("kueue.x-k8s.io/priority-boost", "0")
    return int(workload["spec"].get("priority") or 0) + int(boost or 0)


def _latest_provision_log(home: pathlib.Path) -> str:
    logs = sorted((home / "sky_logs").glob("sky-*/provision.log"), key=lambda p: p.stat().st_mtime)
    return logs[-1].read_text(errors="replace") if logs else ""


def run(root: pathlib.Path, evidence: Evidence) -> None:
    """Drive the loop; raises :class:`StageFailed` at the first stage that does not happen."""
    with skypilot_world(root) as (box, env, home):
        nodes = [n["metadata"]["name"] for n in box.store.list("nodes").items]
        evidence.record("sandbox cluster with Kueue emulation and a local kubelet", f"{box.url}; nodes {nodes}")

        state = root / "controller.db"
        controller = subprocess.Popen(
            [
                str(BIN / "sky-kueue"),
                "controller",
                "run",
                "--kubeconfig",
                str(box.kubeconfig_path),
                "--state",
                str(state),
                "--config",
                str(root / "sky-kueue.yaml"),
                "--lease-namespace",
                "default",
                "--reage-interval",
                "5",
                "--log-format",
                "text",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(root / "controller.log").open("w"),
        )
        try:
            _drive(box, env, home, state, evidence)
        finally:
            controller.terminate()
            controller.wait(30)


@dataclass
class WorkloadHistory:
    """Every committed state of every Workload (a preempted one may be collected within a second)."""

    states: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, event: StoreEvent) -> None:
        self.states.append(copy.deepcopy(event.obj))

    def preempted(self, uid: str) -> dict[str, Any] | None:
        return next(
            (
                s
                for s in self.states
                if s["metadata"].get("uid") == uid and _conditions(s).get("Preempted", ("False",))[0] == "True"
            ),
            None,
        )


def _drive(box: Sandbox, env: dict[str, str], home: pathlib.Path, state: pathlib.Path, evidence: Evidence) -> None:
    history = WorkloadHistory()
    box.store.add_commit_hook(history, WORKLOADS)
    check = sky(env, "check", "kubernetes")
    enabled = "Kubernetes: enabled" in check.stdout
    evidence.record("SkyPilot API server with the sky-kueue policy; sky check", f"Kubernetes enabled: {enabled}")
    if not enabled:
        raise StageFailed(check.stdout[-1500:])

    launch = sky(env, "jobs", "launch", "-y", "-d", str(REPO / "task_templates" / "team-b-cpu-dev.yaml"))
    evidence.record(
        "sky jobs launch team-b-cpu-dev (policy applied by SkyPilot's server)",
        next((line.strip() for line in launch.stdout.splitlines() if "Managed Job ID" in line), launch.stdout[-300:]),
    )

    dev_pod = _wait(
        "team-b's pod to be admitted and Running",
        lambda: next((p for p in _pods(box, "team-b") if (p.get("status") or {}).get("phase") == "Running"), None),
    )
    labels = dev_pod["metadata"]["labels"]
    dev_group = labels["kueue.x-k8s.io/pod-group-name"]
    dev_workload = box.store.get(WORKLOADS, dev_group, "team-b")
    evidence.record(
        "team-b's pod: Kueue labels from the policy, admitted by Kueue, bound and Running",
        f"pod {dev_pod['metadata']['name']} queue={labels.get('kueue.x-k8s.io/queue-name')} "
        f"priority-class={labels.get('kueue.x-k8s.io/priority-class')} node={dev_pod['spec'].get('nodeName')}; "
        f"Workload {dev_group} priority {dev_workload['spec'].get('priority')} "
        f"Admitted={_conditions(dev_workload).get('Admitted', ('?',))[0]}",
    )

    _wait(
        "SkyPilot to exec into the pod and sync its runtime files",
        lambda: "setup_runtime_on_cluster" in _latest_provision_log(home),
    )
    assert box.kubelet is not None
    synced = sorted(str(p.relative_to(box.kubelet.root)) for p in box.kubelet.root.rglob("*.whl"))
    evidence.record("SkyPilot ran commands in the pod (kubectl exec) and rsynced its wheel", f"files: {synced}")

    sky(env, "jobs", "launch", "-y", "-d", str(REPO / "task_templates" / "team-a-gpu-train.yaml"))

    victim = _wait(
        "Kueue to preempt team-b's Workload for team-a's prod job",
        lambda: history.preempted(dev_workload["metadata"]["uid"]),
    )
    evidence.record(
        "team-a's prod job arrives; Kueue preempts team-b (pods deleted)",
        f"Workload {dev_group}: Preempted {_conditions(victim)['Preempted']}; team-b pods left: "
        f"{[p['metadata']['name'] for p in _pods(box, 'team-b')]}",
    )

    def recorded() -> dict[str, Any] | None:
        result = subprocess.run(
            [str(BIN / "sky-kueue"), "controller", "status", "--state", str(state), "--output", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if result.returncode != 0 or not result.stdout.strip():
            return None
        jobs = json.loads(result.stdout).get("jobs") or []
        return next((j for j in jobs if j.get("preemptions")), None)

    job = _wait("the resubmission controller to record the preemption", recorded)
    evidence.record("the sky-kueue controller recorded the preemption", json.dumps(job, sort_keys=True)[:400])

    def relaunched() -> dict[str, Any] | None:
        for pod in _pods(box, "team-b"):
            workload = _workload_of(box, "team-b", pod)
            if workload is not None and workload["metadata"]["uid"] != dev_workload["metadata"]["uid"]:
                return workload
        return None

    again = _wait("SkyPilot's jobs controller to relaunch team-b's job (after its backoff)", relaunched)
    evidence.record(
        "SkyPilot relaunched the preempted job: a new Workload under the same pod-group name",
        f"Workload {again['metadata']['name']} uid {again['metadata']['uid']}, conditions {_conditions(again)}",
    )

    def aged() -> dict[str, Any] | None:
        workload = box.store.try_get(WORKLOADS, again["metadata"]["name"], "team-b")
        return workload if workload is not None and _effective_priority(workload) > DEV_BASE_PRIORITY else None

    raised = _wait("the controller to age the relaunched Workload", aged)
    evidence.record(
        "the sky-kueue controller aged the relaunch",
        f"effective priority {DEV_BASE_PRIORITY} -> {_effective_priority(raised)} "
        f"(spec.priority {raised['spec'].get('priority')}, annotations {raised['metadata'].get('annotations')})",
    )
    queue = sky(env, "jobs", "queue")
    evidence.record("SkyPilot's view of the jobs", " | ".join(queue.stdout.strip().splitlines()[-3:]))
    evidence.record(
        "STOP: the jobs cannot reach RUNNING here",
        "SkyPilot's runtime setup waits for the pod's container command (apt packages, sshd, Ray and SkyPilot "
        "install) and then rewrites /etc files with sudo; the sandbox's kubelet runs exec'd commands as local "
        "processes, not in containers (no container runtime on this machine), so it never starts that command",
    )


def _stop_on_sigterm(signum: int, frame: object) -> None:
    # ``timeout`` (as CI uses it) sends SIGTERM; turn it into an exception so that the
    # ``finally`` blocks stop SkyPilot's API server, the controller and the sandbox.
    raise StageFailed(f"stopped by signal {signum}")


def main() -> int:
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    if shutil.which("socat") is None or shutil.which("nc") is None:
        print("e2e: socat and nc are needed (bash scripts/host-tools.sh installs them)", file=sys.stderr)
        return 2
    evidence = Evidence()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sky-kueue-e2e-") as tmp:
        try:
            run(pathlib.Path(tmp), evidence)
        except StageFailed as failure:
            done = evidence.stages[-1][0] if evidence.stages else "nothing yet"
            print(
                f"e2e: FAILED at stage {len(evidence.stages) + 1} after {time.monotonic() - started:.0f} s "
                f"(last stage reached: {done}): {failure}",
                file=sys.stderr,
            )
            return 1
    print(f"e2e: {len(evidence.stages)} stages in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
