"""The demo's settings: the shipped plugin config, and the few changes each run says it makes.

Why a file and a list of changes: the demo must show what a user gets from
``configs/sky-kueue.yaml``, not from settings of its own. Each run starts from
``configs/sky-kueue-demo.yaml`` (the same setup with open teams; shipped in the package as
``sky_kueue/data/sky-kueue-demo.yaml``, a link to it), applies the :class:`Change` entries it
names, writes the result to a file and loads it with the loaders the product uses
(:func:`sky_kueue.controller.config_file.load_controller_config`, which validates the whole
file with the admin policy's loader). The demo prints every change with its reason.

The three runs of the starvation scenario:

* **no aging**: ``aging.enabled: false``; the controller records preemptions and changes
  nothing, and nothing bursts.
* **boost**: ``aging.parameters.policy: bounded``, the boost policy, which lifts a relaunch's
  priority (every ``preemptions_per_step`` preemptions, 2 by default).
* **rank + burst**: the opt-in ordering policy ``rank`` (the default, ``none``, only records:
  no ordering policy does no harm on every measured trace, so none is on by default) with what
  ``configs/sky-kueue.yaml`` says to add where a team may burst: ``teams.team-b.burst`` naming the demo's second cluster
  (``k8s/sky-kueue-burst``, standing in for a cloud Kubernetes cluster or another Kueue
  cluster), ``burst_after_preemptions: 1``, ``burst_max_predicted_wait_seconds: 900`` and
  ``strategy: KUEUE_AGING``, the recovery strategy that sends a preempted job's relaunch to
  those targets (:mod:`sky_kueue.controller.skypilot_plugin`). team-b's ``burst:`` section
  gives it the predicted-wait gate with the shipped defaults (``cloud_startup_seconds`` 600,
  ``predicted_wait_margin_seconds`` 300, ``predicted_wait_gate`` on), so a preemption bursts
  the job only when the controller predicts its relaunch would wait more than 900 s on-prem.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from sky_kueue.controller.config_file import ControllerConfig, load_controller_config

#: The shipped demo config inside the package (a link to ``configs/sky-kueue-demo.yaml``).
DEMO_CONFIG_RESOURCE = "sky-kueue-demo.yaml"
#: The on-prem Kueue cluster's kubeconfig context (the sandbox's default name).
ONPREM_CONTEXT = "sky-kueue-sandbox"
#: The second cluster's context: team-b's burst target in the default run.
BURST_CONTEXT = "sky-kueue-burst"
#: How long team-b tolerates a predicted wait before bursting (configs/sky-kueue.yaml's example).
BURST_MAX_WAIT_SECONDS = 900


@dataclass(frozen=True)
class Change:
    """One setting a run changes from the shipped config, with the reason the demo prints."""

    key: str
    value: Any
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value, "why": self.why}


@dataclass(frozen=True)
class RunSpec:
    """One run of the starvation scenario: its name, its label, its changes."""

    name: str
    label: str
    changes: tuple[Change, ...]


BURST_CHANGES = (
    Change(
        "teams.team-b.burst",
        {"max_queue_wait_seconds": BURST_MAX_WAIT_SECONDS, "clouds": [f"k8s/{BURST_CONTEXT}"]},
        f"team-b may burst, to the second cluster (context {BURST_CONTEXT}); configs/sky-kueue.yaml gives "
        "team-a clouds instead, which a machine with no cloud account cannot reach; the predicted-wait gate "
        "keeps its defaults (cloud start-up 600 s + margin 300 s)",
    ),
    Change(
        "aging.parameters.burst_after_preemptions",
        1,
        "as configs/sky-kueue.yaml says to add where teams may burst",
    ),
    Change(
        "aging.parameters.burst_max_predicted_wait_seconds",
        BURST_MAX_WAIT_SECONDS,
        "as configs/sky-kueue.yaml says to add where teams may burst",
    ),
    Change(
        "aging.strategy",
        "KUEUE_AGING",
        "as configs/sky-kueue.yaml says to set where teams may burst: the recovery strategy that "
        "relaunches a preempted job on its team's burst targets",
    ),
)

RUNS = (
    RunSpec(
        "no-aging",
        "no aging",
        (Change("aging.enabled", False, "the controller only records preemptions; nothing is aged or burst"),),
    ),
    RunSpec(
        "boost",
        "boost (bounded)",
        (Change("aging.parameters.policy", "bounded", "the boost policy (the default, none, only records)"),),
    ),
    RunSpec(
        "rank-burst",
        "rank + burst",
        (
            Change(
                "aging.parameters.policy",
                "rank",
                "the ordering policy configs/sky-kueue.yaml says to opt in to (the default, none, only records)",
            ),
            *BURST_CHANGES,
        ),
    ),
)
#: The seed scenario runs with the last run's settings (rank + burst).
SEED_RUN = RUNS[-1]


class DemoConfigError(RuntimeError):
    """The shipped demo config cannot be loaded or changed as a run says (a packaging bug)."""


def shipped_config() -> dict[str, Any]:
    """``configs/sky-kueue-demo.yaml`` as shipped in the package."""
    text = resources.files("sky_kueue.data").joinpath(DEMO_CONFIG_RESOURCE).read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise DemoConfigError(f"{DEMO_CONFIG_RESOURCE}: expected a mapping")
    return data


def apply_changes(base: dict[str, Any], changes: tuple[Change, ...]) -> dict[str, Any]:
    """A copy of ``base`` with each change's dotted key set to its value.

    Raises:
        DemoConfigError: a key's parent is missing or not a mapping.
    """
    out = copy.deepcopy(base)
    for change in changes:
        *parents, leaf = change.key.split(".")
        parent = out
        for part in parents:
            child = parent.get(part)
            if not isinstance(child, dict):
                raise DemoConfigError(f"{change.key}: {part} is not a mapping in {DEMO_CONFIG_RESOURCE}")
            parent = child
        parent[leaf] = copy.deepcopy(change.value)
    return out


def write_run_config(run: RunSpec, directory: Path) -> tuple[Path, ControllerConfig]:
    """Writes the run's ``sky-kueue.yaml`` into ``directory`` and loads it as the product does.

    Raises:
        DemoConfigError: the result is not a valid plugin config.
    """
    path = directory / f"sky-kueue-{run.name}.yaml"
    path.write_text(yaml.safe_dump(apply_changes(shipped_config(), run.changes), sort_keys=False), encoding="utf-8")
    from sky_kueue.controller.config_file import ConfigFileError

    try:
        return path, load_controller_config(path)
    except ConfigFileError as err:
        raise DemoConfigError(f"the {run.name} run's config is invalid: {err}") from None


def team_burst_targets(config_path: Path, team: str) -> tuple[str, ...]:
    """The team's burst targets (``teams.<team>.burst.clouds``) in the run's config."""
    from sky_kueue.skypilot.config import load_config

    burst = load_config(config_path).teams[team].burst
    return tuple(burst.clouds) if burst is not None else ()
