"""One admin-policy call as plain data: :class:`PolicyRequest`.

Why: SkyPilot hands the in-process policy a ``sky.UserRequest`` (with a ``sky.Task``) and
the RESTful policy server a JSON body (with the task as YAML). Both are reduced to this
dataclass so that the decision (``decision.decide``) is a pure function of plain data and
is tested without SkyPilot. The adapters live in ``policy`` (in-process) and ``wire``
(HTTP).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sky_kueue.skypilot.runtime_estimate import PastRun

#: Request names that SkyPilot uses for managed-job launches (``AdminPolicyRequestName``).
JOBS_LAUNCH = "jobs.launch"
#: What SkyPilot's server calls a launch whose body says ``is_launched_by_jobs_controller``
#: (``sky/execution.py``, ``_execute``). Any client can send that flag, so the name proves nothing.
JOBS_LAUNCH_CLUSTER = "jobs.launch_cluster"
VALIDATE = "validate"


@dataclass(frozen=True)
class UserIdentity:
    """The SkyPilot user a server-side request is made for.

    Attributes:
        id: user id (hash).
        name: user name.
    """

    id: str
    name: str


@dataclass(frozen=True)
class RequestOptions:
    """SkyPilot's ``RequestOptions`` (None for jobs and serve requests).

    Attributes:
        cluster_name: requested cluster name.
        idle_minutes_to_autostop: autostop minutes.
        down: autodown instead of autostop.
        dryrun: dry run.
    """

    cluster_name: str | None = None
    idle_minutes_to_autostop: int | None = None
    down: bool = False
    dryrun: bool = False


@dataclass(frozen=True)
class ManagedRelaunch:
    """What SkyPilot's own managed-jobs state says of the job a ``jobs.launch_cluster`` names.

    Filled in by the in-process policy on an API server in consolidation mode
    (``managed_relaunch.check``), never from the request alone: the decision trusts only
    these facts, read from SkyPilot's state and the controller's history in that process.

    Attributes:
        job_id: the managed job the request names (its task's ``SKYPILOT_MANAGED_JOB_ID``).
        team: the team the job was submitted for (the policy's label in SkyPilot's stored DAG).
        preemptions: the job's preemptions by the recovery strategy's own source.
        aged_class: the ladder rung the strategy would give the relaunch, if any.
        history: where ``preemptions`` came from (for notes).
        problem: why the request is not verified as SkyPilot's relaunch (None: verified).
        readable: False when the facts cannot be read where the policy runs at all.
    """

    job_id: int | None = None
    team: str | None = None
    preemptions: int = 0
    aged_class: str | None = None
    history: str = ""
    problem: str | None = None
    readable: bool = True

    @property
    def verified(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class PolicyRequest:
    """Everything the decision needs from one admin-policy call.

    Attributes:
        task: the task in YAML form (``Task.to_yaml_config()``).
        skypilot_config: the SkyPilot config of the request (``active_workspace`` resolved).
        request_name: SkyPilot's ``AdminPolicyRequestName`` value (e.g. ``jobs.launch``).
        at_client_side: whether the policy runs in the client.
        user: the requesting user: SkyPilot's on the server; on a client, the user SkyPilot's
            client would send (``client_identity``), filled in by the adapters.
        user_is_local: ``user`` was read on the client's machine, not passed by SkyPilot: an
            API server that authenticates replaces it with the authenticated user, so an
            ``id``-matched team problem is the server's to decide (``decision.decide``).
        request_options: SkyPilot's request options, if any.
        enabled_contexts: the Kubernetes contexts SkyPilot accepts where the policy runs
            (``Kubernetes.existing_allowed_contexts``), filled in by the in-process policy on
            the API server; None when unknown (then only an explicit
            ``kubernetes.allowed_contexts`` list in ``skypilot_config`` is applied).
        past_runs: finished runs from the controller's history, for the run-time estimate
            (filled in by the adapters: ``history_source``; empty: no history).
        kubeconfig_contexts: every context of the kubeconfig as kubectl merges it, read by
            the adapters when SkyPilot's ``allowed_contexts`` is ``all`` and SkyPilot itself
            cannot be asked (``kubeconfig_contexts``); None when not read.
        relaunch: for a server-side ``jobs.launch_cluster``, what SkyPilot's own state says
            of the managed job it names (``managed_relaunch``); None: not checked.
    """

    task: Mapping[str, Any]
    skypilot_config: Mapping[str, Any] = field(default_factory=dict)
    request_name: str = JOBS_LAUNCH
    at_client_side: bool = False
    user: UserIdentity | None = None
    user_is_local: bool = False
    request_options: RequestOptions | None = None
    enabled_contexts: tuple[str, ...] | None = None
    past_runs: tuple[PastRun, ...] = ()
    kubeconfig_contexts: tuple[str, ...] | None = None
    relaunch: ManagedRelaunch | None = None

    @property
    def workspace(self) -> str | None:
        """The active SkyPilot workspace, if known."""
        value = self.skypilot_config.get("active_workspace")
        return str(value) if value else None
