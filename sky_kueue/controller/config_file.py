"""The controller's view of ``sky-kueue.yaml``: the aging settings, validated once.

Why one loader: ``sky-kueue controller run``, ``sky-kueue aging explain`` and the SkyPilot
recovery-strategy plugin must agree on what the ``aging:`` section means. The whole file is
validated by :func:`sky_kueue.skypilot.config.load_config` (the same loader the admin
policy uses); the tunables come from ``aging.parameters``
(:meth:`AgingSettings.from_plugin_section`) and the ladder from ``aging.ladder`` with the
values in ``priority_classes``.

``aging.enabled: false`` keeps the controller useful as a recorder: history is kept and
decisions are computed (``aging explain`` shows them), but nothing is patched.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from sky_kueue.controller.aging import ActuatorKind, AgingSettings, SettingsError
from sky_kueue.controller.burst_gate import BurstGates, burst_gates
from sky_kueue.controller.lane_route import Lanes, TeamLane

if TYPE_CHECKING:
    from sky_kueue.skypilot.config import PluginConfig


class ConfigFileError(ValueError):
    """The config file cannot be used; the message is one line naming file and key."""


@dataclass(frozen=True)
class ControllerConfig:
    """What the controller and the recovery strategy need from ``sky-kueue.yaml``."""

    path: Path
    aging: AgingSettings
    enabled: bool
    strategy: str | None
    priority_classes: dict[str, int]
    #: Kubernetes contexts some team names as a burst target (``burst.clouds: [k8s/<context>]``):
    #: the recovery strategy may send a relaunch there, as it does to a public cloud.
    burst_contexts: frozenset[str] = frozenset()
    #: The teams' predicted-wait burst gates (``teams.<t>.burst``), by namespace.
    burst_gates: BurstGates = field(default_factory=BurstGates)
    #: The teams' relaunch lanes (``teams.<t>.lane``).
    lanes: Lanes = field(default_factory=Lanes)
    #: The extended resource SkyPilot accelerators map to (``kubernetes.gpu_resource``).
    gpu_resource: str = "nvidia.com/gpu"
    #: Every team's namespace (``teams.<t>.namespace`` and those of ``teams.<t>.clusters``),
    #: sorted: where SkyPilot creates the teams' pods, so where the controller watches pods.
    team_namespaces: tuple[str, ...] = ()


def load_controller_config(path: str | os.PathLike[str]) -> ControllerConfig:
    """Reads and validates ``sky-kueue.yaml`` for the controller.

    Raises:
        ConfigFileError: missing or unreadable file, invalid config, or a bad aging setting.
    """
    config_path, config = read_plugin_config(path)
    from sky_kueue.skypilot.config import burst_context  # pydantic: only when a file is read

    try:
        ladder = config.aging_ladder()
    except KeyError as err:
        raise ConfigFileError(f"{config_path}: aging.ladder: unknown priority class {err}") from None
    try:
        settings = AgingSettings.from_plugin_section(
            config.aging.parameters, ladder, where=f"{config_path}: aging.parameters"
        )
    except SettingsError as err:
        raise ConfigFileError(str(err)) from None
    if not config.aging.enabled:
        settings = replace(settings, actuator=ActuatorKind.RECORD_ONLY)
    return ControllerConfig(
        path=config_path,
        aging=settings,
        enabled=config.aging.enabled,
        strategy=config.aging.strategy,
        priority_classes=dict(config.priority_classes),
        burst_contexts=frozenset(
            context
            for team in config.teams.values()
            for infra in (team.burst.clouds if team.burst else ())
            if (context := burst_context(infra)) is not None
        ),
        burst_gates=burst_gates(config),
        lanes=lanes_of(config),
        gpu_resource=config.kubernetes.gpu_resource,
        team_namespaces=tuple(
            sorted({cluster.namespace for team in config.teams.values() for cluster in config.team_clusters(team)})
        ),
    )


def lanes_of(config: PluginConfig) -> Lanes:
    """The teams' relaunch lanes (``teams.<t>.lane``), each in every namespace the team has."""
    return Lanes(
        {
            name: TeamLane(
                team=name,
                namespaces=tuple(dict.fromkeys(c.namespace for c in config.team_clusters(team))),
                local_queue=team.lane.local_queue,
                after_preemptions=team.lane.after_preemptions,
                cluster_queue=team.lane.cluster_queue,
                capacity=team.lane.capacity(),
            )
            for name, team in config.teams.items()
            if team.lane is not None
        }
    )


def read_plugin_config(path: str | os.PathLike[str]) -> tuple[Path, PluginConfig]:
    """The file's path (``~`` expanded) and its config, validated as the admin policy validates it.

    Why one reader: the controller reads ``sky-kueue.yaml`` for the aging settings (here), the
    teams' safe-relaunch holds (:mod:`.hold_config`) and the metrics' teams
    (:mod:`.metric_teams`); a missing or invalid file is reported the same way by all three.

    Raises:
        ConfigFileError: missing or unreadable file, or an invalid config (one line).
    """
    config_path = Path(os.path.expanduser(os.fspath(path)))
    if not config_path.is_file():
        raise ConfigFileError(f"config file {config_path} does not exist")
    from sky_kueue.skypilot.config import ConfigError, load_config  # pydantic: only when a file is read

    try:
        return config_path, load_config(config_path)
    except ConfigError as err:
        raise ConfigFileError(str(err)) from None
