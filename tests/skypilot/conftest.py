"""Fixtures for the SkyPilot front-door tests.

``sky_env`` imports SkyPilot (once per process) with ``HOME``, ``SKYPILOT_GLOBAL_CONFIG`` and
``SKYPILOT_PROJECT_CONFIG`` pointing into a temporary directory (``skypilot.md`` §5.1) and
the global config naming ``KueuePolicy``; SkyPilot's config is reloaded so the isolation
holds even if another test package imported SkyPilot first, and the environment is restored
after each module so other test packages never see it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from tests.skypilot.builders import DEMO_CONFIG

POLICY_PATH = "sky_kueue.skypilot.policy.KueuePolicy"


@dataclass(frozen=True)
class SkyEnv:
    """The isolated SkyPilot environment."""

    sky: ModuleType
    home: Path
    global_config: Path


@dataclass(frozen=True)
class SkyHome:
    """Files of the isolated environment, created once per session."""

    home: Path
    global_config: Path
    project_config: Path


@pytest.fixture(scope="session")
def sky_home(tmp_path_factory: pytest.TempPathFactory) -> SkyHome:
    home = tmp_path_factory.mktemp("sky-home")
    global_config = home / "global-config.yaml"
    global_config.write_text(f"admin_policy: {POLICY_PATH}\n")
    project_config = home / "project-config.yaml"
    project_config.write_text("")
    return SkyHome(home, global_config, project_config)


@pytest.fixture(scope="module")
def sky_env(sky_home: SkyHome) -> Iterator[SkyEnv]:
    """SkyPilot with the isolated environment, for one test module (restored afterwards)."""
    patch = pytest.MonkeyPatch()
    patch.setenv("HOME", str(sky_home.home))
    patch.setenv("SKYPILOT_GLOBAL_CONFIG", str(sky_home.global_config))
    patch.setenv("SKYPILOT_PROJECT_CONFIG", str(sky_home.project_config))
    patch.setenv("SKY_KUEUE_CONFIG", str(DEMO_CONFIG))
    for name in ("SKYPILOT_CONFIG", "SKYPILOT_API_SERVER_ENDPOINT", "NETRC"):
        patch.delenv(name, raising=False)
    import sky
    from sky import skypilot_config
    from sky.utils import registry

    from sky_kueue.controller.skypilot_plugin import register_strategy

    skypilot_config.reload_config()
    strategies = dict(registry.JOBS_RECOVERY_STRATEGY_REGISTRY)
    # An API server with the sky-kueue plugin loaded (configs/plugins.yaml) knows KUEUE_AGING.
    register_strategy()
    try:
        yield SkyEnv(sky=sky, home=sky_home.home, global_config=sky_home.global_config)
    finally:
        registry.JOBS_RECOVERY_STRATEGY_REGISTRY.clear()
        registry.JOBS_RECOVERY_STRATEGY_REGISTRY.update(strategies)
        patch.undo()
        skypilot_config.reload_config()
