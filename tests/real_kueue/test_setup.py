"""``sky-kueue setup --apply`` against the real Kueue: its webhooks accept (and default) what
setup renders, and Kueue's own controllers make every queue active."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.real_kueue.conftest import REPO
from tests.real_kueue.support import KUEUE_GROUP, KUEUE_VERSION, KueueCluster, condition_true, run_cli

TEAMS = REPO / "configs" / "teams.yaml"


def cluster_queues(kueue: KueueCluster) -> dict[str, dict[str, Any]]:
    items = kueue.custom.list_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues")["items"]
    return {cq["metadata"]["name"]: cq for cq in items}


def test_setup_apply_is_accepted_by_kueues_webhooks_and_every_queue_becomes_active(
    kueue: KueueCluster, cli_env: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    done = run_cli(cli_env, "setup", "--teams", str(TEAMS), "--output", str(out), "--apply")
    assert done.returncode == 0, done.stderr
    queues = cluster_queues(kueue)
    assert set(queues) == {"team-a-cq", "team-b-cq", "shared-cq"}
    # Kueue's mutating webhook defaulted what setup left out (ClusterQueue webhook Default)
    assert all(cq["spec"].get("stopPolicy") == "None" for cq in queues.values()), queues
    for name in queues:
        kueue.wait(
            f"ClusterQueue {name} Active",
            lambda n=name: condition_true(cluster_queues(kueue).get(n), "Active"),  # type: ignore[misc]
        )
    for namespace, queue in (("team-a", "team-a-lq"), ("team-b", "team-b-lq")):
        kueue.wait(
            f"LocalQueue {namespace}/{queue} Active",
            lambda ns=namespace, q=queue: condition_true(  # type: ignore[misc]
                kueue.custom.get_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION, ns, "localqueues", q),
                "Active",
            ),
        )
    again = run_cli(cli_env, "setup", "--teams", str(TEAMS), "--output", str(out), "--apply")
    assert again.returncode == 0, again.stderr


def test_kueues_webhook_rejects_what_the_sandbox_would_accept(kueue: KueueCluster) -> None:
    """A ClusterQueue whose flavor lists a resource its group does not cover: Kueue's
    validating webhook refuses it (the sandbox stores it); proof the webhook is in the path."""
    from kubernetes.client.exceptions import ApiException

    bad = {
        "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
        "kind": "ClusterQueue",
        "metadata": {"name": "bad-cq"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "f", "resources": [{"name": "memory", "nominalQuota": "1"}]}],
                }
            ]
        },
    }
    try:
        kueue.custom.create_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", bad)
    except ApiException as err:
        # an admission webhook's refusal is 403 "admission webhook ... denied the request"
        assert err.status == 403, err
        assert "vclusterqueue.kb.io" in str(err.body) and "denied the request" in str(err.body), err.body
    else:
        raise AssertionError("Kueue accepted a ClusterQueue whose flavor names an uncovered resource")


def test_check_config_against_the_cluster_finds_what_is_missing_then_passes(
    kueue: KueueCluster, cli_env: dict[str, str], tmp_path: Path
) -> None:
    import yaml

    from sky_kueue.realcluster.cluster import CONTEXT

    spec = yaml.safe_load(TEAMS.read_text())
    spec["context"] = CONTEXT
    (tmp_path / "teams.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    rendered = run_cli(cli_env, "setup", "--teams", str(tmp_path / "teams.yaml"), "--output", str(out))
    assert rendered.returncode == 0, rendered.stderr
    config = str(out / "sky-kueue.yaml")
    before = run_cli(cli_env, "check-config", "--no-skypilot", "--cluster", config)
    assert before.returncode == 1
    assert "error: team team-b on sky-kueue-real: LocalQueue team-b/team-b-lq does not exist" in before.stderr

    applied = run_cli(cli_env, "setup", "--teams", str(tmp_path / "teams.yaml"), "--apply")
    assert applied.returncode == 0, applied.stderr
    kueue.wait(
        "every ClusterQueue Active",
        lambda: all(condition_true(cq, "Active") for cq in cluster_queues(kueue).values()),
    )
    after = run_cli(cli_env, "check-config", "--no-skypilot", "--cluster", config)
    assert after.returncode == 0, after.stderr
    assert "the clusters hold every team's queue and classes" in after.stdout

    kueue.custom.patch_cluster_custom_object(
        KUEUE_GROUP, KUEUE_VERSION, "workloadpriorityclasses", "dev-priority", {"value": 150}
    )
    drifted = run_cli(cli_env, "check-config", "--no-skypilot", "--cluster", config)
    assert drifted.returncode == 1
    assert "WorkloadPriorityClass dev-priority has value 150 on the cluster, 100 in the config" in drifted.stderr
