"""Only contexts SkyPilot enables become candidates (issue 26, part 1).

SkyPilot 0.14.1's optimizer fails a task whose Kubernetes candidates name any context it does
not enable (``kubernetes.allowed_contexts``, else the kubeconfig's current context), even
when the first candidate is fine. The policy asks SkyPilot which contexts it enables and
leaves the others out with a note; ``check-config`` warns about them.

The end-to-end cases run SkyPilot's own policy application and optimizer in process on three
sandboxes (one kubeconfig, current context ``ctx-2``): ``ctx-2`` is full for team-b,
``ctx-1`` and ``ctx-3`` admit at once, so the best allowed cluster differs per case.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from sky_kueue.cli.main import cli
from sky_kueue.sandbox import seed
from sky_kueue.sandbox.apiserver.clock import ManualClock
from sky_kueue.sandbox.sandbox import Sandbox
from sky_kueue.skypilot import cluster_view
from sky_kueue.skypilot.decision import Placement, Rejection, RejectionCode, decide
from sky_kueue.skypilot.enabled_contexts import listed_allowed_contexts, refused_team_clusters
from sky_kueue.skypilot.request import PolicyRequest
from sky_kueue.skypilot.task_yaml import candidates
from tests.skypilot.builders import config, demo_config_data, request, task
from tests.skypilot.conftest import SkyEnv
from tests.skypilot.test_multi_cluster import FILLER_CPUS, fill, write_kubeconfig

CONTEXTS = ("ctx-1", "ctx-2", "ctx-3")
#: The kubeconfig's current context: what SkyPilot enables when allowed_contexts is unset.
CURRENT = "ctx-2"
#: allowed_contexts -> the cluster the optimizer must choose, and the ones left out.
CASES: dict[str, tuple[list[str] | None, str, set[str]]] = {
    "unset": (None, "ctx-2", {"ctx-1", "ctx-3"}),
    "ctx-1,ctx-2": (["ctx-1", "ctx-2"], "ctx-1", {"ctx-3"}),
    "ctx-2,ctx-3": (["ctx-2", "ctx-3"], "ctx-3", {"ctx-1"}),
}


def three_cluster_data() -> dict[str, Any]:
    data = demo_config_data()
    data["kubernetes"]["contexts"] = list(CONTEXTS)
    data["teams"]["team-b"]["clusters"] = [{"context": c} for c in CONTEXTS]
    return data


def team_b(**kwargs: Any) -> PolicyRequest:
    return request(task(team="team-b", cpus=str(FILLER_CPUS)), **kwargs)


def infras(task_dict: dict[str, Any]) -> list[str]:
    return [c["infra"] for c in candidates(task_dict)]


# --- the decision, pure -------------------------------------------------------------------


def test_a_context_skypilot_does_not_enable_is_left_out_with_a_note() -> None:
    plugin_config = config(**{k: v for k, v in three_cluster_data().items() if k in ("kubernetes", "teams")})
    probe = team_b()
    decision = decide(
        PolicyRequest(probe.task, probe.skypilot_config, enabled_contexts=("ctx-1", "ctx-2")), plugin_config
    )
    assert isinstance(decision, Placement), decision
    assert [t.context for t in decision.targets] == ["ctx-1", "ctx-2"]
    left_out = [n for n in decision.notes if "skipped" in n]
    assert left_out == [
        "context ctx-3 skipped: not enabled in SkyPilot (enabled: ctx-1, ctx-2); add it to kubernetes.allowed_contexts"
    ]


def test_an_explicit_allowed_contexts_list_applies_where_skypilot_cannot_be_asked() -> None:
    """The RESTful policy server and client-side planning see only the request's config."""
    plugin_config = config(**{k: v for k, v in three_cluster_data().items() if k in ("kubernetes", "teams")})
    decision = decide(team_b(skypilot_config={"kubernetes": {"allowed_contexts": ["ctx-3"]}}), plugin_config)
    assert isinstance(decision, Placement), decision
    assert [t.context for t in decision.targets] == ["ctx-3"]
    workspace = {"workspaces": {"default": {"kubernetes": {"allowed_contexts": ["ctx-1"]}}}}
    assert listed_allowed_contexts({**workspace, "kubernetes": {"allowed_contexts": "all"}}, "default") == ("ctx-1",)
    assert listed_allowed_contexts({"kubernetes": {"allowed_contexts": "all"}}) is None


def test_a_team_with_no_enabled_context_is_rejected_in_one_line() -> None:
    plugin_config = config(**{k: v for k, v in three_cluster_data().items() if k in ("kubernetes", "teams")})
    probe = team_b()
    decision = decide(PolicyRequest(probe.task, probe.skypilot_config, enabled_contexts=("other",)), plugin_config)
    assert isinstance(decision, Rejection), decision
    assert decision.code is RejectionCode.CONTEXT_NOT_ENABLED
    assert "\n" not in decision.message and "kubernetes.allowed_contexts" in decision.message


def test_check_config_warns_once_per_context_skypilot_does_not_enable() -> None:
    plugin_config = config(**{k: v for k, v in three_cluster_data().items() if k in ("kubernetes", "teams")})
    warnings = refused_team_clusters(plugin_config, ("ctx-1",))
    assert [w.split(" (")[0] for w in warnings] == ["context 'ctx-2'", "context 'ctx-3'"]
    assert all("teams team-a, team-b" in w for w in warnings), warnings


def test_check_config_asks_skypilot_which_contexts_it_enables(
    sky_env: SkyEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sky.utils import annotations

    servers = {c: f"http://127.0.0.1:{port}" for c, port in zip((CURRENT, "ctx-1", "ctx-3"), (1, 2, 3), strict=True)}
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", servers)))
    annotations.clear_request_level_cache()
    path = tmp_path / "sky-kueue.yaml"
    path.write_text(yaml.safe_dump(three_cluster_data()))

    result = CliRunner(mix_stderr=False).invoke(cli, ["check-config", str(path)])

    assert result.exit_code == 0, result.output + result.stderr
    assert "ok:" in result.output
    warned = [line for line in result.stderr.splitlines() if line.startswith("warning: context ")]
    assert [w.split(" (")[0] for w in warned] == ["warning: context 'ctx-1'", "warning: context 'ctx-3'"], warned
    assert all("(enabled: ctx-2)" in w for w in warned), warned


# --- SkyPilot's own policy path and optimizer on three sandboxes --------------------------


@dataclass(frozen=True)
class ThreeClusters:
    kubeconfig: Path
    plugin_config: Path


@pytest.fixture(scope="module")
def three_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreeClusters]:
    root = tmp_path_factory.mktemp("three-clusters")
    clock = ManualClock(datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.timezone.utc))
    try:
        with (
            Sandbox(clock=clock, run_emulator=False) as one,
            Sandbox(clock=clock, run_emulator=False) as two,
            Sandbox(clock=clock, run_emulator=False) as three,
        ):
            boxes = dict(zip(CONTEXTS, (one, two, three), strict=True))
            for box in boxes.values():
                box.apply(seed.seed_cluster())
            fill(boxes[CURRENT])
            kubeconfig = write_kubeconfig(root / "kubeconfig", {c: boxes[c].url for c in (CURRENT, "ctx-1", "ctx-3")})
            data = three_cluster_data()
            data["cluster"] = {"kubeconfig": str(kubeconfig)}
            plugin_config = root / "sky-kueue.yaml"
            plugin_config.write_text(yaml.safe_dump(data))
            yield ThreeClusters(kubeconfig, plugin_config)
    finally:
        cluster_view.close_live_mirrors()


@pytest.mark.parametrize("case", sorted(CASES))
def test_skypilots_optimizer_accepts_the_policys_output(
    case: str, three_clusters: ThreeClusters, sky_env: SkyEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sky import skypilot_config
    from sky.optimizer import Optimizer
    from sky.server.requests.request_names import AdminPolicyRequestName
    from sky.utils import admin_policy_utils, annotations

    allowed, expected, left_out = CASES[case]
    monkeypatch.setenv("KUBECONFIG", str(three_clusters.kubeconfig))
    monkeypatch.setenv("SKY_KUEUE_CONFIG", str(three_clusters.plugin_config))
    annotations.clear_request_level_cache()  # one request each, as on the API server
    settings = skypilot_config.to_dict()
    if allowed is not None:
        settings.set_nested(("kubernetes", "allowed_contexts"), allowed)
    with skypilot_config.replace_skypilot_config(settings):
        sky_task = sky_env.sky.Task.from_yaml_config(task(team="team-b", cpus=str(FILLER_CPUS)))
        dag, mutated = admin_policy_utils.apply(sky_task, request_name=AdminPolicyRequestName("jobs.launch"))
        with skypilot_config.replace_skypilot_config(mutated):
            Optimizer.optimize(dag, quiet=True)
    pinned = [r.region for r in dag.tasks[0].resources]
    assert pinned[0] == expected and not left_out & set(pinned), pinned
    assert dag.tasks[0].best_resources is not None
    assert dag.tasks[0].best_resources.region == expected
