"""The team, LocalQueue and priority class ``sky-kueue predict --task`` gives a task: those
the admin policy would give it, from the plugin config.

Why: SkyPilot never puts a WorkloadPriorityClass on its pods; the policy writes the
``kueue.x-k8s.io/priority-class`` pod label (the task's class, else its team's default). A
task predicted as written therefore runs at priority 0 and preempts nobody, while the same
task launched through the policy may preempt: ``predict --task`` and ``launch --dry-run``
answered one question two ways. Here the policy's rule
(``sky_kueue.skypilot.decision._choose_priority_class``) is applied to the task before it
becomes a Workload. ``predict`` answers a what-if and asks nobody's identity, so the team is
the one the task's ``sky-kueue.io/team`` label names, else the one whose queue the task is
predicted in. When no team applies, :attr:`TaskQueueing.note` says in one line why and what
was assumed.

Pure: the caller reads the config and the task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sky_kueue.kueue.errors import ModelError
from sky_kueue.skypilot import labels, task_workload, task_yaml
from sky_kueue.skypilot.config import PluginConfig, TeamCluster
from sky_kueue.skypilot.label_keys import misspelled_label


@dataclass(frozen=True)
class TaskQueueing:
    """Where a task's Workload is predicted, and at which class.

    Attributes:
        namespace: the Workload's namespace (None: the task's own, else the default one).
        local_queue: its LocalQueue (None: the one the task names).
        priority_class: its WorkloadPriorityClass (None: none, priority 0).
        note: one line saying which team's settings were applied, or why none were and what
            was assumed.
    """

    namespace: str | None
    local_queue: str | None
    priority_class: str | None
    note: str


def task_queueing(
    task: Mapping[str, Any],
    config: PluginConfig | None,
    config_source: str,
    *,
    source: str,
    namespace: str | None = None,
    local_queue: str | None = None,
) -> TaskQueueing:
    """The queue and class the admin policy would give ``task`` (see the module docstring).

    Args:
        task: the SkyPilot task in YAML form.
        config: the plugin config, or None when there is none.
        config_source: where the config is (or was looked for), for the note.
        source: the task's file name, for messages.
        namespace, local_queue: the queue asked for on the command line (``--task-queue``).

    Raises:
        ModelError: what the policy would reject: a misspelled ``sky-kueue.io/`` label, a team
            label naming no team, a queue or a class the team may not use, several classes.
    """
    misspelled = misspelled_label(task_yaml.candidates(task))
    if misspelled is not None:
        raise ModelError(f"{source}: {misspelled}")
    candidate = task_workload.kubernetes_candidate(task, source)
    overrides = candidate.get(task_yaml.OVERRIDES_KEY) or {}
    pod_labels = task_yaml.get_path(overrides, "kubernetes", "pod_config", "metadata", "labels") or {}
    asked = sorted(
        {
            str(v)
            for v in (
                candidate.get("priority_class"),
                pod_labels.get(labels.KUEUE_PRIORITY_CLASS_LABEL) if isinstance(pod_labels, Mapping) else None,
            )
            if v
        }
    )
    if len(asked) > 1:
        raise ModelError(
            f"{source}: asks for several priority classes ({', '.join(asked)}); set only resources.priority_class"
        )
    queue = local_queue or task_workload.queue_of(overrides)
    if config is None:
        return _as_written(namespace, local_queue, pod_labels, f"there is no plugin config ({config_source})")
    task_labels = candidate.get("labels") or {}
    named = task_labels.get(labels.TEAM_LABEL) if isinstance(task_labels, Mapping) else None
    if named is not None and str(named) not in config.teams:
        raise ModelError(
            f"{source}: label {labels.TEAM_LABEL} names team {str(named)!r}, which {config_source} does not define "
            f"(teams: {', '.join(config.teams)})"
        )
    team = str(named) if named is not None else _team_of_queue(config, namespace, queue)
    if team is None:
        where = f"{namespace or '<task namespace>'}/{queue}" if queue else "no queue"
        return _as_written(
            namespace,
            local_queue,
            pod_labels,
            f"no team of {config_source} submits to {where} and the task has no {labels.TEAM_LABEL} label",
        )
    clusters = config.team_clusters(config.teams[team])
    cluster = _cluster(clusters, namespace, queue)
    if cluster is None:
        queues = ", ".join(f"{c.namespace}/{c.local_queue}" for c in clusters)
        raise ModelError(
            f"{source}: team {team!r} submits to {queues}, not {namespace or '<task namespace>'}/{queue}; the admin "
            "policy would reject the task (drop --task-queue or the task's queue)"
        )
    chosen = asked[0] if asked else config.teams[team].priority_classes.default
    if chosen not in cluster.allowed_priority_classes:
        raise ModelError(
            f"{source}: priority class {chosen!r} is not allowed for team {team!r} "
            f"(allowed: {', '.join(cluster.allowed_priority_classes)}); the admin policy would reject the task"
        )
    why = "the task's" if asked else "the team's default"
    how = "its label" if named is not None else "its queue"
    return TaskQueueing(
        namespace=cluster.namespace,
        local_queue=cluster.local_queue,
        priority_class=chosen,
        note=(
            f"as the admin policy would submit it for team {team!r} (from {how}, {config_source}): "
            f"{cluster.namespace}/{cluster.local_queue}, priority class {chosen} ({why})"
        ),
    )


def _as_written(namespace: str | None, local_queue: str | None, pod_labels: object, why: str) -> TaskQueueing:
    """The task predicted as it is written, with a note saying why and at which class."""
    written = pod_labels.get(labels.KUEUE_PRIORITY_CLASS_LABEL) if isinstance(pod_labels, Mapping) else None
    at = (
        f"at its pod label's priority class {written}"
        if written
        else "without a priority class (priority 0; the admin policy would add its team's)"
    )
    return TaskQueueing(namespace, local_queue, None, f"predicted as written, {at}: {why}")


def _team_of_queue(config: PluginConfig, namespace: str | None, queue: str | None) -> str | None:
    """The one team that submits to ``namespace/queue`` (any namespace when None), else None."""
    if not queue:
        return None
    owners = [name for name, team in config.teams.items() if _cluster(config.team_clusters(team), namespace, queue)]
    return owners[0] if len(owners) == 1 else None


def _cluster(clusters: tuple[TeamCluster, ...], namespace: str | None, queue: str | None) -> TeamCluster | None:
    """The team's cluster entry for the queue asked for (the first one when none is asked)."""
    if not queue:
        return clusters[0] if namespace is None or clusters[0].namespace == namespace else None
    for cluster in clusters:
        if cluster.local_queue == queue and (namespace is None or cluster.namespace == namespace):
            return cluster
    return None
