"""The ``aging:`` config section: every tunable has a named default and a validated key."""

from __future__ import annotations

from typing import Any

import pytest

from sky_kueue.controller.aging import ActuatorKind, AgingSettings, PriorityClassRung, SettingsError
from sky_kueue.controller.aging import settings as defaults


def test_defaults_are_the_named_constants() -> None:
    s = AgingSettings()
    assert (s.policy, s.preemptions_per_step, s.boost_per_step) == (
        defaults.DEFAULT_POLICY_NAME,
        defaults.DEFAULT_PREEMPTIONS_PER_STEP,
        defaults.DEFAULT_BOOST_PER_STEP_POINTS,
    )
    assert (s.max_age_seconds, s.age_weight, s.max_boost) == (
        defaults.DEFAULT_MAX_AGE_SECONDS,
        defaults.DEFAULT_AGE_WEIGHT_POINTS,
        defaults.DEFAULT_MAX_BOOST_POINTS,
    )
    assert (s.min_run_before_reboost_seconds, s.decay_after_run_seconds, s.decay_factor) == (
        defaults.DEFAULT_MIN_RUN_BEFORE_REBOOST_SECONDS,
        defaults.DEFAULT_DECAY_AFTER_RUN_SECONDS,
        defaults.DEFAULT_DECAY_FACTOR,
    )
    assert s.actuator is ActuatorKind.AUTO and s.priority_class_ladder == ()


@pytest.mark.parametrize("empty", [None, {}])
def test_an_absent_or_empty_section_means_all_defaults(empty: Any) -> None:
    assert AgingSettings.from_mapping(empty) == AgingSettings()


def test_every_key_round_trips_through_the_mapping_form() -> None:
    custom = AgingSettings.from_mapping(
        {
            "policy": "ladder",
            "preemptions_per_step": 3,
            "boost_per_step": 50,
            "max_age_seconds": 7200,
            "age_weight": 10,
            "max_boost": 300,
            "ceiling_priority": 900,
            "cap_at_preemptor_priority": False,
            "min_run_before_reboost_seconds": 0,
            "decay_after_run_seconds": 60.5,
            "decay_factor": 0,
            "burst_after_preemptions": 5,
            "burst_max_predicted_wait_seconds": 1800,
            "actuator": "priority-class",
            "priority_class_ladder": [{"name": "dev-aged-2", "value": 300}, {"name": "dev-aged-1", "value": 200}],
        }
    )
    assert custom.max_age_seconds == 7200.0 and isinstance(custom.max_age_seconds, float)
    assert custom.priority_class_ladder == (PriorityClassRung(200, "dev-aged-1"), PriorityClassRung(300, "dev-aged-2"))
    assert AgingSettings.from_mapping(custom.to_mapping()) == custom
    assert set(custom.to_mapping()) == set(AgingSettings.keys())


def test_a_ladder_may_also_be_written_as_a_mapping() -> None:
    s = AgingSettings.from_mapping({"priority_class_ladder": {"aged-1": 150, "aged-0": 100}})
    assert [r.name for r in s.priority_class_ladder] == ["aged-0", "aged-1"]


def test_an_unknown_key_is_named_with_a_suggestion_and_the_file() -> None:
    with pytest.raises(SettingsError) as err:
        AgingSettings.from_mapping({"max_age": 3600}, where="/etc/sky-kueue.yaml: aging")
    message = str(err.value)
    assert message.startswith("/etc/sky-kueue.yaml: aging: unknown key 'max_age' (did you mean 'max_age_seconds'?)")
    assert "\n" not in message


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("preemptions_per_step", True, "aging.preemptions_per_step: expected an integer, got True"),
        ("preemptions_per_step", 1.5, "expected an integer"),
        ("preemptions_per_step", 0, "aging.preemptions_per_step: expected a value >= 1, got 0"),
        ("boost_per_step", -1, "aging.boost_per_step: expected a value >= 0, got -1"),
        ("max_boost", None, "aging.max_boost: a value is required, got null"),
        ("max_age_seconds", "1d", "aging.max_age_seconds: expected a number, got '1d'"),
        ("max_age_seconds", 0, "aging.max_age_seconds: expected a value > 0.0, got 0"),
        ("min_run_before_reboost_seconds", -1, "aging.min_run_before_reboost_seconds: expected a value >= 0"),
        ("max_age_seconds", float("inf"), "aging.max_age_seconds: expected a finite number, got inf"),
        ("decay_factor", 1.5, "aging.decay_factor: expected a value <= 1.0, got 1.5"),
        ("cap_at_preemptor_priority", "yes", "aging.cap_at_preemptor_priority: expected true or false, got 'yes'"),
        ("ceiling_priority", 2**31, "aging.ceiling_priority: expected a value <= 2147483647"),
        ("burst_after_preemptions", 0, "aging.burst_after_preemptions: expected a value >= 1, got 0"),
        (
            "policy",
            "fifo",
            "aging.policy: unknown policy 'fifo'; known policies: "
            "age, bounded, keep-place, ladder, none, protect, rank",
        ),
        ("policy", 3, "aging.policy: expected a name, got 3"),
        ("actuator", "magic", "aging.actuator: expected one of auto, boost-annotation, spec-priority"),
        ("priority_class_ladder", "aged", "aging.priority_class_ladder: expected a list of {name, value}"),
        ("priority_class_ladder", [{"name": "a"}], "aging.priority_class_ladder[0].value: expected an integer"),
        ("priority_class_ladder", [{"name": "a", "value": 1, "x": 2}], "[0]: unknown key 'x'"),
        ("priority_class_ladder", [{"name": "Aged_1", "value": 1}], "'Aged_1' is not a valid WorkloadPriorityClass"),
        (
            "priority_class_ladder",
            [{"name": "a", "value": 1}, {"name": "a", "value": 2}],
            "WorkloadPriorityClass 'a' is listed twice",
        ),
    ],
)
def test_a_bad_value_is_rejected_with_one_precise_line(key: str, value: Any, expected: str) -> None:
    with pytest.raises(SettingsError) as err:
        AgingSettings.from_mapping({key: value})
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_the_priority_class_actuator_needs_a_ladder() -> None:
    with pytest.raises(SettingsError, match="'priority-class' needs a non-empty priority_class_ladder"):
        AgingSettings.from_mapping({"actuator": "priority-class"})


def test_the_section_must_be_a_mapping() -> None:
    with pytest.raises(SettingsError, match="aging: expected a mapping of settings, got list"):
        AgingSettings.from_mapping([1, 2])  # type: ignore[arg-type]


def test_direct_construction_is_validated_too() -> None:
    with pytest.raises(ValueError, match="decay_factor"):
        AgingSettings(decay_factor=2.0)


def test_sky_kueue_yaml_carries_the_tunables_under_parameters_and_the_ladder_by_name() -> None:
    s = AgingSettings.from_plugin_section({"max_boost": 300}, [("dev", 100), ("dev-aged-1", 200)])
    assert s.max_boost == 300
    assert s.priority_class_ladder == (PriorityClassRung(100, "dev"), PriorityClassRung(200, "dev-aged-1"))
    explicit = AgingSettings.from_plugin_section({"priority_class_ladder": {"x": 1}}, [("dev", 100)])
    assert [r.name for r in explicit.priority_class_ladder] == ["x"]
    with pytest.raises(SettingsError, match=r"^f\.yaml: aging\.parameters: unknown key 'boost'"):
        AgingSettings.from_plugin_section({"boost": 1}, where="f.yaml: aging.parameters")
