"""``--state`` on the command line: parse it, connect when it names the cluster, open it.

One helper for ``controller run``, ``controller status``, ``controller migrate`` and
``aging explain``, so every command accepts the same forms
(:mod:`sky_kueue.controller.state_spec`) and fails the same way: one line, exit 2 (exit 1 when
the API server holding a ``kubernetes`` store cannot be reached or refuses; docs/exit-codes.md).
``run`` and ``status`` also take the cluster holding a ``kubernetes`` history when it is not
the controller's own (``--state-kubeconfig``/``--state-context``; the runtime state stays in
the controller's cluster). ``aging explain`` reads the history only: ``--context`` names it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from sky_kueue.cli import options
from sky_kueue.cli.errors import EXIT_BAD_INPUT, EXIT_CLUSTER_ERROR, UserError
from sky_kueue.controller.history import StoreClusterError, StoreError
from sky_kueue.controller.state_spec import OpenedState, StateKind, StateSpec, open_state, parse_state_spec

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

F = TypeVar("F", bound=Callable[..., object])

#: Identifies the controller's requests in audit logs.
USER_AGENT = "sky-kueue-controller"
STATE_HELP = "Where the history lives: sqlite:PATH (default ~/.sky/sky-kueue/controller.db), PATH, kubernetes[:NS]."


def state_option(function: F) -> F:
    """``--state SPEC`` (kept as text; :func:`parse` reads it)."""
    return click.option("--state", "state_text", metavar="SPEC", default=None, help=STATE_HELP)(function)


def cluster_options(function: F) -> F:
    """``--kubeconfig``, ``--context``, ``--in-cluster``: needed when ``--state`` is kubernetes."""
    function = click.option(
        "--in-cluster", is_flag=True, help="Use the pod's service account instead of a kubeconfig."
    )(function)
    function = options.context_option()(function)
    return options.kubeconfig_option("kubeconfig file.")(function)


def history_cluster_options(function: F) -> F:
    """``--state-kubeconfig``, ``--state-context``: the cluster holding a ``kubernetes`` history
    when it is not the controller's own (a fleet's home cluster), as kubectl names a cluster."""
    function = click.option(
        "--state-context",
        "state_context",
        metavar="NAME",
        default=None,
        help="Kubeconfig context of the cluster holding a kubernetes history (default: the controller's).",
    )(function)
    return click.option(
        "--state-kubeconfig",
        "state_kubeconfig",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Kubeconfig of the cluster holding a kubernetes history (default: --kubeconfig's).",
    )(function)


def parse(text: str | None, *, option: str = "--state") -> StateSpec:
    """The parsed spec; a malformed one is an :class:`~sky_kueue.cli.errors.UserError` (one line, exit 2)."""
    try:
        return parse_state_spec(text, option)
    except ValueError as err:
        raise UserError(str(err)) from None


def open_from_cli(
    spec: StateSpec,
    *,
    kubeconfig: Path | None,
    context: str | None,
    in_cluster: bool,
    read_only: bool,
    api_client: ApiClient | None = None,
    state_kubeconfig: Path | None = None,
    state_context: str | None = None,
) -> OpenedState:
    """Opens the store, connecting to the cluster first for a Kubernetes spec (and to the
    history's own cluster, given ``state_kubeconfig`` or ``state_context``).

    Raises:
        UserError: the store cannot be opened (one line, exit 2; 1 when its API server cannot
            be reached or refuses), or a history cluster is named for a SQLite file.
    """
    history_api_client = None
    if state_kubeconfig is not None or state_context is not None:
        if spec.kind is not StateKind.KUBERNETES:
            raise UserError(
                f"--state-kubeconfig/--state-context name the cluster of a kubernetes history; --state is {spec}"
            )
        history_api_client = api_client_for(state_kubeconfig or kubeconfig, state_context, in_cluster=False)
    if spec.kind is StateKind.KUBERNETES and api_client is None:
        api_client = api_client_for(kubeconfig, context, in_cluster)
    try:
        return open_state(spec, api_client=api_client, read_only=read_only, history_api_client=history_api_client)
    except StoreError as err:
        raise UserError(
            f"--state {spec}: {err}" if spec.kind is StateKind.KUBERNETES else str(err), store_exit_code(err)
        ) from None


def store_exit_code(err: StoreError) -> int:
    """The exit code of a store failure: the cluster's (1) when its API server cannot be
    reached or refuses (CRD not installed, RBAC), bad input (2) otherwise (a missing or
    unreadable state file)."""
    return EXIT_CLUSTER_ERROR if isinstance(err, StoreClusterError) else EXIT_BAD_INPUT


def api_client_for(kubeconfig: Path | None, context: str | None, in_cluster: bool) -> ApiClient:
    """An official client for the cluster of ``--kubeconfig``/``--context`` or ``--in-cluster``.

    Raises:
        UserError: no such kubeconfig, or the credentials cannot be loaded.
    """
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    configuration = client.Configuration()
    try:
        if in_cluster:
            config.load_incluster_config(client_configuration=configuration)
        else:
            path = os.fspath(kubeconfig) if kubeconfig is not None else None
            if path is not None and not Path(path).is_file():
                raise UserError(f"--kubeconfig: {path} does not exist")
            config.load_kube_config(config_file=path, context=context, client_configuration=configuration)
    except ConfigException as err:
        raise UserError(f"cannot load the cluster credentials: {' '.join(str(err).split())}") from None
    # The controller's own loops back off and resume; urllib3 must not retry behind them.
    configuration.retries = False
    api_client = client.ApiClient(configuration)
    api_client.user_agent = USER_AGENT
    return api_client
