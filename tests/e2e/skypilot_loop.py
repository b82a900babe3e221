"""The whole loop with the real SkyPilot, on the sandbox, stage by stage, with evidence.

Run it with ``scripts/e2e-skypilot.sh [--containers | --lane]`` (or ``SKY_KUEUE_E2E=1 pytest tests/e2e``).
What runs: the sandbox (Kueue emulation, Nodes, a kubelet), SkyPilot 0.14.1's own API server with
the sky-kueue admin policy and its jobs controller in consolidation mode (isolated ``HOME`` with
an offline catalog), and the sky-kueue resubmission controller. Then ``sky jobs launch`` of
team-b's dev job, team-a's prod job, Kueue's preemption of team-b, SkyPilot's relaunch and the
controller's aging of it.

Without ``--containers`` the kubelet runs exec'd commands as local processes and never starts a
pod's container command, so SkyPilot's runtime setup (``setup_commands`` of
``sky/templates/kubernetes-ray.yml.j2`` wait for the container command to install packages,
start sshd and install Ray and SkyPilot) never completes: that loop stops after the aging.

With ``--containers`` (root; :mod:`sky_kueue.sandbox.containers`) every pod's container runs
its command in namespaces of its own on SkyPilot's default image, built locally from
:mod:`sky_kueue.sandbox.containers.recipes_skypilot` (in a thread while the sandbox and
SkyPilot start; cached for later runs). The loop goes on: team-a's job runs and succeeds, which
frees the quota; the relaunched dev job is admitted, SkyPilot's runtime setup completes in its
pod, its ``run:`` ends and the job is SUCCEEDED in SkyPilot's jobs table and ``sky jobs
queue``; the sky-kueue controller records the job's Workload as finished in its JobHistory.
With ``--lane`` (no containers) team-b has a relaunch lane after one preemption (rendered by
``sky-kueue setup``'s :mod:`sky_kueue.skypilot.setup_lane` from ``configs/teams.yaml`` with a
``lane:`` key, :data:`LANE_SPEC`), the plugin config sets ``aging.strategy: KUEUE_AGING`` and the
sky-kueue server plugin is installed in SkyPilot's home (``~/.sky/plugins.yaml``, as
``configs/plugins.yaml``). The same launch and preemption; then SkyPilot's ``KUEUE_AGING``
recovery puts the relaunch in the lane's queue, the admin policy lets that relaunch (request
``jobs.launch_cluster`` in consolidation mode) keep it after checking SkyPilot's managed-jobs
state (:mod:`sky_kueue.skypilot.managed_relaunch`), Kueue admits its Workload in the lane's
ClusterQueue and the sky-kueue controller records the move (Event ``MovedToLane``). The loop
stops there (the aging stage is the default loop's).

The tasks are ``tests/e2e/tasks/*.yaml`` (the templates' resources; the dev run lasts 40 s so
that team-a preempts its first attempt, team-a's has no multi-gigabyte ``pip install torch``).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import pathlib
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import yaml

from sky_kueue.sandbox import seed
from sky_kueue.sandbox.apiserver.events import StoreEvent
from sky_kueue.sandbox.sandbox import Sandbox
from sky_kueue.sandbox.skypilot_home import KUBERNETES_IMAGES, isolated_environment

REPO = pathlib.Path(__file__).resolve().parents[2]
E2E_TASKS = pathlib.Path(__file__).resolve().parent / "tasks"
#: ``sitecustomize`` that points SkyPilot's network probe at the sandbox (its docstring says why).
NETWORK_PROBE_DIR = pathlib.Path(__file__).resolve().parent / "network_probe"
NETWORK_PROBE_URL_ENV = "SKY_KUEUE_E2E_NETWORK_PROBE_URL"
#: Terminal colour codes in ``sky jobs logs`` output.
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
BIN = pathlib.Path(sys.executable).parent
CONTEXT = "sky-kueue-sandbox"
WORKLOADS = "workloads.kueue.x-k8s.io"
#: How long each stage may take (SkyPilot backs off ~100 s before a relaunch).
STAGE_TIMEOUT_SECONDS = 240
#: A stage that includes a whole SkyPilot launch in containers (provision, runtime setup, run).
CONTAINER_STAGE_TIMEOUT_SECONDS = 420
#: SkyPilot's managed-jobs table, under the API server's ``HOME`` (``sky/jobs/state.py``).
JOBS_DB = pathlib.Path(".sky") / "spot_jobs.db"
#: The image SkyPilot's pods name here (the offline catalog's CPU tag, ``docker:`` dropped).
SKYPILOT_IMAGE = KUBERNETES_IMAGES[0][1].removeprefix("docker:")
POLL_SECONDS = 1.0
DEV_BASE_PRIORITY = 100

T = TypeVar("T")


class StageFailed(AssertionError):
    """A stage did not reach its expected state in time (the message says what was seen)."""


@dataclass
class Evidence:
    """The stages reached, each with its evidence and how long it took (printed as it comes)."""

    stages: list[tuple[str, str]] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    _last: float | None = None

    def record(self, stage: str, evidence: str) -> None:
        now = time.monotonic()
        took = now - (self.started if self._last is None else self._last)
        self._last = now
        self.stages.append((stage, evidence))
        self.seconds.append(took)
        print(
            f"[stage {len(self.stages)}] {stage}  (+{took:.0f} s, at {now - self.started:.0f} s)\n    {evidence}",
            flush=True,
        )


@dataclass(frozen=True)
class LoopOptions:
    """``containers``: run pods' containers (root), and go on to the relaunch's success.
    ``real``: the same on the real control plane, the real Kueue and a real node
    (``tests/e2e/real_world.py``); implies ``containers``. ``lane``: team-b's relaunch lane
    (module docstring)."""

    containers: bool = False
    real: bool = False
    #: team-b's relaunch lane after one preemption and the ``KUEUE_AGING`` strategy (no containers).
    lane: bool = False

    @property
    def runs_containers(self) -> bool:
        return self.containers or self.real

    def task(self, template: str, e2e_task: str) -> pathlib.Path:
        if self.real:
            return E2E_TASKS / "real" / e2e_task
        return E2E_TASKS / e2e_task if self.containers else REPO / "task_templates" / template


class SandboxWorld:
    """What the loop reads from the cluster, on the sandbox (its store, directly)."""

    def __init__(self, box: Sandbox) -> None:
        self.box = box
        self.kubeconfig_path = box.kubeconfig_path

    def pods(self, namespace: str) -> list[dict[str, Any]]:
        return _pods(self.box, namespace)

    def workload(self, name: str, namespace: str) -> dict[str, Any] | None:
        return self.box.store.try_get(WORKLOADS, name, namespace)

    def events(self, namespace: str) -> list[dict[str, Any]]:
        return list(self.box.store.list("events", namespace).items)

    def record_workloads(self, history: Callable[[Any], None]) -> None:
        self.box.store.add_commit_hook(history, WORKLOADS)

    @property
    def kubelet_root(self) -> pathlib.Path | None:
        return self.box.kubelet.root if self.box.kubelet is not None else None


def workload_of(world: Any, namespace: str, pod: dict[str, Any]) -> dict[str, Any] | None:
    group = pod["metadata"].get("labels", {}).get("kueue.x-k8s.io/pod-group-name")
    found: dict[str, Any] | None = world.workload(group, namespace) if group else None
    return found


def _wait(what: str, probe: Callable[[], T | None], timeout: float = STAGE_TIMEOUT_SECONDS) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(POLL_SECONDS)
    raise StageFailed(f"timed out after {timeout:.0f} s waiting for {what}")


#: The aging settings the loop runs with instead of the shipped default (``none``, which records only).
AGING_PARAMETERS: dict[str, Any] = {"policy": "bounded", "preemptions_per_step": 1}


def policy_banner() -> str:
    """The line the loop prints first: which aging policy it runs, and why not the default."""
    settings = ", ".join(f"{k}: {v}" for k, v in AGING_PARAMETERS.items() if k != "policy")
    return (
        f"e2e: aging policy {AGING_PARAMETERS['policy']} ({settings}) on configs/sky-kueue-demo.yaml, not the "
        "default none (records only): one preemption then raises the relaunch's priority above its class "
        "(the aged stage below), where none changes nothing and rank would only order it inside its class"
    )


#: The ``lane:`` key the ``--lane`` loop adds to ``configs/teams.yaml`` (the seed setup as a team
#: spec). A cohort lane for team-b alone, carved from the lender shared-cq: team-b's own
#: ClusterQueue has no quota to carve (a per-team lane would be empty), and giving team-b nominal
#: quota would stop team-a from preempting it. 5 CPUs and 10Gi hold team-b's dev task (5 CPUs,
#: 8 GB); the cohort keeps its 10 CPUs and 64Gi.
LANE_SPEC: dict[str, Any] = {
    "scope": "cohort",
    "donor": "shared-cq",
    "teams": ["team-b"],
    "quotas": {"cpu": "5", "memory": "10Gi"},
    "after_preemptions": 1,
}
LANE_TEAM = "team-b"
#: The recovery strategy that moves a relaunch into its lane (``controller/skypilot_plugin.py``).
LANE_STRATEGY = "KUEUE_AGING"
#: The sky-kueue server plugin, as ``configs/plugins.yaml`` names it.


@dataclass(frozen=True)
class LaneSetup:
    """What ``sky-kueue setup`` renders for :data:`LANE_SPEC`: the seed cluster with the lane
    carved in (donor's quota lowered, lane ClusterQueue and LocalQueue added), and the plugin
    config's ``teams.<team>.lane``."""

    objects: list[dict[str, Any]]
    team_lane: dict[str, Any]

    @property
    def cluster_queue(self) -> str:
        return str(self.team_lane["cluster_queue"])

    @property
    def local_queue(self) -> str:
        return str(self.team_lane["local_queue"])


def lane_setup(seed_objects: list[dict[str, Any]]) -> LaneSetup:
    """The seed cluster with team-b's relaunch lane, rendered by the product's setup code."""
    from sky_kueue.skypilot import setup_render
    from sky_kueue.skypilot.setup_spec import TeamsSpec

    data = yaml.safe_load((REPO / "configs" / "teams.yaml").read_text())
    data["lane"] = copy.deepcopy(LANE_SPEC)
    spec = TeamsSpec.model_validate(data)
    rendered, lanes = setup_render.render_objects_and_lanes(spec)
    (lane,) = lanes
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in rendered if o["kind"] in ("ClusterQueue", "LocalQueue")}
    objects = copy.deepcopy(seed_objects)
    for obj in objects:
        if obj["kind"] == "ClusterQueue" and obj["metadata"]["name"] == lane.donor:
            obj["spec"]["resourceGroups"] = by_name[("ClusterQueue", lane.donor)]["spec"]["resourceGroups"]
    objects.append(by_name[("ClusterQueue", lane.cluster_queue)])
    objects.extend(o for o in rendered if o["kind"] == "LocalQueue" and o["spec"]["clusterQueue"] == lane.cluster_queue)
    team_lane = setup_render.render_plugin_config(spec)["teams"][LANE_TEAM]["lane"]
    return LaneSetup(objects, team_lane)


def plugin_config(root: pathlib.Path, context: str = CONTEXT, lane: LaneSetup | None = None) -> pathlib.Path:
    """The demo config with the boost policy ``bounded`` aging one step per preemption (the
    default ``none`` changes no priority and ``rank`` only orders a relaunch inside its class),
    so that a single preemption shows in the relaunch's priority
    (tests/controller/test_live_band.py shows ``rank`` live). With ``lane``: team-b's
    ``lane`` and ``aging.strategy: KUEUE_AGING``, which a lane needs."""
    data = yaml.safe_load((REPO / "configs" / "sky-kueue-demo.yaml").read_text())
    data["aging"]["parameters"] = dict(AGING_PARAMETERS)
    data["kubernetes"]["contexts"] = [context]
    if lane is not None:
        data["aging"]["strategy"] = LANE_STRATEGY
        data["teams"][LANE_TEAM]["lane"] = copy.deepcopy(lane.team_lane)
    path = root / "sky-kueue.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def server_plugins(root: pathlib.Path) -> dict[str, Any]:
    """``~/.sky/plugins.yaml`` for the API server: ``configs/plugins.yaml`` as shipped, its
    parameters pointed at the loop's plugin config and the controller's state."""
    shipped: dict[str, Any] = yaml.safe_load((REPO / "configs" / "plugins.yaml").read_text())
    for plugin in shipped["plugins"]:
        plugin["parameters"] = {"config": str(root / "sky-kueue.yaml"), "state": str(root / "controller.db")}
    return shipped


@contextmanager
def skypilot_world(
    root: pathlib.Path, containers: bool = False, lane: LaneSetup | None = None
) -> Iterator[tuple[Sandbox, dict[str, str], pathlib.Path]]:
    """The sandbox (with kubelet, or containers) and an environment for ``sky`` commands; with
    ``lane``, the lane's objects in the sandbox and the server plugin in SkyPilot's home."""
    with Sandbox(kubelet=True, kubelet_root=root / "pods", containers=containers) as box:
        box.apply(seed.seed_cluster() if lane is None else lane.objects)
        env = isolated_environment(
            root,
            box.kubeconfig_path,
            plugin_config(root, lane=lane),
            CONTEXT,
            {"jobs": {"controller": {"consolidation_mode": True}}},
        )
        if lane is not None:
            plugins_yaml = pathlib.Path(env["HOME"]) / ".sky" / "plugins.yaml"
            plugins_yaml.parent.mkdir(parents=True, exist_ok=True)
            plugins_yaml.write_text(yaml.safe_dump(server_plugins(root)))
        env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
        # SkyPilot's jobs controller skips every job status check while https://8.8.8.8 and
        # https://1.1.1.1 do not answer (unreachable here): it is pointed at the sandbox.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(NETWORK_PROBE_DIR), env.get("PYTHONPATH")]))
        env[NETWORK_PROBE_URL_ENV] = box.url
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


def _conditions(obj: dict[str, Any] | None) -> dict[str, tuple[str, str]]:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return {c["type"]: (c["status"], c.get("reason", "")) for c in conditions}


def _effective_priority(workload: dict[str, Any]) -> int:
    boost = (workload["metadata"].get("annotations") or {}).get("kueue.x-k8s.io/priority-boost", "0")
    return int(workload["spec"].get("priority") or 0) + int(boost or 0)


def _latest_provision_log(home: pathlib.Path) -> str:
    logs = sorted((home / "sky_logs").glob("sky-*/provision.log"), key=lambda p: p.stat().st_mtime)
    return logs[-1].read_text(errors="replace") if logs else ""


@dataclass
class ImageBuild:
    """SkyPilot's default image, made ready in a thread while the sandbox and SkyPilot start.

    Why a thread: a first build takes minutes (the Debian base, then uv, Ray and SkyPilot's
    dependencies), and so do the SkyPilot API server's start, ``sky check`` and the first
    launch; pods need the image only once Kueue admits them, and the runtime then waits on the
    same build's lock. :meth:`finish` records the stage (or fails it)."""

    cached: bool
    started: float = field(default_factory=time.monotonic)
    done: threading.Event = field(default_factory=threading.Event)
    rootfs: pathlib.Path | None = None
    seconds: float = 0.0
    error: str = ""

    @classmethod
    def start(cls) -> ImageBuild:
        # Importing registers the recipe for SkyPilot's image references.
        from sky_kueue.sandbox.containers import recipes_skypilot  # noqa: F401
        from sky_kueue.sandbox.containers.images import ImageStore

        store = ImageStore()
        build = cls(cached=store.cached(SKYPILOT_IMAGE))
        threading.Thread(target=build._run, args=(store,), name="e2e-image-build", daemon=True).start()
        return build

    def _run(self, store: Any) -> None:
        from sky_kueue.sandbox.containers.images import ImageError

        try:
            self.rootfs = store.ensure(SKYPILOT_IMAGE).rootfs
        except ImageError as exc:
            self.error = str(exc)
        finally:
            self.seconds = time.monotonic() - self.started
            self.done.set()

    def finish(self, evidence: Evidence) -> None:
        from sky_kueue.sandbox.containers import recipes_skypilot

        while not self.done.wait(POLL_SECONDS):
            pass
        if self.rootfs is None:
            raise StageFailed(f"building the image {SKYPILOT_IMAGE}: {self.error}")
        size = subprocess.run(["du", "-sh", str(self.rootfs)], capture_output=True, text=True, check=False)
        evidence.record(
            f"SkyPilot's default image ({SKYPILOT_IMAGE} -> recipe {recipes_skypilot.SKYPILOT_RUNTIME_IMAGE}) "
            "in the sandbox's image store",
            f"{'cached' if self.cached else f'built in {self.seconds:.0f} s (beside the stages above)'}; "
            f"{self.rootfs}; size {(size.stdout.split() or ['?'])[0]}",
        )


def run(root: pathlib.Path, evidence: Evidence, options: LoopOptions | None = None) -> None:
    """Drive the loop; raises :class:`StageFailed` at the first stage that does not happen."""
    options = options or LoopOptions()
    if options.real:
        from tests.e2e import real_world

        world_of = real_world.skypilot_world(root, evidence, plugin_config(root, real_world.CONTEXT))
        with world_of as (world, env, home), running_controller(root, world.kubeconfig_path):
            _drive(world, env, home, root / "controller.db", evidence, options, None)
        return
    image = ImageBuild.start() if options.containers else None
    lane = lane_setup(seed.seed_cluster()) if options.lane else None
    with skypilot_world(root, options.containers, lane) as (box, env, home):
        nodes = [n["metadata"]["name"] for n in box.store.list("nodes").items]
        kubelet = "containers in namespaces of their own" if options.containers else "a local kubelet"
        evidence.record(f"sandbox cluster with Kueue emulation and {kubelet}", f"{box.url}; nodes {nodes}")
        if lane is not None:
            lane_cq = box.store.try_get("clusterqueues.kueue.x-k8s.io", lane.cluster_queue)
            assert lane_cq is not None, f"no lane ClusterQueue {lane.cluster_queue} in the sandbox"
            evidence.record(
                f"{LANE_TEAM}'s relaunch lane (rendered by sky-kueue setup), {LANE_STRATEGY} registered by the "
                "server plugin (~/.sky/plugins.yaml)",
                f"ClusterQueue {lane.cluster_queue} quota {lane.team_lane['quotas']} "
                f"preemption {lane_cq['spec']['preemption']}; LocalQueue {LANE_TEAM}/{lane.local_queue}; "
                f"after_preemptions {lane.team_lane['after_preemptions']}",
            )
        with running_controller(root, box.kubeconfig_path):
            _drive(SandboxWorld(box), env, home, root / "controller.db", evidence, options, image, lane)


@contextmanager
def running_controller(root: pathlib.Path, kubeconfig: pathlib.Path) -> Iterator[None]:
    """The sky-kueue controller on ``kubeconfig`` (SQLite state ``root/controller.db``)."""
    state = root / "controller.db"
    controller = subprocess.Popen(
        [
            str(BIN / "sky-kueue"),
            "controller",
            "run",
            "--kubeconfig",
            str(kubeconfig),
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
        yield
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


def _drive(
    world: Any,
    env: dict[str, str],
    home: pathlib.Path,
    state: pathlib.Path,
    evidence: Evidence,
    options: LoopOptions,
    image: ImageBuild | None = None,
    lane: LaneSetup | None = None,
) -> None:
    history = WorkloadHistory()
    world.record_workloads(history)
    check = sky(env, "check", "kubernetes")
    enabled = "Kubernetes: enabled" in check.stdout
    evidence.record("SkyPilot API server with the sky-kueue policy; sky check", f"Kubernetes enabled: {enabled}")
    if not enabled:
        raise StageFailed(check.stdout[-1500:])

    launch = sky(env, "jobs", "launch", "-y", "-d", str(options.task("team-b-cpu-dev.yaml", "team-b-dev.yaml")))
    dev_job_id = _managed_job_id(launch.stdout)
    evidence.record(
        "sky jobs launch team-b's dev job (policy applied by SkyPilot's server)",
        next((line.strip() for line in launch.stdout.splitlines() if "Managed Job ID" in line), launch.stdout[-300:]),
    )
    if image is not None:
        image.finish(evidence)

    dev_pod = _wait(
        "team-b's pod to be admitted and Running",
        lambda: next((p for p in world.pods("team-b") if (p.get("status") or {}).get("phase") == "Running"), None),
    )
    labels = dev_pod["metadata"]["labels"]
    dev_group = labels["kueue.x-k8s.io/pod-group-name"]
    dev_workload = world.workload(dev_group, "team-b")
    assert dev_workload is not None, f"no Workload {dev_group} for team-b's running pod"
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
    if options.runs_containers:
        # Asked inside the container: its writable layer changes under a walk from outside.
        synced = _exec(world, "team-b", dev_pod["metadata"]["name"], "ls -d ~/.sky/.runtime_files/*/*.whl")
    else:
        kubelet_root = world.kubelet_root
        assert kubelet_root is not None
        synced = str(sorted(str(p.relative_to(kubelet_root)) for p in kubelet_root.rglob("*.whl")))
    evidence.record("SkyPilot ran commands in the pod (kubectl exec) and rsynced its wheel", f"files: {synced}")

    prod = sky(env, "jobs", "launch", "-y", "-d", str(options.task("team-a-gpu-train.yaml", "team-a-train.yaml")))
    prod_job_id = _managed_job_id(prod.stdout)

    victim = _wait(
        "Kueue to preempt team-b's Workload for team-a's prod job",
        lambda: history.preempted(dev_workload["metadata"]["uid"]),
    )
    evidence.record(
        "team-a's prod job arrives; Kueue preempts team-b (pods deleted)",
        f"Workload {dev_group}: Preempted {_conditions(victim)['Preempted']}; team-b pods left: "
        f"{[p['metadata']['name'] for p in world.pods('team-b')]}",
    )

    def recorded() -> dict[str, Any] | None:
        return next((j for j in _controller_jobs(state) if j.get("preemptions")), None)

    job = _wait("the resubmission controller to record the preemption", recorded)
    evidence.record("the sky-kueue controller recorded the preemption", json.dumps(job, sort_keys=True)[:400])

    def relaunched() -> dict[str, Any] | None:
        for pod in world.pods("team-b"):
            workload = workload_of(world, "team-b", pod)
            if workload is not None and workload["metadata"]["uid"] != dev_workload["metadata"]["uid"]:
                return workload
        return None

    again = _wait("SkyPilot's jobs controller to relaunch team-b's job (after its backoff)", relaunched)
    evidence.record(
        "SkyPilot relaunched the preempted job: a new Workload under the same pod-group name",
        f"Workload {again['metadata']['name']} uid {again['metadata']['uid']}, conditions {_conditions(again)}",
    )

    if lane is not None:
        _drive_lane(world, env, home, state.parent, evidence, lane, dev_job_id, dev_workload["metadata"]["uid"])
        return

    def aged() -> dict[str, Any] | None:
        workload = world.workload(again["metadata"]["name"], "team-b")
        return workload if workload is not None and _effective_priority(workload) > DEV_BASE_PRIORITY else None

    raised = _wait("the controller to age the relaunched Workload", aged)
    evidence.record(
        f"the sky-kueue controller aged the relaunch (aging policy {AGING_PARAMETERS['policy']})",
        f"effective priority {DEV_BASE_PRIORITY} -> {_effective_priority(raised)} "
        f"(spec.priority {raised['spec'].get('priority')}, annotations {raised['metadata'].get('annotations')})",
    )
    if options.runs_containers:
        _drive_to_success(world, env, home, state, evidence, dev_job_id, prod_job_id, dev_workload["metadata"]["uid"])
        return
    queue = sky(env, "jobs", "queue")
    evidence.record("SkyPilot's view of the jobs", " | ".join(queue.stdout.strip().splitlines()[-3:]))
    evidence.record(
        "STOP: the jobs cannot reach RUNNING here",
        "SkyPilot's runtime setup waits for the pod's container command (apt packages, sshd, Ray and SkyPilot "
        "install) and then rewrites /etc files with sudo; the kubelet without --containers runs exec'd commands "
        "as local processes, not in containers, so it never starts that command (scripts/e2e-skypilot.sh "
        "--containers goes on)",
    )


def _drive_lane(
    world: Any,
    env: dict[str, str],
    home: pathlib.Path,
    root: pathlib.Path,
    evidence: Evidence,
    lane: LaneSetup,
    dev_job_id: int,
    first_uid: str,
) -> None:
    """From SkyPilot's relaunch to its admission in team-b's lane and the controller's record of it.

    The move is ``KUEUE_AGING``'s: in its ``recover()`` for a job SkyPilot saw RUNNING, and from
    ``_cleanup_cluster`` for a first attempt preempted while still STARTING, which SkyPilot
    retries inside ``StrategyExecutor._launch`` (``sky/jobs/recovery_strategy.py``) without a
    recovery: this loop's case. The failure message names SkyPilot's state of the job."""

    def in_lane() -> tuple[dict[str, Any], dict[str, Any]] | None:
        for pod in world.pods(LANE_TEAM):
            labels = pod["metadata"].get("labels") or {}
            workload = workload_of(world, LANE_TEAM, pod)
            if workload is None or workload["metadata"]["uid"] == first_uid:
                continue
            if labels.get("kueue.x-k8s.io/queue-name") == lane.local_queue:
                return pod, workload
        return None

    def queues() -> str:
        return str(
            [
                (p["metadata"]["name"], (p["metadata"].get("labels") or {}).get("kueue.x-k8s.io/queue-name"))
                for p in world.pods(LANE_TEAM)
            ]
        )

    try:
        pod, workload = _wait(f"the relaunch's pods to carry queue-name {lane.local_queue}", in_lane, 60)
    except StageFailed as failure:
        job = managed_job(home, dev_job_id) or {}
        raise StageFailed(
            f"{failure}; {LANE_TEAM}'s pods and their queues: {queues()}; SkyPilot's job {dev_job_id}: "
            f"status {job.get('status')}, recovery_count {job.get('recovery_count')} (STARTING: SkyPilot's launch "
            "retry, which the strategy moves only from the controller's recorded preemptions)"
        ) from None
    labels = pod["metadata"]["labels"]
    evidence.record(
        f"KUEUE_AGING moved the relaunch into the lane: its pods carry kueue.x-k8s.io/queue-name: {lane.local_queue}",
        f"pod {pod['metadata']['name']} queue={labels.get('kueue.x-k8s.io/queue-name')} "
        f"priority-class={labels.get('kueue.x-k8s.io/priority-class')}; "
        f"Workload {workload['metadata']['name']} queueName {workload['spec'].get('queueName')}",
    )

    def admitted() -> dict[str, Any] | None:
        found = world.workload(workload["metadata"]["name"], LANE_TEAM)
        if found is None or _conditions(found).get("Admitted", ("False",))[0] != "True":
            return None
        return found if ((found.get("status") or {}).get("admission") or {}).get("clusterQueue") else None

    done = _wait(f"Kueue to admit the relaunch in ClusterQueue {lane.cluster_queue}", admitted)
    admission = done["status"]["admission"]
    if admission["clusterQueue"] != lane.cluster_queue:
        raise StageFailed(f"the relaunch was admitted in {admission['clusterQueue']}, not {lane.cluster_queue}")
    evidence.record(
        f"Kueue admitted the relaunch in the lane's ClusterQueue {lane.cluster_queue}",
        f"Workload {done['metadata']['name']} uid {done['metadata']['uid']} admission "
        f"{json.dumps(admission, sort_keys=True)[:300]}; conditions {_conditions(done)}",
    )

    def moved() -> str | None:
        for event in world.events(LANE_TEAM):
            involved = event.get("involvedObject") or {}
            if event.get("reason") == "MovedToLane" and involved.get("name") == done["metadata"]["name"]:
                return f"Event MovedToLane on Workload {involved.get('name')}: {event.get('message')}"
        return None

    recorded = _wait("the sky-kueue controller to record the move (Event MovedToLane)", moved, 60)
    log = (root / "controller.log").read_text(errors="replace")
    logged = next((line.strip() for line in log.splitlines() if "entered its lane" in line), "(no log line)")
    evidence.record("the sky-kueue controller recorded the move", f"{recorded}; log: {logged[:300]}")
    queue = sky(env, "jobs", "queue")
    evidence.record("SkyPilot's view of the jobs", " | ".join(queue.stdout.strip().splitlines()[-3:]))
    evidence.record(
        "STOP: the relaunch is admitted in its lane",
        "the pods are Kueue-admitted; running them needs containers (scripts/e2e-skypilot.sh --containers)",
    )


def _managed_job_id(launch_output: str) -> int:
    found = re.search(r"Managed Job ID:\s*(\d+)", launch_output)
    if found is None:
        raise StageFailed(f"no managed job ID in sky jobs launch's output: {launch_output[-500:]}")
    return int(found.group(1))


def managed_job(home: pathlib.Path, job_id: int) -> dict[str, Any] | None:
    """SkyPilot's own record of a managed job (``spot`` table of ``~/.sky/spot_jobs.db``), read-only.

    Why not ``sky jobs queue`` in the polls: each call starts a client process (seconds on two
    busy cores); the table is what the queue shows. The last stage still prints the queue."""
    path = home / JOBS_DB
    if not path.exists():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)) as db:
            db.row_factory = sqlite3.Row
            row = db.execute(
                "SELECT spot_job_id, task_name, status, recovery_count, start_at, end_at, failure_reason "
                "FROM spot WHERE spot_job_id = ? ORDER BY task_id DESC LIMIT 1",
                (job_id,),
            ).fetchone()
    except sqlite3.OperationalError:  # locked or being migrated: the next poll reads it
        return None
    return dict(row) if row is not None else None


#: SkyPilot's terminal managed-job states other than SUCCEEDED (``sky/jobs/state.py``).
_FAILED_JOB_STATES = frozenset(
    {"CANCELLING", "CANCELLED", "FAILED", "FAILED_SETUP", "FAILED_PRECHECKS", "FAILED_NO_RESOURCE", "FAILED_CONTROLLER"}
)


def _job_reached(
    home: pathlib.Path, job_id: int, wanted: frozenset[str], min_recoveries: int = 0
) -> Callable[[], dict[str, Any] | None]:
    def probe() -> dict[str, Any] | None:
        job = managed_job(home, job_id)
        if job is None:
            return None
        if job["status"] in _FAILED_JOB_STATES:
            raise StageFailed(f"managed job {job_id} ended {job['status']}: {job.get('failure_reason')}")
        if job["status"] in wanted and int(job["recovery_count"] or 0) >= min_recoveries:
            return job
        return None

    return probe


def _exec(world: Any, namespace: str, pod: str, script: str) -> str:
    """``kubectl exec`` into a pod's container (as SkyPilot does); its output, or why it failed."""
    kubectl = ["kubectl", "--kubeconfig", str(world.kubeconfig_path), "-n", namespace]
    result = subprocess.run(
        [*kubectl, "exec", pod, "--", "bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = " ".join((result.stdout + result.stderr).split())
    return output if result.returncode == 0 else f"kubectl exec exited {result.returncode}: {output[-400:]}"


def _drive_to_success(
    world: Any,
    env: dict[str, str],
    home: pathlib.Path,
    state: pathlib.Path,
    evidence: Evidence,
    dev_job_id: int,
    prod_job_id: int,
    first_dev_uid: str,
) -> None:
    """From the aged relaunch to the dev job's SUCCEEDED and the controller's record of it.

    The dev job's states are read only once its relaunched pod runs, so RUNNING or SUCCEEDED
    are the relaunch's. SkyPilot's ``recovery_count`` is not required: it counts recoveries
    from RUNNING, and a first attempt preempted while still STARTING is retried without one."""
    prod = _wait(
        "team-a's prod job to run in its container and succeed",
        _job_reached(home, prod_job_id, frozenset({"SUCCEEDED"})),
        CONTAINER_STAGE_TIMEOUT_SECONDS,
    )
    evidence.record(
        "team-a's prod job ran in its container (runtime setup, run) and SUCCEEDED; SkyPilot tears its cluster down",
        f"managed job {prod_job_id}: {prod['status']}, {_ran(prod)}",
    )

    def admitted_relaunch() -> tuple[dict[str, Any], dict[str, Any]] | None:
        for pod in world.pods("team-b"):
            workload = workload_of(world, "team-b", pod)
            if workload is None or workload["metadata"]["uid"] == first_dev_uid:
                continue
            statuses = (pod.get("status") or {}).get("containerStatuses") or []
            if _conditions(workload).get("Admitted", ("False",))[0] == "True" and any(
                "running" in (s.get("state") or {}) for s in statuses
            ):
                return pod, workload
        return None

    pod, workload = _wait(
        "team-b's relaunch to be admitted and its container to run", admitted_relaunch, CONTAINER_STAGE_TIMEOUT_SECONDS
    )
    status = pod.get("status") or {}
    container = (status.get("containerStatuses") or [{}])[0]
    evidence.record(
        "team-a's quota freed: Kueue admits team-b's relaunch; its container runs",
        f"pod {pod['metadata']['name']} podIP {status.get('podIP')} image {container.get('image')} "
        f"({container.get('imageID')}) started {container.get('state', {}).get('running', {}).get('startedAt')}; "
        f"Workload {workload['metadata']['name']} effective priority {_effective_priority(workload)}",
    )

    running = _wait(
        "SkyPilot's runtime setup in the relaunched pod and the job RUNNING again",
        _job_reached(home, dev_job_id, frozenset({"RUNNING", "SUCCEEDED"})),
        CONTAINER_STAGE_TIMEOUT_SECONDS,
    )
    inside = _exec(
        world,
        "team-b",
        pod["metadata"]["name"],
        "ls /tmp/apt_ssh_setup_complete /tmp/ray_skypilot_installation_complete /tmp/env_setup_complete; "
        "echo wheel $(cat ~/.sky/wheels/current_sky_wheel_hash); ~/skypilot-runtime/bin/ray --version",
    )
    evidence.record(
        "SkyPilot's runtime setup completed in the relaunched pod (Ray and skylet up, the job RUNNING)",
        f"managed job {dev_job_id}: {running['status']} (SkyPilot's recovery count {running['recovery_count']}); "
        f"in the container: {inside}",
    )

    done = _wait(
        "the relaunched dev job's run to end and SkyPilot to mark it SUCCEEDED",
        _job_reached(home, dev_job_id, frozenset({"SUCCEEDED"})),
        CONTAINER_STAGE_TIMEOUT_SECONDS,
    )
    queue = sky(env, "jobs", "queue")
    row = next((line.strip() for line in queue.stdout.splitlines() if re.match(rf"\s*{dev_job_id}\s", line)), "")
    if "SUCCEEDED" not in row:
        raise StageFailed(f"sky jobs queue does not show job {dev_job_id} SUCCEEDED: {queue.stdout[-800:]}")
    logs = sky(env, "jobs", "logs", "--no-follow", str(dev_job_id))
    ran = [
        ANSI_ESCAPE.sub("", line).strip()
        for line in logs.stdout.splitlines()
        if "cpus:" in line or "dev job done" in line
    ]
    if not ran:
        raise StageFailed(f"the dev job's run output is not in sky jobs logs: {logs.stdout[-800:]}")
    evidence.record(
        "the relaunched dev job ran its run: command and is SUCCEEDED in sky jobs queue",
        f"queue: {' '.join(row.split())}; {_ran(done)}; run output: {ran}",
    )

    def completion_recorded() -> dict[str, Any] | None:
        job = _controller_job(state, dev_job_id)
        return job if job is not None and job.get("phase") == "finished" and job.get("preemptions") else None

    recorded = _wait("the controller to record the dev job's completion", completion_recorded)
    evidence.record(
        "the sky-kueue controller recorded the completion in the job's history (phase finished)",
        json.dumps(recorded, sort_keys=True)[:500],
    )


def _ran(job: dict[str, Any]) -> str:
    """How long SkyPilot says the job's last attempt ran (its ``start_at`` to ``end_at``)."""
    if job.get("start_at") and job.get("end_at"):
        return f"ran {float(job['end_at']) - float(job['start_at']):.0f} s"
    return "run time not recorded"


def _controller_jobs(state: pathlib.Path) -> list[dict[str, Any]]:
    """The jobs ``sky-kueue controller status`` shows for ``state`` (none while it cannot answer)."""
    result = subprocess.run(
        [str(BIN / "sky-kueue"), "controller", "status", "--state", str(state), "--output", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if result.returncode != 0 or not result.stdout.strip():
        return []
    jobs: list[dict[str, Any]] = json.loads(result.stdout).get("jobs") or []
    return jobs


def _controller_job(state: pathlib.Path, managed_job_id: int) -> dict[str, Any] | None:
    return next((j for j in _controller_jobs(state) if str(j.get("managed_job_id")) == str(managed_job_id)), None)


def _stop_on_sigterm(signum: int, frame: object) -> None:
    # ``timeout`` (as CI uses it) sends SIGTERM; turn it into an exception so that the
    # ``finally`` blocks stop SkyPilot's API server, the controller and the sandbox.
    raise StageFailed(f"stopped by signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    unknown = [a for a in args if a not in ("--containers", "--real", "--lane")]
    if unknown or len(args) > 1:
        print(
            f"e2e: bad argument(s) {' '.join(args)} (usage: skypilot_loop [--containers | --real | --lane])",
            file=sys.stderr,
        )
        return 2
    options = LoopOptions(containers="--containers" in args, real="--real" in args, lane="--lane" in args)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    if shutil.which("socat") is None or shutil.which("nc") is None:
        print("e2e: socat and nc are needed (bash scripts/host-tools.sh installs them)", file=sys.stderr)
        return 2
    if options.runs_containers and os.geteuid() != 0:
        print(f"e2e: {args[0]} runs pods' containers and needs root", file=sys.stderr)
        return 2
    evidence = Evidence()
    started = time.monotonic()
    print(policy_banner(), flush=True)
    if options.lane:
        print(
            f"e2e: --lane: {LANE_TEAM}'s relaunch lane after {LANE_SPEC['after_preemptions']} preemption(s), "
            f"aging.strategy {LANE_STRATEGY} with the server plugin",
            flush=True,
        )
    # the real cluster's state directory: under /tmp (not $TMPDIR) keeps its paths short
    with tempfile.TemporaryDirectory(prefix="sky-kueue-e2e-", dir="/tmp" if options.real else None) as tmp:
        try:
            run(pathlib.Path(tmp), evidence, options)
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
