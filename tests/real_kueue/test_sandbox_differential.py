"""The sandbox checked against real Kueue: one scripted story, run on both, the same traces.

The story is the demo's seed scenario plus a hold: team-b's dev group borrows the cohort's
CPUs; team-a's prod group reclaims them (Kueue waits out the victim's grace period); SkyPilot
relaunches the dev group once its old Workload is gone; the controller ages the relaunch;
the relaunch is held (``spec.active: false``, as :mod:`sky_kueue.controller.hold` patches it)
and released; prod is torn down and the relaunch is admitted.

The story is a list of actions and "until" conditions, so it runs on both clusters: on the
sandbox the test steps the emulator on a manual clock (:data:`SANDBOX_TICK_SECONDS` of cluster
time per step, the controller caught up after every step); on the real cluster Kueue, the
scheduler and KWOK act on the wall clock and the test polls. Every version of every Workload
is read from a watch on each cluster, and the comparison is of:

* per Workload (named by namespace, group and the order of its UID), the ordered
  ``(type, status, reason)`` transitions of its conditions and its deletion; messages and
  times are left out (they carry UIDs and timestamps);
* the controller's history of the dev job: its preemptions (reason), other evictions
  (reason), aging steps (policy, boost, state) and phase transitions (cause).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest
import yaml

from sky_kueue.controller.history import JobHistory
from sky_kueue.controller.leader import LeaseSettings
from sky_kueue.controller.manager import Controller, ControllerSettings
from sky_kueue.controller.runtime_state import RuntimeState
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from tests.controller.live_support import Live, demo_aging, group_pod, live_sandbox
from tests.real_kueue.conftest import REPO
from tests.real_kueue.support import KUEUE_GROUP, KUEUE_VERSION, KueueCluster, condition_true

SEED_SETUP = REPO / "configs" / "kueue" / "seed-setup.yaml"
#: The story's pods' grace period (SkyPilot's are 30 s; 5 s shows the same states sooner).
GRACE_SECONDS = 5
#: Cluster seconds per sandbox step, and the most steps an "until" takes on the sandbox.
SANDBOX_TICK_SECONDS = 1.0
SANDBOX_MAX_STEPS = 120
#: Wall-clock seconds an "until" waits on the real cluster.
REAL_WAIT_SECONDS = 60.0
#: How long the watch recorder gets to deliver the versions a final list shows (seconds).
RECORDER_CATCH_UP_SECONDS = 30.0
DEV_JOB = "1"

Transition = tuple[str, str, str]


def story_pod(task: str, job_id: str, team: str, priority_class: str, cpu: str) -> dict[str, Any]:
    """A SkyPilot head pod as the live tests shape it, with the story's grace period."""
    pod = group_pod(task, job_id, team, priority_class, cpu)
    pod["spec"]["terminationGracePeriodSeconds"] = GRACE_SECONDS
    pod["metadata"]["labels"]["skypilot-user"] = "alice" if team == "team-a" else "bob"
    pod["metadata"]["labels"]["sky-kueue.io/team"] = team
    return pod


class Cluster(Protocol):
    """What the story needs from a cluster: writes, reads and waiting until a condition holds."""

    def create_pod(self, pod: dict[str, Any]) -> None: ...

    def delete_pod(self, namespace: str, name: str) -> None: ...

    def patch_workload(self, namespace: str, name: str, patch: dict[str, Any]) -> None: ...

    def workload(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def until(self, what: str, test: Callable[[], bool]) -> None: ...


class WorkloadRecorder:
    """Every version of every Workload a cluster-wide watch delivers, in order."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes import client, watch

        self._custom = client.CustomObjectsApi(api_client)
        self._watch = watch.Watch()
        self.events: list[tuple[str, dict[str, Any]]] = []
        self._changed = threading.Condition()
        listed = self._custom.list_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, "workloads")
        assert not listed["items"], "the story starts with no Workloads"
        self._thread = threading.Thread(target=self._run, args=(listed["metadata"]["resourceVersion"],), daemon=True)
        self._thread.start()

    def _run(self, since: str) -> None:
        for event in self._watch.stream(
            self._custom.list_cluster_custom_object, KUEUE_GROUP, KUEUE_VERSION, "workloads", resource_version=since
        ):
            with self._changed:
                self.events.append((str(event["type"]), event["object"]))
                self._changed.notify_all()

    def catch_up(self) -> None:
        """Wait until the watch delivered the version of every Workload a list shows now."""
        items = self._custom.list_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, "workloads")["items"]
        want = {o["metadata"]["uid"]: o["metadata"]["resourceVersion"] for o in items}

        def seen() -> bool:
            last = {o["metadata"]["uid"]: o["metadata"]["resourceVersion"] for _, o in self.events}
            return all(last.get(uid) == version for uid, version in want.items())

        with self._changed:
            assert self._changed.wait_for(seen, RECORDER_CATCH_UP_SECONDS), "the Workload watch fell behind"

    def stop(self) -> None:
        self._watch.stop()

    def transitions(self) -> dict[str, list[Transition]]:
        """Per Workload (``namespace/name#n``, n counting UIDs of that name), its condition changes."""
        uids: dict[str, list[str]] = {}
        previous: dict[str, dict[str, tuple[str, str]]] = {}
        result: dict[str, list[Transition]] = {}
        with self._changed:
            events = list(self.events)
        for kind, obj in events:
            meta = obj["metadata"]
            name = f"{meta['namespace']}/{meta['name']}"
            seen = uids.setdefault(name, [])
            if meta["uid"] not in seen:
                seen.append(meta["uid"])
            label = f"{name}#{seen.index(meta['uid'])}"
            trace = result.setdefault(label, [])
            if kind == "DELETED":
                trace.append(("<deleted>", "", ""))
                continue
            now = {
                c["type"]: (c["status"], c.get("reason", "")) for c in (obj.get("status") or {}).get("conditions") or []
            }
            before = previous.get(label, {})
            trace.extend(sorted((t, *state) for t, state in now.items() if before.get(t) != state))
            previous[label] = now
        return result


def history_summary(history: JobHistory | None) -> dict[str, Any]:
    """The parts of a job's history the sandbox must reproduce (no times, no UIDs)."""
    assert history is not None, "the controller kept no history of the dev job"
    return {
        "preemptions": [p.reason for p in history.preemptions],
        "evictions": [e.reason for e in history.evictions],
        "steps": [(s.policy, s.boost, s.state.value) for s in history.steps],
        "transitions": [t.cause.value for t in history.ordered_transitions()],
    }


def play_story(cluster: Cluster) -> None:
    """The seed story with a hold, in actions and "until" conditions only."""
    dev = story_pod("dev", DEV_JOB, "team-b", "dev-priority", cpu="6")
    group = dev["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"]
    prod = story_pod("train", "2", "team-a", "prod-priority", cpu="8")
    prod_group = prod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"]

    def workload_is(namespace: str, name: str, test: Callable[[dict[str, Any]], bool]) -> Callable[[], bool]:
        return lambda: (lambda w: w is not None and test(w))(cluster.workload(namespace, name))

    cluster.create_pod(dev)
    cluster.until("the dev group admitted", workload_is("team-b", group, lambda w: condition_true(w, "Admitted")))
    first_uid = str((cluster.workload("team-b", group) or {})["metadata"]["uid"])

    cluster.create_pod(prod)
    cluster.until("the dev group evicted", workload_is("team-b", group, lambda w: condition_true(w, "Evicted")))
    # Kueue keeps the victim's quota while its pod runs out its grace period; prod waits.
    victim = cluster.workload("team-b", group) or {}
    assert condition_true(victim, "QuotaReserved"), f"the victim released its quota at once: {_conds(victim)}"
    assert not condition_true(cluster.workload("team-a", prod_group), "Admitted"), "prod did not wait for the victim"
    cluster.until("prod admitted", workload_is("team-a", prod_group, lambda w: condition_true(w, "Admitted")))
    cluster.until("the preempted dev Workload collected", lambda: cluster.workload("team-b", group) is None)

    cluster.create_pod(story_pod("dev", DEV_JOB, "team-b", "dev-priority", cpu="6"))
    cluster.until(
        "the relaunch aged to 200",
        workload_is("team-b", group, lambda w: w["metadata"]["uid"] != first_uid and w["spec"].get("priority") == 200),
    )

    cluster.patch_workload("team-b", group, {"spec": {"active": False}})
    cluster.until(
        "the held relaunch marked Evicted/Deactivated",
        workload_is(
            "team-b",
            group,
            lambda w: any(c["type"] == "Evicted" and c.get("reason") == "Deactivated" for c in _conds(w)),
        ),
    )
    cluster.patch_workload("team-b", group, {"spec": {"active": True}})
    cluster.until(
        "the released relaunch pending again",
        workload_is(
            "team-b", group, lambda w: any(c["type"] == "QuotaReserved" and c["status"] == "False" for c in _conds(w))
        ),
    )

    cluster.delete_pod("team-a", f"{prod_group}-head")
    cluster.until("prod's Workload collected", lambda: cluster.workload("team-a", prod_group) is None)
    cluster.until("the relaunch admitted", workload_is("team-b", group, lambda w: condition_true(w, "Admitted")))


def _conds(workload: dict[str, Any]) -> list[dict[str, Any]]:
    conditions: list[dict[str, Any]] = (workload.get("status") or {}).get("conditions") or []
    return conditions


# --------------------------------------------------------------------- the two clusters


class SandboxCluster:
    """The sandbox on a manual clock: "until" steps the emulator and lets the controller catch up."""

    def __init__(self, live: Live) -> None:
        from kubernetes import client

        self.live = live
        self._core = client.CoreV1Api(live.sandbox.api_client())
        self._custom = client.CustomObjectsApi(live.sandbox.api_client())

    def create_pod(self, pod: dict[str, Any]) -> None:
        self._core.create_namespaced_pod(pod["metadata"]["namespace"], pod)
        self.live.settle()

    def delete_pod(self, namespace: str, name: str) -> None:
        self._core.delete_namespaced_pod(name, namespace)
        self.live.settle()

    def patch_workload(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self._custom.patch_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads", name, patch)
        self.live.settle()

    def workload(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.live.workload(namespace, name)

    def until(self, what: str, test: Callable[[], bool]) -> None:
        for _ in range(SANDBOX_MAX_STEPS):
            if test():
                return
            self.live.step(SANDBOX_TICK_SECONDS)
        raise AssertionError(f"sandbox: {what} not within {SANDBOX_MAX_STEPS} steps")


class RealKueue:
    """The real cluster: "until" polls while Kueue, kube-scheduler and KWOK act on their own."""

    def __init__(self, kueue: KueueCluster) -> None:
        self.kueue = kueue

    def create_pod(self, pod: dict[str, Any]) -> None:
        self.kueue.create_pod(pod)

    def delete_pod(self, namespace: str, name: str) -> None:
        self.kueue.delete_pod(namespace, name)

    def patch_workload(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self.kueue.custom.patch_namespaced_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads", name, patch
        )

    def workload(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.kueue.workload(namespace, name)

    def until(self, what: str, test: Callable[[], bool]) -> None:
        self.kueue.wait(f"real Kueue: {what}", lambda: test() or None, REAL_WAIT_SECONDS)


# --------------------------------------------------------------------- the runs


def run_on_sandbox(tmp_path: Path) -> tuple[dict[str, list[Transition]], dict[str, Any]]:
    setup = [doc for doc in yaml.safe_load_all(SEED_SETUP.read_text()) if doc]
    with live_sandbox(tmp_path, setup=setup, pod_grace_periods=True) as live:
        live.new_controller(demo_aging())
        recorder = WorkloadRecorder(live.sandbox.api_client())
        try:
            play_story(SandboxCluster(live))
            recorder.catch_up()
        finally:
            recorder.stop()
        return recorder.transitions(), history_summary(live.store.load(f"managed-job/{DEV_JOB}"))


@pytest.fixture
def real_controller(kueue: KueueCluster, tmp_path: Path) -> Iterator[SqliteHistoryStore]:
    store = SqliteHistoryStore(tmp_path / "real.db")
    runtime = RuntimeState(tmp_path / "real.db")
    settings = ControllerSettings(
        lease=LeaseSettings(namespace="default", identity="differential-test", retry_period_seconds=1.0),
        priority_boost_gate=False,
    )
    running = Controller(kueue.cluster.api_client(), store, demo_aging(), settings, runtime=runtime, clock=time.time)
    running.start()
    try:
        yield store
    finally:
        running.stop()
        store.close()
        runtime.close()


def test_the_sandbox_plays_the_seed_story_as_kueue_does(
    kueue: KueueCluster, real_controller: SqliteHistoryStore, tmp_path: Path
) -> None:
    kueue.apply(doc for doc in yaml.safe_load_all(SEED_SETUP.read_text()) if doc)
    recorder = WorkloadRecorder(kueue.api)
    try:
        play_story(RealKueue(kueue))
        recorder.catch_up()
    finally:
        recorder.stop()
    real_traces = recorder.transitions()
    real_history = history_summary(real_controller.load(f"managed-job/{DEV_JOB}"))

    (tmp_path / "sandbox").mkdir()
    sandbox_traces, sandbox_history = run_on_sandbox(tmp_path / "sandbox")

    for label in sorted(set(real_traces) | set(sandbox_traces)):
        assert sandbox_traces.get(label) == real_traces.get(label), (
            f"{label}: sandbox {sandbox_traces.get(label)} != real Kueue {real_traces.get(label)}"
        )
    assert sandbox_history == real_history
