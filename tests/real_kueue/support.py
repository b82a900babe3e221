"""Helpers for the real-Kueue tier: apply objects, wait on Kueue's decisions, reset between tests.

Waiting polls the real API server (the cluster's clock is the wall clock; Kueue, the
scheduler and KWOK act on their own), always with a deadline, and a timeout names what was
awaited and what was last seen.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sky_kueue.controller.aging import AgingSettings
from sky_kueue.controller.events import Observer
from sky_kueue.controller.hold import HoldTeams
from sky_kueue.controller.leader import LeaseSettings
from sky_kueue.controller.manager import Controller, ControllerSettings
from sky_kueue.controller.runtime_state import RuntimeState
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from sky_kueue.realcluster.cluster import RealCluster

T = TypeVar("T")

#: The repository root (for configs/ and the CLI's working directory).
REPO = Path(__file__).resolve().parents[2]

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
#: Namespaces the tests create pods in (the seed setup's teams).
TEAM_NAMESPACES = ("team-a", "team-b")
#: How long a test waits for Kueue, the scheduler or KWOK to act (they act within seconds).
ACT_SECONDS = 60.0
POLL_SECONDS = 0.2
#: Seconds between two admissions whose order Kueue must see: of equal-priority candidates it
#: preempts the most recently admitted first, by a time with one-second steps, and breaks a tie
#: by UID (``pkg/scheduler/preemption/common/ordering.go``), which is random.
ADMISSION_GAP_SECONDS = 1.5


def run_cli(env: dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``sky-kueue ARGS`` in its own process (the repository as working directory)."""
    return subprocess.run(
        [sys.executable, "-m", "sky_kueue.cli.main", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def conditions(obj: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """A Workload's (or pod's) conditions by type."""
    if not obj:
        return {}
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def condition_true(obj: dict[str, Any] | None, kind: str) -> bool:
    return conditions(obj).get(kind, {}).get("status") == "True"


class KueueCluster:
    """The real cluster as the tests use it (admin credentials)."""

    def __init__(self, cluster: RealCluster) -> None:
        from kubernetes import client

        self.cluster = cluster
        self.api = cluster.api_client()
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self._dynamic: Any = None

    @property
    def kubeconfig(self) -> str:
        return str(self.cluster.kubeconfig)

    def dynamic(self) -> Any:
        from kubernetes import dynamic

        if self._dynamic is None:
            self._dynamic = dynamic.DynamicClient(self.api)
        return self._dynamic

    def apply(self, docs: Iterable[dict[str, Any]]) -> None:
        """Server-side apply each document (create or update), as ``kubectl apply --server-side``."""
        client = self.dynamic()
        for doc in docs:
            resource = client.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
            namespace = doc["metadata"].get("namespace")
            resource.server_side_apply(
                body=doc,
                name=doc["metadata"]["name"],
                namespace=namespace,
                field_manager="sky-kueue-tests",
                force_conflicts=True,
            )

    # ----------------------------------------------------------------- reads
    def workload(self, namespace: str, name: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            found: dict[str, Any] = self.custom.get_namespaced_custom_object(
                KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads", name
            )
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        return found

    def workloads(self, namespace: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.custom.list_namespaced_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads"
        )["items"]
        return items

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            pod = self.core.read_namespaced_pod(name, namespace)
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        found: dict[str, Any] = self.api.sanitize_for_serialization(pod)
        return found

    def wait(self, what: str, probe: Callable[[], T | None], timeout: float = ACT_SECONDS) -> T:
        deadline = time.monotonic() + timeout
        last: T | None = None
        while time.monotonic() < deadline:
            last = probe()
            if last is not None and last is not False:
                return last
            time.sleep(POLL_SECONDS)
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")

    def wait_workload(
        self, namespace: str, name: str, test: Callable[[dict[str, Any]], bool], what: str, timeout: float = ACT_SECONDS
    ) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            found = self.workload(namespace, name)
            return found if found is not None and test(found) else None

        return self.wait(f"Workload {namespace}/{name}: {what}", probe, timeout)

    # ----------------------------------------------------------------- writes
    def create_pod(self, pod: dict[str, Any]) -> None:
        self.core.create_namespaced_pod(pod["metadata"]["namespace"], pod)

    def succeed_pod(self, namespace: str, name: str) -> None:
        """End a running pod's containers with exit 0, as a kubelet reports a finished job."""
        import datetime

        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        pod = self.core.read_namespaced_pod(name, namespace)
        statuses = [
            {
                "name": c.name,
                "image": c.image,
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": now}},
            }
            for c in pod.spec.containers
        ]
        body = {
            "status": {
                "phase": "Succeeded",
                "containerStatuses": statuses,
                "conditions": [
                    {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}
                ],
            }
        }
        self.core.patch_namespaced_pod_status(name, namespace, body)

    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=grace_seconds)
        except ApiException as err:
            if err.status != 404:
                raise

    # ----------------------------------------------------------------- reset
    def reset(self) -> None:
        """Remove every pod of the team namespaces and every Kueue object, waiting until gone.

        Finalizers are stripped first (Kueue's on pods and Workloads), so nothing waits on a
        grace period or on Kueue's controllers.
        """
        from kubernetes.client.exceptions import ApiException

        strip = {"metadata": {"finalizers": None}}
        for namespace in TEAM_NAMESPACES:
            for pod in self.core.list_namespaced_pod(namespace).items:
                try:
                    self.core.patch_namespaced_pod(pod.metadata.name, namespace, strip)
                    self.core.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)
                except ApiException as err:
                    if err.status != 404:
                        raise
            for workload in self.workloads(namespace) if self._has_namespace(namespace) else []:
                name = workload["metadata"]["name"]
                try:
                    self.custom.patch_namespaced_custom_object(
                        KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads", name, strip
                    )
                    self.custom.delete_namespaced_custom_object(
                        KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads", name
                    )
                except ApiException as err:
                    if err.status != 404:
                        raise
        for namespace in TEAM_NAMESPACES:
            if not self._has_namespace(namespace):
                continue
            for lq in self.custom.list_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION, namespace, "localqueues")[
                "items"
            ]:
                self._delete_custom(lq["metadata"]["name"], "localqueues", namespace)
        for plural in ("clusterqueues", "cohorts", "resourceflavors", "workloadpriorityclasses"):
            for obj in self.custom.list_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, plural)["items"]:
                self._delete_custom(obj["metadata"]["name"], plural, None)
        self.wait("every Kueue object and team pod gone", self._empty, timeout=ACT_SECONDS)

    def _has_namespace(self, namespace: str) -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            self.core.read_namespace(namespace)
        except ApiException as err:
            if err.status == 404:
                return False
            raise
        return True

    def _delete_custom(self, name: str, plural: str, namespace: str | None) -> None:
        from kubernetes.client.exceptions import ApiException

        strip = {"metadata": {"finalizers": None}}
        try:
            if namespace is None:
                self.custom.patch_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, plural, name, strip)
                self.custom.delete_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, plural, name)
            else:
                self.custom.patch_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION, namespace, plural, name, strip)
                self.custom.delete_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION, namespace, plural, name)
        except ApiException as err:
            if err.status != 404:
                raise

    def _empty(self) -> bool:
        for namespace in TEAM_NAMESPACES:
            if self._has_namespace(namespace) and (
                self.core.list_namespaced_pod(namespace).items or self.workloads(namespace)
            ):
                return False
        return not any(
            self.custom.list_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, plural)["items"]
            for plural in ("clusterqueues", "cohorts", "resourceflavors", "workloadpriorityclasses")
        )


@contextmanager
def running_controller(
    cluster: RealCluster,
    state: Path,
    aging: AgingSettings,
    *,
    identity: str,
    holds: HoldTeams | None = None,
    observers: Sequence[Observer] = (),
) -> Iterator[tuple[Controller, SqliteHistoryStore]]:
    """sky-kueue's controller on the real cluster (admin credentials, SQLite state in
    ``state``, the wall clock, a 1-s election retry), stopped and closed afterwards."""
    store = SqliteHistoryStore(state)
    runtime = RuntimeState(state)
    settings = ControllerSettings(
        lease=LeaseSettings(namespace="default", identity=identity, retry_period_seconds=1.0),
        priority_boost_gate=False,
    )
    controller = Controller(
        cluster.api_client(),
        store,
        aging,
        settings,
        runtime=runtime,
        clock=time.time,
        holds=holds,
        observers=list(observers),
    )
    controller.start()
    try:
        yield controller, store
    finally:
        controller.stop()
        store.close()
        runtime.close()
