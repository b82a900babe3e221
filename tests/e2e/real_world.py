"""The e2e loop's cluster on real Kubernetes, the real Kueue and a real node (``--real``).

What differs from the sandbox's world (``skypilot_loop.skypilot_world``), and why:

* the cluster is :class:`sky_kueue.realcluster.cluster.RealCluster` with no KWOK node and one
  real node (kubelet, containerd): every SkyPilot pod runs there, as on a user's cluster;
* SkyPilot's default image is built in the image store (cached) and imported into containerd
  before the node starts; its pods pull it (``imagePullPolicy: Always``) from the node's
  registry on 127.0.0.1;
* the machine has 2 CPUs, so the seed setup's CPU and memory quotas and the e2e tasks'
  requests are a tenth of the sandbox's (:data:`SCALE`): the same story (team-b's dev job
  borrows shared-cq's CPUs, team-a's prod job reclaims them) at sizes the node holds. The
  node advertises 4 ``nvidia.com/gpu`` (an extended resource the kubelet keeps once set on
  its Node's status; no device is behind it, as on the sandbox's nodes) and SkyPilot's
  accelerator label, so team-a's ``A100:2`` task lands on it;
* SkyPilot's network probe is pointed at the node's registry (plain HTTP on 127.0.0.1, which
  answers), since the API server's certificate is the cluster's own;
* Workloads are read from the API server, and every version of every Workload is recorded by
  a watch (a preempted one is replaced within seconds).
"""

from __future__ import annotations

import copy
import os
import pathlib
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

from sky_kueue.realcluster import build, versions
from sky_kueue.realcluster.cluster import CONTEXT as REAL_CONTEXT
from sky_kueue.realcluster.cluster import NodeSpec, RealCluster
from sky_kueue.realcluster.node import NODE_NAME
from sky_kueue.sandbox import seed
from sky_kueue.sandbox.skypilot_home import isolated_environment
from tests.e2e import skypilot_loop as loop

#: The kubeconfig context of the real cluster (the plugin config's ``kubernetes.contexts``).
CONTEXT = REAL_CONTEXT
#: The seed setup's CPU and memory quotas, and the e2e tasks' requests, times this.
SCALE = Decimal("0.1")
#: GPUs the real node advertises (team-a's quota is 2).
NODE_GPUS = 4
KUEUE_GROUP = "kueue.x-k8s.io"
#: Pause before a dropped Workload watch is started again.
WATCH_RETRY_SECONDS = 1.0


def scaled_seed_setup() -> list[dict[str, Any]]:
    """The seed setup with every CPU and memory quota times :data:`SCALE` (GPUs unchanged)."""
    from kubernetes.utils import parse_quantity

    docs = copy.deepcopy(seed.seed_setup())
    for doc in docs:
        if doc.get("kind") != "ClusterQueue":
            continue
        for group in doc["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                for res in flavor["resources"]:
                    if res["name"] not in ("cpu", "memory"):
                        continue
                    for key in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                        if key in res:
                            value = Decimal(parse_quantity(str(res[key]))) * SCALE
                            res[key] = str(value.normalize() if res["name"] == "cpu" else int(value))
    return docs


class RealWorld:
    """What the loop reads from the cluster, on the real one (through the API server)."""

    def __init__(self, cluster: RealCluster) -> None:
        from kubernetes import client

        self.cluster = cluster
        self.kubeconfig_path = cluster.kubeconfig
        self.api = cluster.api_client()
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.kubelet_root = None
        self._stop = threading.Event()

    def pods(self, namespace: str) -> list[dict[str, Any]]:
        items = self.core.list_namespaced_pod(namespace).items
        pods = [self.api.sanitize_for_serialization(p) for p in items]
        return [p for p in pods if not p["metadata"].get("deletionTimestamp")]

    def workload(self, name: str, namespace: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            found: dict[str, Any] = self.custom.get_namespaced_custom_object(
                KUEUE_GROUP, "v1beta2", namespace, "workloads", name
            )
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        return found

    def record_workloads(self, history: Callable[[Any], None]) -> None:
        """Every version of every Workload, from a watch, handed to ``history`` as an event."""
        import urllib3
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        def run() -> None:
            while not self._stop.is_set():
                stream = watch.Watch()
                try:
                    for event in stream.stream(
                        self.custom.list_cluster_custom_object,
                        KUEUE_GROUP,
                        "v1beta2",
                        "workloads",
                        timeout_seconds=60,
                    ):
                        history(_Event(event["object"]))
                        if self._stop.is_set():
                            stream.stop()
                            return
                except (ApiException, urllib3.exceptions.HTTPError, OSError) as err:
                    # a dropped watch (the cluster stopping, a 410): started again unless stopping
                    if not self._stop.wait(WATCH_RETRY_SECONDS):
                        print(f"e2e: the Workload watch ended ({type(err).__name__}); watching again", flush=True)

        threading.Thread(target=run, name="e2e-workload-watch", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()


class _Event:
    """The shape ``skypilot_loop.WorkloadHistory`` reads (the sandbox's ``StoreEvent.obj``)."""

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj


def advertise_gpus(cluster: RealCluster, count: int = NODE_GPUS) -> None:
    """``nvidia.com/gpu`` on the real node's status and SkyPilot's accelerator label on it."""
    core = cluster.core()
    core.patch_node_status(NODE_NAME, {"status": {"capacity": {"nvidia.com/gpu": str(count)}}})
    core.patch_node(NODE_NAME, {"metadata": {"labels": {seed.ACCELERATOR_LABEL: "a100"}}})

    def allocatable() -> bool:
        node = core.read_node(NODE_NAME)
        return (node.status.allocatable or {}).get("nvidia.com/gpu") == str(count)

    deadline = time.monotonic() + 60
    while not allocatable():
        if time.monotonic() > deadline:
            raise loop.StageFailed(f"the kubelet did not report {count} nvidia.com/gpu allocatable on {NODE_NAME}")
        time.sleep(0.5)


@contextmanager
def skypilot_world(
    root: pathlib.Path, evidence: loop.Evidence, plugin_config: pathlib.Path
) -> Iterator[tuple[RealWorld, dict[str, str], pathlib.Path]]:
    """The real cluster with the seed setup (scaled) and an environment for ``sky`` commands."""
    from kubernetes import dynamic

    from sky_kueue.sandbox.containers import recipes_skypilot  # noqa: F401 - registers the image's recipe

    binaries = build.ensure_built(versions.load_pins(), log=lambda line: print(f"e2e: {line}", flush=True))
    cluster = RealCluster(
        root / "cluster",
        binaries,
        NodeSpec(count=0),
        log=lambda line: print(f"e2e: {line}", flush=True),
        real_node=True,
        node_images=(loop.SKYPILOT_IMAGE,),
    )
    cluster.up()
    world = RealWorld(cluster)
    try:
        node = cluster.core().read_node(NODE_NAME)
        info = node.status.node_info
        images = cluster.state.extra["node"]["images"]
        evidence.record(
            "real control plane, real Kueue and a real node (kubelet, containerd, runc, CNI bridge)",
            f"{cluster.server}; node {NODE_NAME} kubelet {info.kubelet_version} runtime "
            f"{info.container_runtime_version} cgroup v1 (failCgroupV1: false); CPU "
            f"{node.status.allocatable['cpu']}, memory {node.status.allocatable['memory']}; "
            f"image imports (s): {images}",
        )
        advertise_gpus(cluster)
        client = dynamic.DynamicClient(world.api)
        for doc in scaled_seed_setup():
            resource = client.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
            resource.server_side_apply(
                body=doc,
                name=doc["metadata"]["name"],
                namespace=doc["metadata"].get("namespace"),
                field_manager="sky-kueue-e2e",
            )
        env = isolated_environment(
            root,
            cluster.kubeconfig,
            plugin_config,
            CONTEXT,
            {"jobs": {"controller": {"consolidation_mode": True}}},
        )
        env["PATH"] = f"{loop.BIN}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(loop.NETWORK_PROBE_DIR), env.get("PYTHONPATH")]))
        env[loop.NETWORK_PROBE_URL_ENV] = f"http://127.0.0.1:{cluster.state.extra['node']['registry_port']}/v2/"
        try:
            yield world, env, pathlib.Path(env["HOME"])
        finally:
            subprocess.run(
                [str(loop.BIN / "sky"), "api", "stop"], env=env, capture_output=True, timeout=120, check=False
            )
    finally:
        world.stop()
        cluster.down()
