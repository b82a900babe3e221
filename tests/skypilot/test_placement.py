"""Ranking a team's clusters (pure), the per-cluster config, and discovery like kubectl."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sky_kueue.skypilot.cluster_discovery import KubeconfigSource, allowed_contexts, find_kubeconfig
from sky_kueue.skypilot.config import ConfigError, TeamCluster
from sky_kueue.skypilot.decision import Placement, Rejection, RejectionCode, decide
from sky_kueue.skypilot.placement import ClusterAssessment, Standing, rank
from sky_kueue.skypilot.verdict import AdmissionOutcome, AdmissionVerdict
from sky_kueue.skypilot.view import ContextHealth, ContextView, QueueFacts
from tests.skypilot.builders import FakeView, config, request, task


def cluster(context: str) -> TeamCluster:
    return TeamCluster(context, "team-b", "team-b-lq", ("dev-priority",))


def verdict(outcome: AdmissionOutcome, **kw: object) -> AdmissionVerdict:
    return AdmissionVerdict(outcome, f"{outcome.value}", **kw)  # type: ignore[arg-type]


def order(*assessments: ClusterAssessment) -> list[tuple[str | None, str]]:
    return [(r.cluster.context, r.outcome) for r in rank(assessments).clusters]


def test_admit_now_beats_preemption_beats_the_shortest_wait() -> None:
    assert order(
        ClusterAssessment(cluster("wait-long"), verdict(AdmissionOutcome.WAIT, expected_wait_seconds=900)),
        ClusterAssessment(cluster("wait-unknown"), verdict(AdmissionOutcome.WAIT)),
        ClusterAssessment(cluster("wait-short"), verdict(AdmissionOutcome.WAIT, expected_wait_seconds=60)),
        ClusterAssessment(
            cluster("preempt-two"), verdict(AdmissionOutcome.ADMIT_AFTER_PREEMPTION, preempts=("a", "b"))
        ),
        ClusterAssessment(
            cluster("preempt-high"),
            verdict(AdmissionOutcome.ADMIT_AFTER_PREEMPTION, preempts=("c",), preempted_priority=500),
        ),
        ClusterAssessment(
            cluster("preempt-low"),
            verdict(AdmissionOutcome.ADMIT_AFTER_PREEMPTION, preempts=("d",), preempted_priority=100),
        ),
        ClusterAssessment(cluster("now"), verdict(AdmissionOutcome.ADMIT_NOW)),
    ) == [
        ("now", "admit-now"),
        ("preempt-low", "admit-after-preemption"),
        ("preempt-high", "admit-after-preemption"),
        ("preempt-two", "admit-after-preemption"),
        ("wait-short", "wait"),
        ("wait-long", "wait"),
        ("wait-unknown", "wait"),
    ]


def test_unsynced_is_ranked_last_never_fits_and_unreachable_are_left_out_with_notes() -> None:
    ranking = rank(
        [
            ClusterAssessment(cluster("syncing"), verdict(AdmissionOutcome.UNKNOWN), ContextHealth.NOT_SYNCED, "slow"),
            ClusterAssessment(cluster("down"), verdict(AdmissionOutcome.UNKNOWN), ContextHealth.UNREACHABLE, "gone"),
            ClusterAssessment(cluster("small"), verdict(AdmissionOutcome.NEVER_FITS)),
            ClusterAssessment(cluster("offline"), verdict(AdmissionOutcome.UNKNOWN)),
            ClusterAssessment(cluster("busy"), verdict(AdmissionOutcome.WAIT, expected_wait_seconds=10**6)),
        ]
    )
    assert [(r.cluster.context, r.standing) for r in ranking.clusters] == [
        ("busy", Standing.RANKED),
        ("offline", Standing.RANKED),
        ("syncing", Standing.RANKED),
        ("down", Standing.UNREACHABLE),
        ("small", Standing.NEVER_FITS),
    ]
    assert ranking.notes[0] == "context down skipped: gone"


def test_with_every_cluster_unreachable_the_offline_answers_stand_in() -> None:
    ranking = rank(
        [
            ClusterAssessment(cluster(c), verdict(AdmissionOutcome.UNKNOWN), ContextHealth.UNREACHABLE)
            for c in ("x", "y")
        ]
    )
    assert [r.cluster.context for r in ranking.ranked] == ["x", "y"]


class PerContext:
    """A view per context, with canned verdicts."""

    def __init__(self, verdicts: dict[str, AdmissionVerdict], classes: dict[str, dict[str, int]]) -> None:
        self.views = {
            c: FakeView(classes=classes.get(c, {"dev-priority": 100}), verdict=v) for c, v in verdicts.items()
        }

    def lookup(self, context: str | None) -> ContextView:
        return ContextView(self.views[str(context)])

    def warm(self, contexts: object) -> None:
        return None


TWO = config(
    kubernetes={"contexts": ["a", "b"]},
    teams={"team-b": {"clusters": [{"context": "a"}, {"context": "b", "local_queue": "team-b-remote"}]}},
)


def test_a_context_without_the_class_is_excluded_and_the_other_placed() -> None:
    views = PerContext(
        {"a": verdict(AdmissionOutcome.ADMIT_NOW), "b": verdict(AdmissionOutcome.ADMIT_NOW)},
        {"a": {"prod-priority": 1000}},
    )
    for v in views.views.values():
        v.queues = {("team-b", q): _facts(q) for q in ("team-b-lq", "team-b-remote")}
    decision = decide(request(task(team="team-b")), TWO, views)
    assert isinstance(decision, Placement)
    assert (decision.context, decision.local_queue) == ("b", "team-b-remote")
    assert [r.standing for r in decision.ranking.clusters] == [Standing.RANKED, Standing.EXCLUDED]


def test_no_team_can_name_another_teams_queue_or_context() -> None:
    foreign = task(team="team-b", overrides={"kubernetes": {"kueue": {"local_queue_name": "team-a-lq"}}})
    decision = decide(request(foreign), TWO)
    assert isinstance(decision, Rejection) and decision.code is RejectionCode.FOREIGN_QUEUE
    elsewhere = task(team="team-b", infra="k8s/c")
    decision = decide(request(elsewhere), TWO)
    assert isinstance(decision, Rejection) and decision.code is RejectionCode.FOREIGN_CONTEXT


def test_a_pinned_context_restricts_placement_to_it() -> None:
    decision = decide(request(task(team="team-b", infra="k8s/b")), TWO)
    assert isinstance(decision, Placement)
    assert [t.context for t in decision.targets] == ["b"]


def _facts(queue: str) -> QueueFacts:
    return QueueFacts("team-b", queue, "team-b-cq", True, True, True)


@pytest.mark.parametrize(
    ("teams", "reason"),
    [
        ({"team-b": {"context": "a", "clusters": [{"context": "a"}]}}, "set either context or clusters"),
        ({"team-b": {"clusters": [{"context": "a"}, {"context": "a"}]}}, "listed twice"),
        ({"team-b": {"clusters": [{"context": "z"}]}}, "'z' is not in kubernetes.contexts"),
        ({"team-b": {"clusters": [{"context": "a", "allowed_priority_classes": ["prod-priority"]}]}}, "not among"),
        (
            {"team-b": {"clusters": [{"context": "a", "namespace": "team-a", "local_queue": "team-a-lq"}]}},
            "already belongs to team",
        ),
    ],
)
def test_bad_cluster_lists_are_rejected(teams: dict[str, object], reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        config(kubernetes={"contexts": ["a", "b"]}, teams=teams)


def test_the_same_queue_name_on_two_clusters_belongs_to_each_teams_own_cluster() -> None:
    config(
        kubernetes={"contexts": ["a", "b"]},
        teams={
            "team-a": {"context": "a"},
            "team-b": {"clusters": [{"context": "b", "namespace": "team-a", "local_queue": "team-a-lq"}]},
        },
    )


def test_kubeconfig_is_found_as_kubectl_finds_it() -> None:
    present = {"/k/one", "/home/u/.kube/config"}

    def find(explicit: str | None, env: dict[str, str]) -> object:
        return find_kubeconfig(explicit, env, present.__contains__, lambda p: p.replace("~", "/home/u"))

    assert find("/cfg", {"KUBECONFIG": "/k/one"}) == find_kubeconfig("/cfg", {}, present.__contains__)
    found = find(None, {"KUBECONFIG": os.pathsep.join(["/k/missing", "/k/one"])})
    assert (found.path, found.source) == ("/k/one", KubeconfigSource.ENVIRONMENT)  # type: ignore[attr-defined]
    assert find(None, {}).source is KubeconfigSource.HOME  # type: ignore[attr-defined]
    assert find(None, {"KUBECONFIG": "/k/missing"}) is None  # kubectl does not fall back to ~/.kube
    present.clear()
    assert find(None, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}).source is KubeconfigSource.IN_CLUSTER  # type: ignore[attr-defined]


def test_allowed_contexts_come_from_the_workspace_first() -> None:
    skypilot_config = {
        "kubernetes": {"allowed_contexts": ["g1", "g2"]},
        "workspaces": {"ml": {"kubernetes": {"allowed_contexts": ["w1"]}}},
    }
    assert allowed_contexts(skypilot_config, "ml") == ("w1",)
    assert allowed_contexts(skypilot_config, "other") == ("g1", "g2")
    assert allowed_contexts({"kubernetes": {"allowed_contexts": "all"}}) == ()


def test_a_team_without_contexts_is_placed_over_skypilots_allowed_contexts() -> None:
    plain = config(kubernetes={"contexts": []})
    skypilot_config = {"kubernetes": {"allowed_contexts": ["x", "y"]}}
    decision = decide(request(task(team="team-b"), skypilot_config=skypilot_config), plain)
    assert isinstance(decision, Placement)
    assert [t.context for t in decision.targets] == ["x", "y"]


def test_placement_modules_import_no_io_library() -> None:
    """``socket`` is not checked: pydantic's standard-library imports load it, without I/O."""
    pure = ("sky_kueue.skypilot.placement", "sky_kueue.skypilot.cluster_discovery", "sky_kueue.skypilot.decision")
    code = (
        "import sys\n"
        + "".join(f"import {name}\n" for name in pure)
        + "bad = sorted(m for m in ('kubernetes', 'urllib3', 'sky', 'sqlite3', 'http.client') if m in sys.modules)\n"
        + "print(','.join(bad))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def test_live_views_keep_a_single_cluster_config_on_its_watched_context() -> None:
    from sky_kueue.skypilot.cluster_view import LiveContextViews
    from sky_kueue.skypilot.config_view import ConfigClusterView

    single = config(cluster={"context": "admin-name"})
    views = LiveContextViews(single, "/kubeconfig", ConfigClusterView(single))
    assert views.mirrored_context("sky-kueue-sandbox") == "admin-name"  # the config's one context
    assert views.mirrored_context(None) == "admin-name"
    assert views.mirrored_context("elsewhere") == "elsewhere"  # e.g. from SkyPilot's allowed_contexts
    assert LiveContextViews(single, None, ConfigClusterView(single)).mirrored_context("x") is None  # in-cluster
    several = config(kubernetes={"contexts": ["a", "b"]}, teams={"team-b": {"clusters": [{"context": "a"}]}})
    views = LiveContextViews(several, "/kubeconfig", ConfigClusterView(several))
    assert (views.mirrored_context("a"), views.mirrored_context("b")) == ("a", "b")


def test_a_cluster_where_the_task_never_fits_is_left_out_and_the_other_placed() -> None:
    views = PerContext(
        {"a": verdict(AdmissionOutcome.NEVER_FITS), "b": verdict(AdmissionOutcome.WAIT, expected_wait_seconds=60)}, {}
    )
    for v in views.views.values():
        v.queues = {("team-b", q): _facts(q) for q in ("team-b-lq", "team-b-remote")}
    decision = decide(request(task(team="team-b")), TWO, views)
    assert isinstance(decision, Placement)
    assert [(r.cluster.context, r.outcome) for r in decision.ranking.clusters] == [("b", "wait"), ("a", "never-fits")]
    assert [t.context for t in decision.targets] == ["b"]
    everywhere = PerContext({c: verdict(AdmissionOutcome.NEVER_FITS) for c in ("a", "b")}, {})
    for v in everywhere.views.values():
        v.queues = views.views["a"].queues
    rejected = decide(request(task(team="team-b")), TWO, everywhere)
    assert isinstance(rejected, Rejection) and rejected.code is RejectionCode.EXCEEDS_CAPACITY


def test_a_team_without_a_context_runs_on_every_configured_context_unless_one_is_the_default() -> None:
    pool = config(kubernetes={"contexts": ["a", "b"]})
    decision = decide(request(task(team="team-b")), pool)
    assert isinstance(decision, Placement) and [t.context for t in decision.targets] == ["a", "b"]
    pinned = config(kubernetes={"contexts": ["a", "b"], "default_context": "b"})
    decision = decide(request(task(team="team-b")), pinned)
    assert isinstance(decision, Placement) and [t.context for t in decision.targets] == ["b"]
