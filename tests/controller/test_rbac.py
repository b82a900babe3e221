"""``configs/controller/``: the manifests parse, and the RBAC is exactly what the controller uses.

The controller's rules are ``configs/controller/rbac.yaml`` plus the Role that ``sky-kueue
setup`` renders in each team namespace (here: ``configs/teams.yaml``'s team-a and team-b).
The controller runs against the sandbox through a scenario that exercises every kind of
call it makes (list and watch, an aging patch, a relaunch-race deletion, the preemptor's
WorkloadPriorityClass, leader election, gate detection). The sandbox's request log then
says which (API group, resource, verb, namespace, name) it asked for. Both directions are
checked: every request is allowed by the ClusterRole or a Role, and every verb granted was
used: least privilege, verified rather than asserted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sky_kueue.controller.aging.safe_relaunch import SafeRelaunchSettings
from sky_kueue.controller.config_file import load_controller_config
from sky_kueue.controller.hold import HoldTeams, TeamHold
from sky_kueue.controller.kube_events import EventReason, WorkloadEventRecorder

from .live_support import CONTROLLER_USER_AGENT, demo_aging, group_pod, live_sandbox
from .test_relaunch_race import GROUP, _finished_preempted_workload

MANIFESTS = Path(__file__).resolve().parents[2] / "configs" / "controller"
TEAMS = MANIFESTS.parent / "teams.yaml"
#: The plugin config the deployment mounts (README): its teams' namespaces are where
#: ``controller run`` watches pods.
PLUGIN_CONFIG = MANIFESTS.parent / "sky-kueue.yaml"
#: Verbs that change nothing.
READ_VERBS = frozenset({"get", "list", "watch"})
CONTROLLER_NAMESPACE = "sky-kueue-system"
#: The test's Lease lives in "default"; the manifests put it in the controller's namespace.
TEST_LEASE_NAMESPACE = "default"


def _documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def _setup_documents() -> list[dict[str, Any]]:
    """The Roles and RoleBindings ``sky-kueue setup`` renders for configs/teams.yaml."""
    from sky_kueue.skypilot.setup_render import render_controller_rbac
    from sky_kueue.skypilot.setup_spec import TeamsSpec

    return render_controller_rbac(TeamsSpec.model_validate(yaml.safe_load(TEAMS.read_text())))


def _rules(*, with_setup: bool = True) -> list[tuple[str | None, dict[str, Any]]]:
    """(namespace or None for cluster-wide, rule) for every rule bound to the controller's account:
    configs/controller's, plus (``with_setup``) the team Roles setup renders."""
    docs = _documents() + (_setup_documents() if with_setup else [])
    bound: set[tuple[str, str | None]] = set()
    for doc in docs:
        if doc["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            subjects = doc["subjects"]
            assert subjects == [
                {"kind": "ServiceAccount", "name": "sky-kueue-controller", "namespace": CONTROLLER_NAMESPACE}
            ]
            bound.add((doc["roleRef"]["name"], doc["metadata"].get("namespace")))
    rules: list[tuple[str | None, dict[str, Any]]] = []
    for doc in docs:
        if doc["kind"] == "ClusterRole" and (doc["metadata"]["name"], None) in bound:
            rules += [(None, r) for r in doc["rules"]]
        elif doc["kind"] == "Role" and (doc["metadata"]["name"], doc["metadata"]["namespace"]) in bound:
            rules += [(doc["metadata"]["namespace"], r) for r in doc["rules"]]
    return rules


def _allows(scope: str | None, rule: dict[str, Any], group: str, resource: str, verb: str, ns: str, name: str) -> bool:
    if scope is not None and scope != (CONTROLLER_NAMESPACE if ns == TEST_LEASE_NAMESPACE else ns):
        return False
    if group not in rule["apiGroups"] or resource not in rule["resources"] or verb not in rule["verbs"]:
        return False
    names = rule.get("resourceNames")
    return not names or name in names


def test_the_manifests_describe_one_controller_deployment() -> None:
    docs = _documents()
    kinds = sorted(d["kind"] for d in docs)
    expected = ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"]
    expected += ["Role", "RoleBinding"] * 3 + ["Deployment"]  # the Lease; the history; gate detection
    assert kinds == sorted(expected)
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(
        p.name for p in MANIFESTS.glob("*.yaml") if p.name != "kustomization.yaml"
    )
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    (container,) = pod["containers"]
    assert pod["serviceAccountName"] == "sky-kueue-controller"
    # HA: two replicas, no volume (the history is in the API server), a rollout never stops both.
    assert deployment["spec"]["replicas"] == 2 and "volumeClaimTemplates" not in deployment["spec"]
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 1, "maxSurge": 0}
    assert all("persistentVolumeClaim" not in v for v in pod.get("volumes", []))
    assert "--state=kubernetes" in container["args"]
    assert container["command"] == ["sky-kueue", "controller", "run"]
    assert "--in-cluster" in container["args"] and "--log-format=json" in container["args"]
    from sky_kueue.cli.controller_cmd import run

    parsed = run.make_context("run", list(container["args"]), resilient_parsing=False)  # every flag exists
    assert parsed.params["reage_interval"] == 300 and parsed.params["in_cluster"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # The only listener is /metrics, on the named port the annotations and the ServiceMonitor name.
    assert container["ports"] == [{"name": "metrics", "containerPort": 9464, "protocol": "TCP"}]
    assert parsed.params["metrics_port"] == 9464 and parsed.params["metrics_host"] == "0.0.0.0"
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9464",
        "prometheus.io/path": "/metrics",
    }
    monitoring = [
        d for p in sorted((MANIFESTS / "monitoring").glob("*.yaml")) for d in yaml.safe_load_all(p.read_text())
    ]
    (monitor,) = [d for d in monitoring if d["kind"] == "ServiceMonitor"]
    (service,) = [d for d in monitoring if d["kind"] == "Service"]
    assert monitor["spec"]["selector"]["matchLabels"] == service["metadata"]["labels"]
    assert service["spec"]["selector"] == pod_labels and service["spec"]["ports"][0]["targetPort"] == "metrics"
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    probe = container["livenessProbe"]["exec"]["command"]
    assert probe[:3] == ["sky-kueue", "controller", "status"] and "--state=kubernetes" in probe
    from sky_kueue.cli.controller_cmd import status

    status.make_context("status", list(probe[3:]), resilient_parsing=False)


def test_the_controller_writes_nothing_cluster_wide() -> None:
    """Every write is granted in one namespace: the controller's own (Lease, history), kueue-system
    (nothing: reads only) or a team namespace setup created (Workloads, Events)."""
    cluster_wide = [rule for scope, rule in _rules(with_setup=False) if scope is None]
    assert cluster_wide
    writes = [rule for rule in cluster_wide if set(rule["verbs"]) - READ_VERBS]
    assert not writes, f"cluster-wide writes: {writes}"
    team_writes = {
        (scope, group, resource, verb)
        for scope, rule in _rules()
        if scope in ("team-a", "team-b")
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    expected = {("kueue.x-k8s.io", "workloads", "patch"), ("kueue.x-k8s.io", "workloads", "delete")}
    expected |= {("", "events", "create"), ("", "events", "patch")}
    expected |= {("", "pods", "list"), ("", "pods", "watch")}  # reads, but of pods: team namespaces only
    assert team_writes == {(ns, *grant) for ns in ("team-a", "team-b") for grant in expected}


def test_no_pod_is_readable_cluster_wide() -> None:
    """A pod's spec holds its environment: configs/controller grants no pod read anywhere, the
    Roles setup renders grant list and watch in the team namespaces, which are the namespaces
    of the plugin config's teams that ``controller run`` watches."""
    pod_rules = [(scope, rule) for scope, rule in _rules() if "pods" in rule["resources"]]
    assert pod_rules and all(scope is not None for scope, _ in pod_rules), pod_rules
    assert sorted(scope for scope, _ in pod_rules if scope) == list(
        load_controller_config(PLUGIN_CONFIG).team_namespaces
    )


def test_the_lease_rule_names_the_lease_the_deployment_elects_on() -> None:
    """``--lease-name`` and the Lease rule's resourceNames agree (a renamed Lease under the old
    rule would be refused every renewal), and both are the controller's default."""
    from sky_kueue.cli.controller_cmd import run
    from sky_kueue.controller.leader import DEFAULT_LEASE_NAME

    (deployment,) = [d for d in _documents() if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    lease_name = run.make_context("run", list(container["args"]), resilient_parsing=False).params["lease_name"]
    named = [
        rule["resourceNames"]
        for scope, rule in _rules()
        if "leases" in rule["resources"] and "update" in rule["verbs"] and scope == CONTROLLER_NAMESPACE
    ]
    assert named == [[lease_name]] and lease_name == DEFAULT_LEASE_NAME


def _key(record: Any) -> tuple[str, str, str, str, str] | None:
    """(group, resource, verb, namespace, name) of a request; parses paths the sandbox does not serve."""
    info = record.info
    if info.resource:
        return info.group, info.resource, info.verb, info.namespace, info.name
    parts = record.path.strip("/").split("/")
    if len(parts) == 7 and parts[0] == "apis" and parts[3] == "namespaces":  # /apis/g/v/namespaces/ns/res/name
        return parts[1], parts[5], "get" if record.method == "GET" else record.method.lower(), parts[4], parts[6]
    return None  # discovery, /version


def test_the_rbac_allows_exactly_what_the_controller_does(tmp_path: Path) -> None:
    with live_sandbox(tmp_path, state_kind="kubernetes") as live:  # as deployed: --state kubernetes
        store = live.sandbox.store
        prod = group_pod("train", "2", "team-a", "prod-priority", "7", gpus="2")
        live.sandbox.apply(prod)
        live.sandbox.step()
        prod_uid = store.get("workloads.kueue.x-k8s.io", "train-2-fcd1e5cf", "team-a")["metadata"]["uid"]
        manifest, status = _finished_preempted_workload(prod_uid, "2026-01-01T12:00:00Z")
        store.create("workloads.kueue.x-k8s.io", manifest, "team-b")
        store.mutate(
            "workloads.kueue.x-k8s.io", GROUP, lambda o: o.update(status=status), "team-b", subresource="status"
        )
        live.sandbox.apply(group_pod("dev", "1", "team-b", "dev-priority", "5"))
        live.sandbox.step()
        api_client = live.sandbox.api_client()
        api_client.user_agent = CONTROLLER_USER_AGENT
        recorder = WorkloadEventRecorder(api_client, "replica-a", clock=live.now)  # as `controller run` wires it
        # gate "auto": reads the Kueue Deployment and config
        # team-b's relaunches are held after one preemption (safe relaunch): the queue kinds are watched
        holds = HoldTeams(
            {
                "team-b": TeamHold(
                    "team-b", SafeRelaunchSettings(safe_after_preemptions=1, hold_only_when_predicted=False)
                )
            }
        )
        pod_namespaces = load_controller_config(PLUGIN_CONFIG).team_namespaces  # as `controller run` reads them
        controller = live.new_controller(demo_aging(), observers=[recorder], holds=holds, pod_namespaces=pod_namespaces)
        live.sandbox.store.delete("pods", prod["metadata"]["name"], "team-a")
        live.step(10)
        live.step(10)
        assert controller.step()  # renews the Lease
        history = live.history("1")
        assert history.current_boost == 100 and history.preemptions[0].preemptor_priority == 1000
        assert [h.workload_name for h in history.holds] == ["dev-1-fcd1e5cf"]  # held: spec.active false
        recorder.flush()
        (aged,) = [r for r in recorder.sent if r.reason is EventReason.AGED]
        recorder.record([aged])  # the same reason on the same Workload again: count + 1 (a patch)
        recorder.flush()
        recorder.close()
        live.stop()  # closes the watches: the request log records a watch when it ends
        log = live.sandbox.requests
        # one watch per mirrored kind (Workloads, WorkloadPriorityClasses and the queue kinds) and
        # one of pods per team namespace
        assert log.wait_for(lambda records: sum(r.info.verb == "watch" for r in records) >= 9, 10)
        records = [r for r in log.records() if r.user_agent.startswith(CONTROLLER_USER_AGENT)]

    rules = _rules()
    used: set[tuple[str, str, str]] = set()
    for record in records:
        key = _key(record)
        if key is None:
            continue
        group, resource, verb, namespace, name = key
        assert any(_allows(scope, rule, group, resource, verb, namespace, name) for scope, rule in rules), record
        used.add((group, resource, verb))
    granted = {
        (g, r, v) for _, rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }
    assert granted == used, f"granted but never used: {sorted(granted - used)}; used: {sorted(used)}"
