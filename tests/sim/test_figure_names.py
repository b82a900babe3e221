"""``sky-kueue simulate --plot`` and the Grafana dashboard call the same figures by the same
names (issue 25): every figure of :data:`~sky_kueue.sim.figure_names.SHARED_FIGURES` is a
dashboard panel of that title querying that series, and a plot panel of that title whose y
axis names the series. (The whole plot is drawn by ``test_cli``'s ``--plot`` test; here the
per-team panels are drawn on a recording stand-in for matplotlib's axes, so no import.)"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from sky_kueue.sim import plots
from sky_kueue.sim.compare import Comparison
from sky_kueue.sim.figure_names import (
    BURSTS_PER_TEAM,
    JOBS_STARVING,
    PREEMPTIONS_PER_TEAM,
    RELAUNCHES_PER_TEAM,
    SHARED_DISTRIBUTIONS,
    SHARED_FIGURES,
    WAIT_AFTER_PREEMPTION,
)
from sky_kueue.sim.results import JobOutcome

DASHBOARD = Path(__file__).resolve().parents[2] / "configs" / "grafana" / "sky-kueue-dashboard.json"
HOUR_SECONDS = 3_600.0


class _Axes:
    """Records what a panel was called."""

    def __init__(self) -> None:
        self.title = self.ylabel = ""
        self.bar_labels: list[str] = []

    def set_title(self, title: str) -> None:
        self.title = title

    def set_ylabel(self, label: str, **_: Any) -> None:
        self.ylabel = label

    def bar(self, *_: Any, label: str, **__: Any) -> None:
        self.bar_labels.append(label)

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def _job(
    team: str,
    *,
    preemptions: int = 0,
    launches: int = 1,
    wait_s: float = 0.0,
    burst: bool = False,
    after_preemption_s: float | None = None,
) -> Any:
    outcome = JobOutcome.BURST if burst else JobOutcome.FINISHED
    return SimpleNamespace(
        team=team,
        preemptions=preemptions,
        launches=launches,
        wait_s=wait_s,
        duration_s=60.0,
        outcome=outcome,
        wait_after_preemption_s=after_preemption_s,
    )


def _comparison() -> Comparison:
    baseline = [_job("a", preemptions=2, launches=3, wait_s=2 * HOUR_SECONDS), _job("b")]
    policy = [_job("a", preemptions=1, launches=2, burst=True), _job("b", preemptions=1, launches=2)]
    runs = {"baseline": SimpleNamespace(jobs=baseline), "keep-place": SimpleNamespace(jobs=policy)}
    return cast(Comparison, SimpleNamespace(runs=runs))


def test_the_dashboard_has_a_panel_per_shared_figure_querying_its_series() -> None:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    titles = [panel["title"] for panel in panels]
    for shared in SHARED_FIGURES + SHARED_DISTRIBUTIONS:
        assert titles.count(shared.title) == 1, (shared.title, titles)
        panel = panels[titles.index(shared.title)]
        assert any(shared.metric in target["expr"] for target in panel["targets"]), panel["targets"]
    # One name, one figure: no other panel borrows a shared title as a prefix.
    for title in titles:
        assert not any(title != s.title and title.startswith(s.title) for s in SHARED_FIGURES), title


def test_the_plot_titles_and_labels_its_panels_as_the_dashboard() -> None:
    comparison = _comparison()
    for shared in SHARED_FIGURES:
        ax = _Axes()
        plots.team_bars(ax, shared, plots.per_team(comparison, shared))
        assert (ax.title, ax.ylabel) == (shared.title, shared.axis_label)
        assert shared.metric in shared.axis_label
        assert ax.bar_labels == ["baseline", "keep-place"]


def test_the_plot_counts_per_team_as_the_controller_counts() -> None:
    comparison = _comparison()
    assert plots.per_team(comparison, PREEMPTIONS_PER_TEAM) == {
        "baseline": {"a": 2, "b": 0},
        "keep-place": {"a": 1, "b": 1},
    }
    # A relaunch is a launch after the first (the controller counts the new Workload).
    assert plots.per_team(comparison, RELAUNCHES_PER_TEAM)["baseline"] == {"a": 2, "b": 0}
    # Starving: waited more than 10x the run and more than an hour.
    assert plots.per_team(comparison, JOBS_STARVING)["baseline"] == {"a": 1, "b": 0}
    assert plots.per_team(comparison, BURSTS_PER_TEAM)["keep-place"] == {"a": 1, "b": 0}


def test_the_plot_draws_wait_after_preemption_as_the_dashboards_p50_and_p99_per_team() -> None:
    waits = [100.0 * (i + 1) for i in range(100)]  # 100 s .. 10,000 s
    baseline = [_job("a", preemptions=1, launches=2, after_preemption_s=w) for w in waits] + [_job("b")]
    policy = [_job("a", preemptions=1, launches=2, after_preemption_s=50.0), _job("b", preemptions=1)]
    runs = {"baseline": SimpleNamespace(jobs=baseline), "keep-place": SimpleNamespace(jobs=policy)}
    comparison = cast(Comparison, SimpleNamespace(runs=runs))

    quantiles = plots.per_team_quantiles(comparison, WAIT_AFTER_PREEMPTION)

    # Team b has no job with a wait after preemption (never preempted; preempted, never readmitted).
    assert set(quantiles["baseline"]) == {"a"} and set(quantiles["keep-place"]) == {"a"}
    assert quantiles["baseline"]["a"][50] < quantiles["baseline"]["a"][99] <= 10_000.0
    assert quantiles["baseline"]["a"][99] >= 9_900.0
    assert quantiles["keep-place"]["a"] == {50: 50.0, 99: 50.0}
    ax = _Axes()
    plots.team_quantiles(ax, WAIT_AFTER_PREEMPTION, quantiles)
    assert (ax.title, ax.ylabel) == (WAIT_AFTER_PREEMPTION.title, WAIT_AFTER_PREEMPTION.axis_label)
    assert ax.bar_labels == ["baseline p50", "keep-place p50"]
