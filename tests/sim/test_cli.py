"""``sky-kueue simulate``: JSON contract, one-line errors with exit code 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sky_kueue.cli.main import cli


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["simulate", *args])


def test_json_output_has_the_issue_layout() -> None:
    result = invoke("--trace", "kueue-perf", "--jobs", "90", "--output", "json", "--quiet", "--eta-sample", "5")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data["policies"]) == {"baseline", "rank"}
    for policy in data["policies"].values():
        assert set(policy["classes"]) == {"low", "medium", "high"}
        for cls in policy["classes"].values():
            assert {"p50_wait_s", "p95_wait_s", "p99_wait_s", "max_wait_s", "starved"} <= set(cls)
        assert {
            "preemptions_per_job_mean",
            "preemptions_per_job_max",
            "lost_gpu_hours",
            "gpu_utilization",
            "bursts",
            "eta",
        } <= set(policy)
    assert data["targets"]["rank"]["reference"] == "baseline"
    assert data["trace"]["jobs"] == 90


def test_text_output_shows_the_comparison() -> None:
    result = invoke("--trace", "kueue-perf", "--jobs", "90", "--policies", "baseline,ladder", "--quiet")
    assert result.exit_code == 0, result.output
    assert "Targets against baseline" in result.output
    assert "ladder" in result.output


def one_line_error(result: Result, fragment: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: ") or lines[0].startswith("Error: ")
    assert fragment in lines[0]


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    one_line_error(invoke("--policies", "baseline,fifo"), "unknown policy 'fifo'")
    one_line_error(
        invoke("--trace", "nope"),
        "expected synthetic, kueue-perf, reclaim-storm, reclaim-storm-hot, dev-starvation or a CSV file path",
    )
    one_line_error(invoke("--policies", "rank+safe+safe"), "unknown policy 'rank+safe+safe'")
    one_line_error(invoke("--policies", "baseline,rank", "--safe-after", "2"), "apply to +safe policies")
    one_line_error(invoke("--policies", "rank+safe", "--safe-after", "0"), "Invalid value for '--safe-after'")
    one_line_error(
        invoke("--policies", "rank+safe", "--reserve-after", "60"), "--reserve-after is not modelled with +safe"
    )
    one_line_error(invoke("--jobs", "5", "--hours", "1"), "give --jobs or --hours, not both")
    one_line_error(invoke("--jobs", "0"), "Invalid value for '--jobs'")
    one_line_error(invoke("--aging-set", "max_age_seconds=-1"), "max_age_seconds")
    bad = tmp_path / "t.csv"
    bad.write_text("submit_time,duration,gpus,priority_class,team\n0,60,x,low,a\n", encoding="utf-8")
    one_line_error(invoke("--trace", str(bad)), "t.csv:2: column 'gpus'")


def test_plot_without_matplotlib_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    one_line_error(
        invoke("--trace", "kueue-perf", "--jobs", "30", "--plot", str(tmp_path / "p.png")),
        "--plot needs matplotlib",
    )


@pytest.mark.slow  # draws with matplotlib
def test_plot_is_written_when_matplotlib_is_installed(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "waits.png"
    result = invoke("--trace", "kueue-perf", "--jobs", "60", "--quiet", "--plot", str(path))
    assert result.exit_code == 0, result.output
    assert path.stat().st_size > 0


def test_allow_burst_and_checkpoints_reach_the_json_report() -> None:
    import json

    result = invoke(
        "--trace", "reclaim-storm-hot", "--hours", "24", "--policies", "baseline,keep-place",
        "--allow-burst", "--checkpoint-every", "1800", "--reserve-after", "3600", "--output", "json", "--quiet",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    baseline, policy = report["policies"]["baseline"], report["policies"]["keep-place"]
    assert baseline["reservations"] > 0 and baseline["held_back_workloads"] > 0
    assert baseline["bursts"] == baseline["burst_gpu_hours"] == 0  # SkyPilot alone never bursts on preemption
    assert policy["bursts"] > 0 and policy["burst_gpu_hours"] > 0 and policy["burst_cost_usd"] > 0
    for figures in (baseline, policy):
        preempted = figures["preempted_jobs"]
        assert set(preempted) >= {
            "count", "p50_wait_after_preemption_s", "p99_wait_after_preemption_s",
            "max_wait_after_preemption_s", "max_preemptions", "relaunch_starved",
        }  # fmt: skip
        assert 0 <= preempted["p50_wait_after_preemption_s"] <= preempted["p99_wait_after_preemption_s"]
        assert preempted["p99_wait_after_preemption_s"] <= preempted["max_wait_after_preemption_s"]


def test_reserve_after_is_refused_with_several_clusters() -> None:
    result = invoke("--trace", "reclaim-storm", "--hours", "2", "--clusters", "2", "--reserve-after", "60", "--quiet")
    assert result.exit_code != 0
    assert "--reserve-after is modelled for one cluster" in result.output
    assert "Traceback" not in result.output


def test_safe_relaunch_reaches_the_json_report() -> None:
    result = invoke(
        "--trace", "dev-starvation", "--hours", "8", "--policies", "baseline,rank+safe",
        "--safe-after", "1", "--safe-max-hold", "900", "--output", "json", "--quiet",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    safe = report["policies"]["rank+safe"]["safe_relaunch"]
    assert safe["holds"] > 0
    assert safe["holds"] >= safe["released_safe"] + safe["released_timeout"]
    assert report["policies"]["baseline"]["safe_relaunch"]["holds"] == 0
    for figures in report["policies"].values():
        preempted = figures["preempted_jobs"]
        assert preempted["completed"] > 0
        assert 1.0 <= preempted["p50_completion_inflation"] <= preempted["p99_completion_inflation"]
        assert preempted["p99_completion_inflation"] <= preempted["max_completion_inflation"]
        assert preempted["wasted_gpu_hours_per_preempted_job"] > 0


def test_safe_hold_unpredicted_holds_where_the_default_does_not() -> None:
    """The default holds a relaunch only when a safe place is predicted within the hold; the
    flag holds the others too, so the same trace sees more holds (12 h of dev-starvation, seed
    0: 19 holds by default, 24 with the flag)."""
    common = (
        "--trace", "dev-starvation", "--hours", "12", "--policies", "keep-place+safe",
        "--aging-set", "policy=keep-place", "--aging-set", "protect_levels=1",
        "--aging-set", "protect_within_nominal=true", "--output", "json", "--quiet",
    )  # fmt: skip
    default = invoke(*common)
    always = invoke(*common, "--safe-hold-unpredicted")
    assert default.exit_code == 0, default.output
    assert always.exit_code == 0, always.output
    held = json.loads(always.output)["policies"]["keep-place+safe"]["safe_relaunch"]["holds"]
    assert held > json.loads(default.output)["policies"]["keep-place+safe"]["safe_relaunch"]["holds"]
    one_line_error(invoke("--policies", "rank", "--safe-hold-unpredicted"), "apply to +safe policies")


def _predicted_bursts(*args: str) -> int:
    result = invoke(
        "--trace", "reclaim-storm", "--hours", "12", "--policies", "rank+predicted", "--allow-burst",
        "--output", "json", "--quiet", *args,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["policies"]["rank+predicted"]["bursts"]


def test_the_predicted_burst_gate_takes_its_margin_and_the_simulated_cloud_start_up() -> None:
    # A wait above 600 s + 0 bursts; no wait within the horizon exceeds 600 s + 100,000 s, so
    # only beyond-the-horizon waits and the relaunch's admission timeout burst then.
    eager, strict = (
        _predicted_bursts("--predicted-wait-margin", "0"),
        _predicted_bursts("--predicted-wait-margin", "1e5"),
    )
    assert eager > strict
    # The gate compares with the simulated start-up unless told otherwise: a 100,000-s cloud
    # raises its threshold as the margin did, and --predicted-cloud-startup 0 lowers it again.
    assert _predicted_bursts("--cloud-startup", "1e5") == strict
    assert _predicted_bursts("--cloud-startup", "1e5", "--predicted-cloud-startup", "0") > strict


def test_the_gate_options_need_a_predicted_policy_and_seconds_at_least_zero() -> None:
    one_line_error(invoke("--policies", "rank", "--predicted-wait-margin", "60"), "apply to +predicted policies")
    one_line_error(invoke("--policies", "rank", "--predicted-cloud-startup", "60"), "apply to +predicted policies")
    one_line_error(
        invoke("--policies", "rank+predicted", "--predicted-wait-margin", "-1"),
        "Invalid value for '--predicted-wait-margin'",
    )


def test_the_gate_bound_bursts_more_the_fewer_stays_it_allows() -> None:
    # --predicted-wait-max-stays 0 bursts every due relaunch; the default (1) bursts the second
    # one whatever the prediction; unbounded keeps every relaunch the prediction keeps.
    none, one, unbounded = (
        _predicted_bursts("--predicted-wait-max-stays", "0"),
        _predicted_bursts(),
        _predicted_bursts("--predicted-wait-max-stays", "unbounded"),
    )
    assert none >= one >= unbounded and none > unbounded
    assert _predicted_bursts("--predicted-wait-max-stays", "1") == one


def test_the_gate_bound_needs_a_predicted_policy_and_a_count() -> None:
    one_line_error(invoke("--policies", "rank", "--predicted-wait-max-stays", "1"), "apply to +predicted policies")
    for bad in ("-1", "1.5", "forever"):
        one_line_error(
            invoke("--policies", "rank+predicted", "--predicted-wait-max-stays", bad),
            "Invalid value for '--predicted-wait-max-stays'",
        )
