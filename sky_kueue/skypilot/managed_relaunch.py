"""Is a ``jobs.launch_cluster`` request SkyPilot's own relaunch of a managed job, and what is it due?

Why: in consolidation mode (``jobs.controller.consolidation_mode: true``) SkyPilot 0.14.1's jobs
controller runs on the API server's host and relaunches a preempted job with ``sdk.launch(...,
_is_launched_by_jobs_controller=True)`` (``sky/jobs/recovery_strategy.py``) against that same
server, whose config keeps its ``admin_policy``: the policy sees the relaunch as request
``jobs.launch_cluster`` (``sky/execution.py`` ``_execute``), with the ``KUEUE_AGING`` strategy's
lane queue and ladder rung already in the task. Nothing in that request proves where it came
from: the flag is a field of the HTTP body (``sky/server/requests/payloads.py`` ``LaunchBody``),
the job id is a task env (``SKYPILOT_MANAGED_JOB_ID``, ``sky/jobs/controller.py``) and the
cluster name is the caller's, so any authenticated user can send the same request.

So the request is only used to *name* a job; the facts come from SkyPilot's own managed-jobs
state (``sky/jobs/state.py``), which the API server holds in consolidation mode, and from the
recovery strategy's own history source (``KueueAgingStrategyExecutor.source``, installed by
the sky-kueue server plugin in this process). The job must exist, be RECOVERING (the status
``set_recovering_async``/``set_restarting_async`` hold while the strategy relaunches) or
STARTING with the controller's history of it readable (SkyPilot's launch loop retrying a launch
Kueue preempted before the job ran), belong
to the requesting user, have the request's task name and cluster name, and carry the policy's
team label in the DAG SkyPilot stored at submission. The decision (``decision.decide``) then
recomputes the lane and rung from these facts; it never trusts the task's.

Anywhere else (a client, the RESTful policy server in another process, an API server in
dedicated mode, no plugin) the facts cannot be read: :func:`check` says so, and the decision
keeps rejecting a lane or rung it cannot verify, naming the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from sky.skylet.constants import MANAGED_JOB_ID_ENV_VAR

from sky_kueue.skypilot.request import JOBS_LAUNCH_CLUSTER, ManagedRelaunch, PolicyRequest

log = logging.getLogger(__name__)


def check(request: PolicyRequest) -> ManagedRelaunch | None:
    """The verified facts of the managed job a server-side ``jobs.launch_cluster`` names.

    Returns:
        None for any other request; else the facts, whose ``problem`` says why the request is
        not SkyPilot's relaunch (or why that cannot be read here). Never raises.
    """
    if request.request_name != JOBS_LAUNCH_CLUSTER or request.at_client_side:
        return None
    try:
        return _check(request)
    except Exception as exc:  # noqa: BLE001 - unverifiable means not granted, never a crash
        log.warning("sky-kueue: cannot read SkyPilot's managed-jobs state: %s: %s", type(exc).__name__, exc)
        return _unreadable(f"SkyPilot's managed-jobs state cannot be read here ({type(exc).__name__})")


def _unreadable(why: str) -> ManagedRelaunch:
    return ManagedRelaunch(problem=why, readable=False)


def _refused(why: str, job_id: int | None = None) -> ManagedRelaunch:
    return ManagedRelaunch(job_id=job_id, problem=why)


def _check(request: PolicyRequest) -> ManagedRelaunch:
    from sky.jobs import state as jobs_state
    from sky.jobs import utils as jobs_utils

    if not jobs_utils.is_consolidation_mode():
        return _unreadable(
            "the API server is not in jobs consolidation mode, so a genuine relaunch never reaches this policy"
        )
    from sky_kueue.controller.skypilot_plugin import KueueAgingStrategyExecutor

    source = KueueAgingStrategyExecutor.source
    if source is None:
        return _unreadable("the sky-kueue server plugin is not installed in this API server (configs/plugins.yaml)")
    if request.user is None:
        return _refused("the request has no user")
    task_name = str(request.task.get("name") or "")
    job_id = _job_id(request.task.get("envs"))
    if job_id is None or not task_name:
        return _refused(f"the task names no managed job ({MANAGED_JOB_ID_ENV_VAR}) or has no name")
    cluster = None if request.request_options is None else request.request_options.cluster_name
    if cluster != jobs_utils.generate_managed_job_cluster_name(task_name, job_id):
        return _refused(f"cluster {cluster!r} is not managed job {job_id}'s", job_id)
    tasks = jobs_state.get_managed_job_tasks(job_id)
    current = next((t for t in tasks if not t["status"].is_terminal()), None)
    if current is None:
        return _refused(f"managed job {job_id} is not active", job_id)
    status = current["status"]
    if status not in (jobs_state.ManagedJobStatus.RECOVERING, jobs_state.ManagedJobStatus.STARTING):
        return _refused(f"managed job {job_id} is {status.value}, neither RECOVERING nor STARTING", job_id)
    if current["task_name"] != task_name:
        return _refused(f"managed job {job_id}'s task is not {task_name!r}", job_id)
    if current["user_hash"] != request.user.id:
        return _refused(f"managed job {job_id} belongs to another user", job_id)
    team, base_class = _submitted_labels(current.get("dag_yaml_content"), task_name)
    if team is None:
        return _refused(f"SkyPilot's stored DAG of managed job {job_id} names no team", job_id)
    from sky_kueue.controller.skypilot_plugin import Recovery

    # The strategy's own count without a controller history: SkyPilot's completed recoveries
    # plus the one under way (RECOVERING). A STARTING job is in SkyPilot's launch loop, which
    # retries failures of any kind; only the controller's record of Kueue's preemptions may
    # send such a retry to the lane (``KueueAgingStrategyExecutor._cleanup_cluster``).
    starting = status is jobs_state.ManagedJobStatus.STARTING
    count = int(current.get("recovery_count") or 0) + (0 if starting else 1)
    recovery = Recovery(source, job_id, count, team)
    if starting and not recovery.recorded:
        return _refused(f"managed job {job_id} is STARTING and the controller's history of it cannot be read", job_id)
    rung, _ = source.aged_class_for(recovery, base_class)
    return ManagedRelaunch(
        job_id=job_id,
        team=team,
        preemptions=recovery.history.preemption_count,
        aged_class=None if rung is None else rung.name,
        history=recovery.history_source,
    )


def _job_id(envs: Any) -> int | None:
    if not isinstance(envs, Mapping):
        return None
    text = str(envs.get(MANAGED_JOB_ID_ENV_VAR) or "").strip()
    return int(text) if text.isdigit() else None


def _submitted_labels(dag_yaml: str | None, task_name: str) -> tuple[str | None, str | None]:
    """The team and priority class the policy wrote on the task when the job was submitted,
    read from the DAG SkyPilot stored then (``jobs.launch`` is the policy's, ``sky/jobs/server/core.py``)."""
    if not dag_yaml:
        return None, None
    from sky.utils import dag_utils

    from sky_kueue.controller.skypilot_plugin import current_class, team_of

    dag = dag_utils.load_dag_from_yaml_str(dag_yaml)
    for task in dag.tasks:
        if task.name == task_name:
            return team_of(task), current_class(task)
    return None, None
