"""The container runtime of the sandbox's kubelet: each pod's containers as real processes in
namespaces of their own, on a copy-on-write view of their image, reported as a kubelet does.

Why: SkyPilot's runtime setup (``sky/provision/kubernetes/instance.py`` and the pod's
container command) installs packages, starts sshd and edits ``/etc`` with sudo; run on the host
that would change the machine, and two pods would fight over port 22. Here every pod gets:

* a network namespace with its own address on the sandbox's bridge (:mod:`.network`);
* per container: mount, PID, UTS (hostname = pod name) and IPC namespaces (util-linux
  ``unshare --fork --kill-child``, run inside the pod's netns by ``ip netns exec``), an
  overlayfs root (lower = the image, upper/work per container; a copy if overlay fails) with
  ``/proc``, ``/sys``, a small ``/dev`` with a private ``devpts``, and ``/dev/shm``. Every
  mount is made inside the container's own mount namespace, so it vanishes with the
  container's last process: nothing is mounted on the host's side.

A pod starts when the Kueue emulation binds it (``binding.PodStarter``): the runtime reports
``ContainerCreating`` while its images are built (minutes for the first base build; a worker
thread per pod does it, never an API request), ``InvalidImageName`` for a reference that does
not parse (:mod:`.image_reference`), ``ErrImagePull``/``ImagePullBackOff`` for an image no
recipe maps to, then ``Running`` with ``podIP``; exits become ``terminated`` with
exit codes, restarts follow ``restartPolicy`` with the kubelet's doubling back-off, and the
phase becomes ``Succeeded``/``Failed`` as ``getPhase`` in
``kubernetes/pkg/kubelet/kubelet_pods.go`` decides. Resource requests are reported, not
enforced (no cgroups).

Deleting a pod sends SIGTERM to each container's PID 1, SIGKILL after the grace period
(``terminationGracePeriodSeconds``, default 30 as Kubernetes'), then removes the network
namespace and the pod's directories.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sky_kueue.sandbox.apiserver import errors
from sky_kueue.sandbox.apiserver.clock import Clock, format_timestamp
from sky_kueue.sandbox.apiserver.events import EventType, StoreEvent
from sky_kueue.sandbox.apiserver.store import ObjectStore
from sky_kueue.sandbox.containers import empty_dirs, image_reference
from sky_kueue.sandbox.containers import images as images_module
from sky_kueue.sandbox.containers.images import Image, ImageError, ImageStore
from sky_kueue.sandbox.containers.network import NetworkError, PodAddress, PodNetwork
from sky_kueue.sandbox.kueue_emulation.binding import host_ip_of
from sky_kueue.sandbox.workloads.expansion import expand_all

LOG = logging.getLogger(__name__)

Obj = dict[str, Any]
#: Files a hook adds to every container: container path -> contents (e.g. service account
#: tokens). Called with the pod and the container's spec.
ExtraFiles = Callable[[Mapping[str, Any], Mapping[str, Any]], Mapping[str, bytes]]

#: Kubernetes' default ``terminationGracePeriodSeconds``.
DEFAULT_GRACE_SECONDS = 30.0
#: Grace given to containers when the whole sandbox stops.
SHUTDOWN_GRACE_SECONDS = 2.0
#: The kubelet's crash-loop back-off: first delay, doubling, capped (``pkg/kubelet/kubelet.go``
#: ``backOffPeriod``/``MaxContainerBackOff``).
RESTART_BACKOFF_BASE_SECONDS = 10.0
RESTART_BACKOFF_MAX_SECONDS = 300.0
#: A container that ran this long before exiting restarts without back-off.
RESTART_BACKOFF_RESET_SECONDS = 600.0
#: A pod whose image is unknown or failed to build looks again after this, doubling with each
#: failure up to the cap (``ImagePullBackOff``); the first retry comes soon so that
#: ``ErrImagePull`` turns into ``ImagePullBackOff`` as with a kubelet.
IMAGE_RETRY_SECONDS = 0.5
IMAGE_RETRY_MAX_SECONDS = 300.0
#: How long a new container may take to reach its root filesystem.
CONTAINER_SETUP_TIMEOUT_SECONDS = 30.0
SETUP_POLL_SECONDS = 0.01
#: The command of a container that names none, in an image that sets none.
DEFAULT_COMMAND = ("sleep", "infinity")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CONTAINER_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
APT_PROXY_FILE = "/etc/apt/apt.conf.d/80sky-kueue-proxy"

#: Runs as the container's PID 1 in its fresh namespaces until it execs the command.
#: $1 chroot binary, $2 overlay|copy, $3 lower, $4 upper, $5 work, $6 root, $7 hostname,
#: $8 working directory, $9 the container's PATH, $10 volume mounts (lines of
#: ``bind|tmpfs<TAB>source<TAB>target``), $11 ``uid:gid`` to run as (empty: root); then the command.
CONTAINER_INIT = r"""
set -eu
chroot_bin=$1 mode=$2 lower=$3 upper=$4 work=$5 root=$6 host=$7 wd=$8 cpath=$9 mounts=${10} user=${11}
shift 11
PATH=/usr/sbin:/usr/bin:/sbin:/bin
if [ "$mode" = overlay ]; then
  mount -t overlay overlay -o "lowerdir=$lower,upperdir=$upper,workdir=$work" "$root"
fi
hostname "$host"
mkdir -p "$root/proc" "$root/sys" "$root/dev" "$root/tmp"
mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$root/sys"
mount -t tmpfs -o nosuid,mode=755,size=65536k tmpfs "$root/dev"
for node in null zero full random urandom tty; do
  : > "$root/dev/$node"
  mount --bind "/dev/$node" "$root/dev/$node"
done
mkdir -p "$root/dev/pts" "$root/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$root/dev/pts"
ln -s pts/ptmx "$root/dev/ptmx"
mount -t tmpfs -o nosuid,nodev,mode=1777 shm "$root/dev/shm"
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"
ln -s /proc/self/fd/1 "$root/dev/stdout"
ln -s /proc/self/fd/2 "$root/dev/stderr"
chmod 1777 "$root/tmp"
tab=$(printf '\t')
if [ -n "$mounts" ]; then
  printf '%s\n' "$mounts" | while IFS="$tab" read -r kind source target; do
    mkdir -p "$root$target"
    if [ "$kind" = tmpfs ]; then
      mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$root$target"
    else
      mount --bind "$source" "$root$target"
    fi
  done
fi
export PATH="$cpath"
exec "$chroot_bin" ${user:+--userspec="$user"} "$root" \
  /bin/sh -c 'cd "$1" 2>/dev/null || cd /; shift; exec "$@"' sh "$wd" "$@"
"""


class RuntimeError_(RuntimeError):
    """A container could not be started."""


def now_stamp(clock: Clock) -> str:
    return format_timestamp(clock.now())


@dataclass
class ContainerState:
    """One container's runtime record (what ``containerStatuses`` reports)."""

    name: str
    image_ref: str
    image: Image | None = None
    process: subprocess.Popen[bytes] | None = None
    init_pid: int | None = None
    started_at: str | None = None
    restart_count: int = 0
    waiting_reason: str | None = "ContainerCreating"
    waiting_message: str | None = None
    terminated: Obj | None = None
    last_terminated: Obj | None = None
    started_monotonic: float = 0.0

    def status(self) -> Obj:
        state: Obj
        if self.process is not None and self.terminated is None and self.started_at is not None:
            state = {"running": {"startedAt": self.started_at}}
        elif self.terminated is not None and self.waiting_reason is None:
            state = {"terminated": dict(self.terminated)}
        else:
            waiting: Obj = {"reason": self.waiting_reason or "ContainerCreating"}
            if self.waiting_message:
                waiting["message"] = self.waiting_message
            state = {"waiting": waiting}
        running = "running" in state
        last = self.terminated if "waiting" in state and self.terminated else self.last_terminated
        result: Obj = {
            "name": self.name,
            "image": self.image_ref,
            "imageID": self.image.image_id if self.image else "",
            "ready": running,
            "started": running,
            "restartCount": self.restart_count,
            "state": state,
            "lastState": {"terminated": dict(last)} if last else {},
        }
        if self.image is not None:
            result["containerID"] = f"sky-kueue://{self.name}-{self.restart_count}"
        return result


@dataclass
class PodRecord:
    """One pod the runtime owns."""

    namespace: str
    name: str
    uid: str
    spec: Obj
    host_ip: str | None
    directory: pathlib.Path
    containers: dict[str, ContainerState] = field(default_factory=dict)
    address: PodAddress | None = None
    stopping: threading.Event = field(default_factory=threading.Event)
    changed: threading.Condition = field(default_factory=threading.Condition)
    thread: threading.Thread | None = None
    env_cache: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def restart_policy(self) -> str:
        return str(self.spec.get("restartPolicy") or "Always")


class PodRuntime:
    """Runs the sandbox's pods as containers.

    Args:
        store: the API server's store (status is written through its status subresource).
        root: the sandbox's directory for pods (``<root>/<namespace>/<pod>/<uid>/<container>/``:
            by uid, as a pod re-created under its name runs while the old one still stops).
        images: where images come from.
        network: the pod network (started by the caller).
        clock: for the timestamps in status.
        environment: the kubelet's environment of a container (``LocalKubelet.environment``
            semantics: the container's ``env``, fieldRefs resolved), called with pod and container.
        api_address: ``(host, port)`` containers reach the API server at.
        proxy_url: the registry proxy containers use for http(s).
    """

    def __init__(
        self,
        store: ObjectStore,
        root: pathlib.Path,
        images: ImageStore,
        network: PodNetwork,
        clock: Clock,
        environment: Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, str]],
        *,
        api_address: tuple[str, int] | None = None,
        proxy_url: str | None = None,
        restart_backoff_base_seconds: float = RESTART_BACKOFF_BASE_SECONDS,
    ) -> None:
        self.store = store
        self.root = root
        self.images = images
        self.network = network
        self.clock = clock
        self.environment = environment
        self.api_address = api_address
        self.proxy_url = proxy_url
        self.restart_backoff_base_seconds = restart_backoff_base_seconds
        #: Hooks that add files to every container (see :data:`ExtraFiles`).
        self.extra_files: list[ExtraFiles] = []
        self._lock = threading.Lock()
        self._pods: dict[tuple[str, str], PodRecord] = {}
        #: Pods whose deletion is waiting out their grace period (their own, up to minutes):
        #: shutdown cuts that wait short, or the sandbox's exit would leave them running.
        self._stopping: dict[tuple[str, str], PodRecord] = {}
        self._closed = False
        self._chroot = shutil.which("chroot") or "/usr/sbin/chroot"
        self._unhook = store.add_commit_hook(self._on_pod_event, "pods")

    # --- the kubelet's side ------------------------------------------------------------------

    def start_pod(self, pod: Mapping[str, Any], node: Mapping[str, Any] | None) -> None:
        """Take over a pod the scheduler bound (idempotent: a pod already owned is left alone)."""
        meta = pod.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        host_ip = host_ip_of(node)
        with self._lock:
            if self._closed or key in self._pods:
                return
            record = PodRecord(
                namespace=key[0],
                name=key[1],
                uid=str(meta.get("uid", "")),
                spec=dict(pod.get("spec") or {}),
                host_ip=host_ip,
                directory=self.root / key[0] / key[1] / (str(meta.get("uid", "")) or "no-uid"),
            )
            for container in record.spec.get("containers") or []:
                name = str(container.get("name", ""))
                record.containers[name] = ContainerState(name, str(container.get("image", "")))
            self._pods[key] = record
        self._write_status(record)
        record.thread = threading.Thread(target=self._run_pod, args=(record,), name=f"pod-{key[1]}", daemon=True)
        record.thread.start()

    def pod(self, namespace: str, name: str) -> PodRecord | None:
        with self._lock:
            return self._pods.get((namespace, name))

    def exec_argv(self, namespace: str, name: str, container: str, argv: list[str]) -> tuple[list[str], dict[str, str]]:
        """The host command that runs ``argv`` inside a running container, and its environment.

        Raises:
            ApiError: 400 if the container is not running.
        """
        record = self.pod(namespace, name)
        state = record.containers.get(container) if record else None
        if record is None or state is None or state.init_pid is None or state.terminated is not None:
            raise errors.ApiError(400, errors.Reason.BAD_REQUEST, f"container {container} in pod {name} is not running")
        user = _userspec(record.spec, _container_spec(record.spec, container))
        as_user = [f"--setuid={user.split(':')[0]}", f"--setgid={user.split(':')[1]}"] if user else []
        nsenter = [
            "nsenter",
            f"--target={state.init_pid}",
            *as_user,
            "--mount",
            "--uts",
            "--ipc",
            "--net",
            "--pid",
            "--root",
            "--wd",  # the container's own working directory (a path here would be the host's)
            "--",
            *argv,
        ]
        return nsenter, record.env_cache.get(container, {})

    def log_path(self, namespace: str, name: str, container: str) -> pathlib.Path:
        """Where the current pod of that name logs the container's output."""
        record = self.pod(namespace, name)
        directory = record.directory if record else self.root / namespace / name / "gone"
        return directory / f"{container}.log"

    def container_names(self, namespace: str, name: str) -> list[str]:
        record = self.pod(namespace, name)
        return list(record.containers) if record else []

    def is_terminated(self, namespace: str, name: str, container: str) -> bool:
        record = self.pod(namespace, name)
        if record is None or record.stopping.is_set():
            return True
        state = record.containers.get(container)
        return state is None or (state.terminated is not None and state.waiting_reason is None)

    def pod_ip(self, namespace: str, name: str) -> str | None:
        record = self.pod(namespace, name)
        return record.address.address if record and record.address else None

    def netns(self, namespace: str, name: str) -> str | None:
        record = self.pod(namespace, name)
        return record.address.netns if record and record.address else None

    def stop_pod(self, namespace: str, name: str, grace_seconds: float | None = None) -> None:
        """Terminate the pod's containers (SIGTERM, grace, SIGKILL) and remove its network and files."""
        with self._lock:
            record = self._pods.pop((namespace, name), None)
            if record is not None:
                self._stopping[(namespace, name)] = record
        if record is None:
            return
        try:
            self._stop(record, grace_seconds)
        finally:
            with self._lock:
                self._stopping.pop((namespace, name), None)

    def _stop(self, record: PodRecord, grace_seconds: float | None) -> None:
        record.stopping.set()
        with record.changed:
            record.changed.notify_all()
        grace = grace_seconds if grace_seconds is not None else _grace_seconds(record.spec)
        self._terminate(record, grace)
        if record.thread is not None and record.thread is not threading.current_thread():
            record.thread.join(CONTAINER_SETUP_TIMEOUT_SECONDS)
        self._terminate(record, 0)  # anything the worker started while we waited
        if record.address is not None:
            with contextlib.suppress(NetworkError):
                self.network.remove_pod(record.address)
        with contextlib.suppress(ImageError, OSError):
            images_module.remove_tree(record.directory)

    def shutdown(self, grace_seconds: float = SHUTDOWN_GRACE_SECONDS) -> None:
        """Stop every pod (in parallel) and stop following deletions."""
        self._unhook()
        with self._lock:
            self._closed = True
            keys = list(self._pods)
            stopping = list(self._stopping.values())
        stoppers = [
            threading.Thread(target=self.stop_pod, args=(ns, name, grace_seconds), daemon=True) for ns, name in keys
        ]
        # A deletion already under way waits out the pod's own grace period in a daemon thread
        # that dies with the sandbox: its containers get the shutdown's grace, then SIGKILL.
        stoppers += [
            threading.Thread(target=self._terminate, args=(record, grace_seconds), daemon=True) for record in stopping
        ]
        for stopper in stoppers:
            stopper.start()
        for stopper in stoppers:
            stopper.join()

    # --- internals ---------------------------------------------------------------------------

    def _on_pod_event(self, event: StoreEvent) -> None:
        meta = event.obj.get("metadata") or {}
        # Deleted, or deleting while a finalizer holds the object: the kubelet stops it now.
        if event.type is not EventType.DELETED and not meta.get("deletionTimestamp"):
            return
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        with self._lock:
            record = self._pods.get(key)
        if record is None or record.uid != str(meta.get("uid", "")):
            return
        # Under the store lock: hand off (termination waits out the grace period).
        threading.Thread(target=self.stop_pod, args=key, daemon=True).start()

    def _run_pod(self, record: PodRecord) -> None:
        try:
            if not self._pull_images(record):
                return
            record.address = self.network.add_pod(record.namespace, record.name, record.uid, record.name)
            if record.stopping.is_set():
                return
            for state in record.containers.values():
                if not self._start_with_config(record, state):
                    return
            self._write_status(record)
            self._supervise(record)
        except (NetworkError, ImageError, OSError, RuntimeError_, subprocess.SubprocessError) as exc:
            LOG.warning("pod %s/%s: %s", record.namespace, record.name, exc)
            for state in record.containers.values():
                if state.process is None and state.terminated is None:
                    state.waiting_reason, state.waiting_message = "CreateContainerError", str(exc).splitlines()[0]
            self._write_status(record)

    def _start_with_config(self, record: PodRecord, state: ContainerState) -> bool:
        """Start the container, retrying while what its files come from is missing (a volume's
        ConfigMap or Secret not created yet: ``CreateContainerConfigError``, as a kubelet
        retries); False if the pod was stopped meanwhile."""
        failures = 0
        while not record.stopping.is_set():
            try:
                self._start_container(record, state)
                return True
            except LookupError as exc:
                failures += 1
                state.waiting_reason, state.waiting_message = "CreateContainerConfigError", str(exc)
                self._write_status(record)
                with record.changed:
                    record.changed.wait(min(IMAGE_RETRY_MAX_SECONDS, IMAGE_RETRY_SECONDS * 2 ** (failures - 1)))
        return False

    def _pull_images(self, record: PodRecord) -> bool:
        """Build (or find) every container's image; False if the pod was stopped meanwhile."""
        pending = list(record.containers.values())
        failures = 0
        while pending and not record.stopping.is_set():
            still: list[ContainerState] = []
            for state in pending:
                invalid = image_reference.invalid_reason(state.image_ref)
                if invalid is not None:  # a kubelet never pulls it, and says so each sync
                    state.waiting_reason, state.waiting_message = "InvalidImageName", invalid
                    still.append(state)
                    continue
                try:
                    state.image = self.images.ensure(state.image_ref)
                    state.waiting_reason, state.waiting_message = "ContainerCreating", None
                except ImageError as exc:  # unknown image, or its build failed (e.g. no archive)
                    reason = str(exc).splitlines()[0]
                    if failures == 0:
                        state.waiting_reason, state.waiting_message = "ErrImagePull", reason
                    else:  # the pull error stays in the message, as kubelets >= 1.32 keep it
                        state.waiting_reason = "ImagePullBackOff"
                        state.waiting_message = f'Back-off pulling image "{state.image_ref}": ErrImagePull: {reason}'
                    still.append(state)
            pending = still
            self._write_status(record)
            if pending:
                failures += 1
                with record.changed:
                    record.changed.wait(min(IMAGE_RETRY_MAX_SECONDS, IMAGE_RETRY_SECONDS * 2 ** (failures - 1)))
        return not record.stopping.is_set()

    def _start_container(self, record: PodRecord, state: ContainerState) -> None:
        assert state.image is not None and record.address is not None
        spec = _container_spec(record.spec, state.name)
        base = record.directory / state.name
        lower = state.image.rootfs
        upper, work, rootfs = base / "upper", base / "work", base / "rootfs"
        for directory in (upper, work, rootfs):
            directory.mkdir(parents=True, exist_ok=True)
        mode = "overlay" if _overlay_supported(record.directory) else "copy"
        target = upper if mode == "overlay" else rootfs
        if mode == "copy" and not (rootfs / "bin").exists():
            subprocess.run(["cp", "-a", "--reflink=auto", f"{lower}/.", str(rootfs)], check=True)
        env = self._container_env(record, spec, state.image)
        record.env_cache[state.name] = env
        pod = self.store.try_get("pods", record.name, record.namespace) or {"metadata": {}, "spec": record.spec}
        mounts = empty_dirs.plan(pod, spec, record.directory)
        for note in mounts.notes:
            LOG.warning("pod %s/%s container %s: %s", record.namespace, record.name, state.name, note)
        self._write_files(target, self._files(record, spec))
        # $(VAR) references in command and args, from the container's environment (the kubelet's).
        command = expand_all(container_command(spec, state.image), env)
        workdir = str(spec.get("workingDir") or state.image.recipe.workdir)
        argv = [
            "ip",
            "netns",
            "exec",
            record.address.netns,
            "unshare",
            "--mount",
            "--pid",
            "--uts",
            "--ipc",
            "--fork",
            "--kill-child",
            "--propagation",
            "private",
            "--",
            "/bin/sh",
            "-c",
            CONTAINER_INIT,
            "sh",
            self._chroot,
            mode,
            str(lower),
            str(upper),
            str(work),
            str(rootfs),
            record.name[:63],
            workdir,
            env.get("PATH", DEFAULT_PATH),
            "\n".join(m.spec_line() for m in mounts.mounts),
            _userspec(record.spec, spec),
            *command,
        ]
        log = open(record.directory / f"{state.name}.log", "ab")  # noqa: SIM115 - owned by the child
        try:
            process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True
            )
        finally:
            log.close()
        state.process = process
        state.terminated = None
        state.init_pid = _wait_for_root(process, rootfs)
        state.started_at = now_stamp(self.clock)
        state.started_monotonic = time.monotonic()
        state.waiting_reason = state.waiting_message = None

    def _supervise(self, record: PodRecord) -> None:
        """Wait for exits; restart per policy; report each change."""
        restart_at: dict[str, float] = {}
        while not record.stopping.is_set():
            changed = False
            for state in record.containers.values():
                process = state.process
                if process is not None and state.terminated is None and process.poll() is not None:
                    changed = True
                    self._record_exit(record, state, process.returncode)
                    if self._should_restart(record, state):
                        ran = time.monotonic() - state.started_monotonic
                        delay = 0.0 if ran >= RESTART_BACKOFF_RESET_SECONDS else self._backoff(state)
                        restart_at[state.name] = time.monotonic() + delay
                        state.waiting_reason = "CrashLoopBackOff" if delay > 0 else "ContainerCreating"
                        state.waiting_message = (
                            f"back-off {delay:.0f}s restarting failed container={state.name} "
                            f"pod={record.name}_{record.namespace}({record.uid})"
                        )
                due = restart_at.get(state.name)
                if due is not None and time.monotonic() >= due and not record.stopping.is_set():
                    del restart_at[state.name]
                    state.last_terminated = state.terminated
                    state.restart_count += 1
                    self._start_container(record, state)
                    changed = True
            if changed:
                self._write_status(record)
            if all(s.terminated is not None and s.name not in restart_at for s in record.containers.values()):
                return
            time.sleep(0.05)

    def _backoff(self, state: ContainerState) -> float:
        return float(
            min(RESTART_BACKOFF_MAX_SECONDS, self.restart_backoff_base_seconds * 2 ** max(0, state.restart_count))
        )

    def _should_restart(self, record: PodRecord, state: ContainerState) -> bool:
        policy = record.restart_policy
        code = int((state.terminated or {}).get("exitCode", 0))
        return policy == "Always" or (policy == "OnFailure" and code != 0)

    def _record_exit(self, record: PodRecord, state: ContainerState, returncode: int) -> None:
        code = returncode if returncode >= 0 else 128 - returncode
        state.terminated = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": state.started_at,
            "finishedAt": now_stamp(self.clock),
            "containerID": f"sky-kueue://{state.name}-{state.restart_count}",
        }
        if returncode < 0:
            state.terminated["signal"] = -returncode
        state.init_pid = None
        state.waiting_reason = state.waiting_message = None

    def _terminate(self, record: PodRecord, grace_seconds: float) -> None:
        running = [s for s in record.containers.values() if s.process is not None and s.process.poll() is None]
        for state in running:
            if state.init_pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(state.init_pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_seconds
        for state in running:
            assert state.process is not None
            with contextlib.suppress(subprocess.TimeoutExpired):
                state.process.wait(max(0.0, deadline - time.monotonic()))
        for state in running:
            assert state.process is not None
            if state.process.poll() is None:
                # unshare --kill-child takes PID 1 along, and a PID namespace dies with its init
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(state.process.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    state.process.wait(CONTAINER_SETUP_TIMEOUT_SECONDS)
        for state in running:
            assert state.process is not None
            if state.terminated is None and state.process.returncode is not None:
                self._record_exit(record, state, state.process.returncode)

    def _container_env(self, record: PodRecord, spec: Mapping[str, Any], image: Image) -> dict[str, str]:
        pod = self.store.try_get("pods", record.name, record.namespace) or {"metadata": {}, "spec": record.spec}
        status = pod.setdefault("status", {})
        if record.address is not None:
            status["podIP"] = record.address.address
        home = "/root" if not _userspec(record.spec, spec) else "/"  # Kubernetes' HOME for a user without passwd
        env: dict[str, str] = {"PATH": DEFAULT_PATH, "HOSTNAME": record.name[:63], "HOME": home}
        env.update(image.env)
        if self.api_address is not None:
            env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"] = (
                self.api_address[0],
                str(self.api_address[1]),
            )
            env["KUBERNETES_PORT"] = f"tcp://{self.api_address[0]}:{self.api_address[1]}"
        if self.proxy_url is not None:
            no_proxy = ",".join(
                filter(None, ["localhost", "127.0.0.1", self.network.gateway, str(self.network.subnet)])
            )
            for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
                env[name] = self.proxy_url
            env["no_proxy"] = env["NO_PROXY"] = no_proxy
        for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT"):
            env[name] = CONTAINER_CA_BUNDLE
        # The kubelet's env last: what the pod spec says wins, as in Kubernetes. Its inherited
        # host variables (PATH, LANG, ...) are host things, not the container's.
        from_spec = self.environment(pod, spec)
        declared = {str(item.get("name")) for item in spec.get("env") or []}
        env.update({k: v for k, v in from_spec.items() if k in declared})
        return env

    def _files(self, record: PodRecord, spec: Mapping[str, Any]) -> dict[str, bytes]:
        files: dict[str, bytes] = {}
        for source in (images_module.HOST_CA_BUNDLE, images_module.HOST_RESOLV_CONF):
            with contextlib.suppress(OSError):
                files[str(source)] = source.read_bytes()
        files["/etc/hostname"] = (record.name[:63] + "\n").encode()
        if record.address is not None:
            files["/etc/hosts"] = (
                f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
                f"{record.address.address}\t{record.name[:63]}\n"
            ).encode()
        if self.proxy_url is not None:
            files[APT_PROXY_FILE] = (
                f'Acquire::http::Proxy "{self.proxy_url}";\nAcquire::https::Proxy "{self.proxy_url}";\n'
            ).encode()
        pod = self.store.try_get("pods", record.name, record.namespace) or {"metadata": {}, "spec": record.spec}
        for hook in self.extra_files:
            files.update(hook(pod, spec))
        return files

    @staticmethod
    def _write_files(root: pathlib.Path, files: Mapping[str, bytes]) -> None:
        for path, contents in files.items():
            destination = root / path.lstrip("/")
            destination.parent.mkdir(parents=True, exist_ok=True)
            if destination.is_symlink():
                destination.unlink()
            destination.write_bytes(contents)

    def _write_status(self, record: PodRecord) -> None:
        if record.stopping.is_set():
            return
        statuses = [state.status() for state in record.containers.values()]
        for status in statuses:  # requests and limits are reported, not enforced (no cgroups)
            resources = _container_spec(record.spec, str(status["name"])).get("resources") or {}
            if resources:
                status["resources"] = dict(resources)
        phase = pod_phase(record.restart_policy, statuses)
        stamp = now_stamp(self.clock)
        ready = all(s["ready"] for s in statuses) and bool(statuses)
        address = record.address.address if record.address else None
        host_ip = record.host_ip

        def change(obj: Obj) -> None:
            status = obj.setdefault("status", {})
            status["phase"] = phase
            status.setdefault("startTime", stamp)
            status["containerStatuses"] = statuses
            status["qosClass"] = status.get("qosClass") or "BestEffort"
            if address is not None:
                status["podIP"], status["podIPs"] = address, [{"ip": address}]
            if host_ip is not None:
                status["hostIP"], status["hostIPs"] = host_ip, [{"ip": host_ip}]
            conditions = {c.get("type"): c for c in status.get("conditions") or []}
            wanted = {
                "PodScheduled": True,
                "Initialized": True,
                "ContainersReady": ready,
                "Ready": ready,
            }
            for kind, value in wanted.items():
                text = "True" if value else "False"
                existing = conditions.get(kind)
                if existing is None or existing.get("status") != text:
                    condition: Obj = {"type": kind, "status": text, "lastTransitionTime": stamp}
                    if not value:
                        condition["reason"] = (
                            "PodCompleted" if phase in ("Succeeded", "Failed") else "ContainersNotReady"
                        )
                    conditions[kind] = condition
            status["conditions"] = list(conditions.values())

        try:
            self.store.mutate("pods", record.name, change, record.namespace, subresource="status")
        except errors.ApiError as exc:
            LOG.debug("status of pod %s/%s not written: %s", record.namespace, record.name, exc)


def pod_phase(restart_policy: str, statuses: list[Obj]) -> str:
    """The pod phase from its container statuses (``getPhase`` in
    ``kubernetes/pkg/kubelet/kubelet_pods.go``: a container waiting to restart counts as stopped)."""
    running = waiting = stopped = succeeded = 0
    for status in statuses:
        state = status.get("state") or {}
        if "running" in state:
            running += 1
        elif "terminated" in state:
            stopped += 1
            succeeded += int(state["terminated"].get("exitCode", 1)) == 0
        elif (status.get("lastState") or {}).get("terminated"):
            stopped += 1
        else:
            waiting += 1
    if waiting or not statuses:
        return "Pending"
    if running:
        return "Running"
    if restart_policy == "Always":
        return "Running"
    if stopped == succeeded:
        return "Succeeded"
    if restart_policy == "Never":
        return "Failed"
    return "Running"


def container_command(spec: Mapping[str, Any], image: Image) -> list[str]:
    """What a container runs: ``command`` + ``args``; ``args`` alone replace the image's
    default (these images have no ENTRYPOINT); neither = the image's default command."""
    command = [str(a) for a in spec.get("command") or []]
    args = [str(a) for a in spec.get("args") or []]
    if command:
        return command + args
    if args:
        return args
    return list(image.command or DEFAULT_COMMAND)


def _container_spec(spec: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    for container in spec.get("containers") or []:
        if container.get("name") == name:
            return dict(container)
    return {}


def _userspec(pod_spec: Mapping[str, Any], container: Mapping[str, Any]) -> str:
    """``uid:gid`` from ``runAsUser``/``runAsGroup`` (the container's over the pod's), or ""."""
    merged = {**(pod_spec.get("securityContext") or {}), **(container.get("securityContext") or {})}
    user, group = merged.get("runAsUser"), merged.get("runAsGroup")
    if user is None or (int(user) == 0 and group is None):
        return ""
    return f"{int(user)}:{int(group or 0)}"


def _grace_seconds(spec: Mapping[str, Any]) -> float:
    value = spec.get("terminationGracePeriodSeconds")
    try:
        return float(value) if value is not None else DEFAULT_GRACE_SECONDS
    except (TypeError, ValueError):
        return DEFAULT_GRACE_SECONDS


_overlay_checked: dict[str, bool] = {}


def _overlay_supported(directory: pathlib.Path) -> bool:
    """True if overlayfs mounts work on ``directory``'s file system (tried once, in a private
    mount namespace so that the probe leaves nothing behind)."""
    directory.mkdir(parents=True, exist_ok=True)
    key = str(os.stat(directory).st_dev)
    if key not in _overlay_checked:
        probe = directory / ".overlay-probe"
        parts = [probe / p for p in ("lower", "upper", "work", "merged")]
        for part in parts:
            part.mkdir(parents=True, exist_ok=True)
        lower, upper, work, merged = parts
        done = subprocess.run(
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "mount",
                "-t",
                "overlay",
                "overlay",
                "-o",
                f"lowerdir={lower},upperdir={upper},workdir={work}",
                str(merged),
            ],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(probe, ignore_errors=True)
        _overlay_checked[key] = done.returncode == 0
        if done.returncode != 0:
            LOG.info("overlayfs unavailable under %s (%s): containers get copies", directory, done.stderr.strip())
    return _overlay_checked[key]


def _wait_for_root(process: subprocess.Popen[bytes], rootfs: pathlib.Path) -> int:
    """The host PID of the container's PID 1, once it has entered its root filesystem.

    Raises:
        RuntimeError_: the container's setup failed or took too long.
    """
    deadline = time.monotonic() + CONTAINER_SETUP_TIMEOUT_SECONDS
    wanted = str(rootfs.resolve())
    child: int | None = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            if child is not None:
                return child
            raise RuntimeError_(f"container setup exited with code {process.returncode} (see the container's log)")
        if child is None:
            child = _first_child(process.pid)
        if child is not None:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{child}/root") == wanted:
                    return child
        time.sleep(SETUP_POLL_SECONDS)
    raise RuntimeError_(f"container did not reach its root filesystem within {CONTAINER_SETUP_TIMEOUT_SECONDS} s")


def _first_child(pid: int) -> int | None:
    try:
        text = pathlib.Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return None
    children = text.split()
    return int(children[0]) if children else None
