"""``aging.protect_within_nominal`` is refused with a policy that never protects.

Why: the setting withholds a readmitted relaunch's *protected* band level; only the band
policies that protect (``keep-place``, ``protect``) have one. With any other policy it would be
accepted and silently do nothing, so the settings refuse the combination when they are built,
in one line naming the key and the policies it applies to.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from sky_kueue.controller import aging
from sky_kueue.controller.aging import AgingSettings, SettingsError
from sky_kueue.controller.aging.settings import protecting_policies
from sky_kueue.sim import policies
from sky_kueue.skypilot.config import ConfigError, parse_config

PROTECTING = ("keep-place", "protect")
NEVER_PROTECTING = tuple(name for name in aging.policy_names() if name not in PROTECTING)

CONFIG = """\
priority_classes:
  dev: 100
teams:
  team-b:
    namespace: team-b
    local_queue: dev
    priority_classes:
      allowed: [dev]
      default: dev
aging:
  parameters:
    policy: {policy}
    protect_within_nominal: {value}
"""


def test_the_protecting_policies_are_the_band_policies_with_protection() -> None:
    assert protecting_policies() == PROTECTING
    assert {"rank", "bounded"} <= set(NEVER_PROTECTING)


@pytest.mark.parametrize("policy", PROTECTING)
def test_a_protecting_policy_takes_the_setting(policy: str) -> None:
    settings = AgingSettings.from_mapping({"policy": policy, "protect_within_nominal": True})
    assert settings.protect_within_nominal is True
    assert AgingSettings.from_mapping(settings.to_mapping()) == settings


@pytest.mark.parametrize("policy", NEVER_PROTECTING)
def test_a_policy_that_never_protects_is_refused_in_one_line(policy: str) -> None:
    with pytest.raises(SettingsError) as err:
        AgingSettings.from_mapping({"policy": policy, "protect_within_nominal": True})
    assert str(err.value) == (
        "aging.protect_within_nominal: applies only to the policies that protect readmitted relaunches "
        f"(keep-place, protect), not to policy {policy!r}"
    )
    assert AgingSettings.from_mapping({"policy": policy, "protect_within_nominal": False}).policy == policy


def test_the_default_policy_is_refused_too_and_direct_construction_is_validated() -> None:
    with pytest.raises(SettingsError, match=r"^aging\.protect_within_nominal: .* not to policy 'none'$"):
        AgingSettings.from_mapping({"protect_within_nominal": True})
    with pytest.raises(ValueError, match="not to policy 'none'"):
        AgingSettings(protect_within_nominal=True)
    on = AgingSettings(policy="keep-place", protect_within_nominal=True)
    with pytest.raises(ValueError, match="not to policy 'bounded'"):
        dataclasses.replace(on, policy="bounded")


@pytest.mark.parametrize(
    ("parameters", "expected"),
    [
        (
            {"policy": "rank", "protect_within_nominal": True},
            "f.yaml: aging.parameters.protect_within_nominal: applies only to the policies that protect",
        ),
        (
            {"policy": "keep-place", "protect_within_nominal": "yes"},
            "f.yaml: aging.parameters.protect_within_nominal: expected true or false, got 'yes'",
        ),
    ],
)
def test_the_plugin_section_refuses_in_one_line(parameters: dict[str, Any], expected: str) -> None:
    with pytest.raises(SettingsError) as err:
        AgingSettings.from_plugin_section(parameters, where="f.yaml: aging.parameters")
    assert str(err.value).startswith(expected) and "\n" not in str(err.value)


def test_sky_kueue_yaml_accepts_the_key_and_names_a_bad_value_with_its_line() -> None:
    config = parse_config(CONFIG.format(policy="keep-place", value="true"), "sky-kueue.yaml")
    assert config.aging.parameters == {"policy": "keep-place", "protect_within_nominal": True}
    settings = AgingSettings.from_plugin_section(config.aging.parameters)
    assert settings.protect_within_nominal is True

    for policy, value, reason in (
        ("keep-place", '"yes"', "expected true or false, got 'yes'"),
        ("rank", "true", "applies only to the policies that protect readmitted relaunches (keep-place, protect)"),
    ):
        with pytest.raises(ConfigError) as err:
            parse_config(CONFIG.format(policy=policy, value=value), "sky-kueue.yaml")
        assert str(err.value).startswith(f"sky-kueue.yaml:13: aging.parameters.protect_within_nominal: {reason}")
        assert "\n" not in str(err.value)


def test_the_simulator_still_resolves_every_policy_with_default_settings() -> None:
    # The simulator compares policies under one AgingSettings; the default settings (policy none,
    # setting off) still serve rank, and a protecting settings object still serves a rank policy alongside.
    rank = policies.resolve("rank", AgingSettings())
    assert isinstance(rank, policies.RegistryPolicy) and rank.settings.protect_within_nominal is False
    for name in policies.names():
        policies.resolve(name, AgingSettings())
    on = AgingSettings(policy="keep-place", protect_levels=1, protect_within_nominal=True)
    assert policies.resolve("rank", on).name == "rank"
    assert policies.resolve("keep-place+safe", on).name == "keep-place+safe"
