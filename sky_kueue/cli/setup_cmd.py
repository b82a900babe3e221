"""``sky-kueue setup``: render a team spec into Kueue objects and a matching plugin config.

Writes ``DIR/kueue-setup.yaml`` (Namespaces, ResourceFlavors, WorkloadPriorityClasses,
ClusterQueues, LocalQueues, then in each team namespace the Role and RoleBinding that let the
resubmission controller's ServiceAccount write there, in apply order; ``kubectl apply -f`` it) and
``DIR/sky-kueue.yaml`` (the plugin config for the admin policy). The objects are checked by
the Kueue model's validator before anything is written.

Who may submit as each team comes from the spec (``users:``/``workspaces:`` per team) or
``--users TEAM=NAME[,NAME...]``. A team with neither is refused (one line, exit 2) rather than
rendered open: an open team (``users: ["*"]``) lets every SkyPilot user use its queue, so it
is written only on the explicit ``--open-teams`` (for a sandbox or a demo), and every open
team in the rendered config gets a warning on stderr (:mod:`sky_kueue.skypilot.open_teams`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import click
import yaml
from pydantic import ValidationError

from sky_kueue.cli import errors, options
from sky_kueue.inputs import files, yaml_reader
from sky_kueue.inputs.errors import InputError
from sky_kueue.mirror import kubeconfig as kubeconfig_lookup
from sky_kueue.skypilot.config import ANY_USER, ConfigError, error_from_validation, validate_config
from sky_kueue.skypilot.open_teams import open_team_warnings
from sky_kueue.skypilot.setup_lane import LaneSetupError
from sky_kueue.skypilot.setup_render import (
    CONTROLLER_SERVICE_ACCOUNT,
    render_controller_rbac,
    render_objects_and_lanes,
    render_plugin_config,
)
from sky_kueue.skypilot.setup_spec import TeamsSpec

#: A namespace name, and a ServiceAccount name (Kubernetes apimachinery/pkg/util/validation).
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
SETUP_FILE = "kueue-setup.yaml"
PLUGIN_CONFIG_FILE = "sky-kueue.yaml"


@click.command("setup")
@options.file_option("--teams", "teams_path", "The compact team spec (see configs/teams.yaml).", required=True)
@click.option(
    "--output",
    "output_dir",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for kueue-setup.yaml and sky-kueue.yaml.",
)
@click.option(
    "--users",
    "users",
    multiple=True,
    metavar="TEAM=NAME[,NAME...]",
    help="SkyPilot users (names or ids) who submit as TEAM; replaces the spec's users of TEAM. Repeatable.",
)
@click.option(
    "--open-teams",
    is_flag=True,
    help='Let every SkyPilot user submit as each team that names no users (users: ["*"]; sandbox and demos only).',
)
@click.option(
    "--controller-service-account",
    "controller_account",
    default="/".join(CONTROLLER_SERVICE_ACCOUNT),
    show_default=True,
    metavar="NAMESPACE/NAME",
    help="The resubmission controller's ServiceAccount, bound to a Role in each team namespace.",
)
@click.option("--apply", "apply_", is_flag=True, help="Create or update the objects on the cluster (idempotent).")
@options.kubeconfig_option("kubeconfig for --apply (default: $KUBECONFIG or ~/.kube/config, as kubectl).")
@options.context_option("kube_context")
def setup(
    teams_path: Path,
    output_dir: Path | None,
    users: tuple[str, ...],
    open_teams: bool,
    controller_account: str,
    apply_: bool,
    kubeconfig: Path | None,
    kube_context: str | None,
) -> None:
    """Render Kueue objects and the sky-kueue config for a set of teams (and apply them)."""
    if output_dir is None and not apply_:
        errors.fail("give --output DIR, --apply, or both")
    account = service_account(controller_account)
    target: str | None = str(kubeconfig) if kubeconfig is not None else None
    if apply_ and kubeconfig is None:
        found = kubeconfig_lookup.find_kubeconfig(None, os.environ, os.path.exists)
        if found is None:
            why = kubeconfig_lookup.why_none(os.environ, os.path.exists)
            errors.fail(f"--apply: no cluster to apply to ({why}); give --kubeconfig FILE")
        target = found.path
    try:
        text = files.read_text(teams_path, "YAML team spec")
        data = yaml_reader.load_one(text, str(teams_path))
    except InputError as exc:
        errors.fail(str(exc))
    if not isinstance(data, dict):
        errors.fail(f"{teams_path}: the team spec must be a YAML mapping")
    try:
        spec = TeamsSpec.model_validate(data)
    except ValidationError as exc:
        errors.fail(str(error_from_validation(exc, str(teams_path), text)))
    spec = with_members(spec, users, open_teams, teams_path)
    try:
        objects, lanes = render_objects_and_lanes(spec)
    except LaneSetupError as exc:
        errors.fail(f"{teams_path}: {exc}")
    problem = model_problem(objects)
    if problem is not None:
        errors.fail(f"{teams_path}: the rendered objects are invalid: {problem}")
    for lane in lanes:
        if lane.empties_donor:
            click.echo(
                f"warning: relaunch lane {lane.cluster_queue} takes all of some resource of ClusterQueue "
                f"{lane.donor}: its fresh work keeps no guaranteed quota there and must borrow",
                err=True,
            )
    objects += render_controller_rbac(spec, account)
    plugin_config = render_plugin_config(spec)
    try:
        rendered = validate_config(
            plugin_config, str(output_dir / PLUGIN_CONFIG_FILE) if output_dir else PLUGIN_CONFIG_FILE
        )
    except ConfigError as exc:
        errors.fail(f"{teams_path}: the rendered plugin config is invalid: {exc}")
    for warning in open_team_warnings(rendered):
        click.echo(warning, err=True)
    if output_dir is not None:
        output_dir.mkdir(parents=True, exist_ok=True)
        (output_dir / SETUP_FILE).write_text(yaml.safe_dump_all(objects, sort_keys=False), encoding="utf-8")
        (output_dir / PLUGIN_CONFIG_FILE).write_text(yaml.safe_dump(plugin_config, sort_keys=False), encoding="utf-8")
        kinds: dict[str, int] = {}
        for obj in objects:
            kinds[obj["kind"]] = kinds.get(obj["kind"], 0) + 1
        summary = ", ".join(f"{count} {kind}" for kind, count in kinds.items())
        click.echo(f"wrote {output_dir / SETUP_FILE} ({summary}) and {output_dir / PLUGIN_CONFIG_FILE}")
    if apply_:
        from sky_kueue.skypilot import setup_apply

        try:
            applied = setup_apply.apply_objects(setup_apply.api_client_for(target, kube_context), objects)
        except setup_apply.ClusterApplyError as exc:
            errors.fail(str(exc), errors.EXIT_CLUSTER_ERROR)
        except setup_apply.ApplyError as exc:
            errors.fail(str(exc))
        for item in applied:
            where = f"{item.namespace}/{item.name}" if item.namespace else item.name
            click.echo(f"{item.kind} {where}: {item.change.value}")


def service_account(text: str) -> tuple[str, str]:
    """``--controller-service-account NAMESPACE/NAME`` as (namespace, name), or a one-line error."""
    namespace, sep, name = text.partition("/")
    if not sep or not _DNS1123_LABEL.fullmatch(namespace) or not _DNS1123_SUBDOMAIN.fullmatch(name):
        errors.fail(
            f"--controller-service-account {text!r}: expected NAMESPACE/NAME (lowercase DNS names), "
            f"e.g. {'/'.join(CONTROLLER_SERVICE_ACCOUNT)}"
        )
    return namespace, name


def with_members(spec: TeamsSpec, users: tuple[str, ...], open_teams: bool, teams_path: Path) -> TeamsSpec:
    """``spec`` with ``--users`` applied; a team left without users or workspaces is opened
    (``"*"``) with ``--open-teams``, else it is an error naming the teams and the fixes."""
    teams = dict(spec.teams)
    for item in users:
        team, sep, names = item.partition("=")
        listed = tuple(n.strip() for n in names.split(",") if n.strip())
        if not sep or not team or not listed:
            errors.fail(f"--users {item!r}: expected TEAM=NAME[,NAME...], e.g. --users team-a=alice,bob")
        if team not in teams:
            errors.fail(f"--users {item!r}: {teams_path} has no team {team!r} (teams: {', '.join(teams)})")
        teams[team] = teams[team].model_copy(update={"users": listed})
    spec = spec.model_copy(update={"teams": teams})
    unmapped = spec.teams_without_members()
    if unmapped and not open_teams:
        errors.fail(
            f"{teams_path}: {'teams' if len(unmapped) > 1 else 'team'} {', '.join(unmapped)} "
            f"name{'' if len(unmapped) > 1 else 's'} no users: add "
            "users: [NAME, ...] (or workspaces:) to each in the spec, or pass --users TEAM=NAME[,NAME...]; "
            "--open-teams lets every SkyPilot user submit as them (a sandbox or a demo only)"
        )
    for team in unmapped:
        teams[team] = teams[team].model_copy(update={"users": (ANY_USER,)})
    return spec.model_copy(update={"teams": teams})


def model_problem(objects: list[dict[str, object]]) -> str | None:
    """The first problem the Kueue model finds in the rendered objects, or None."""
    from sky_kueue.kueue import errors as model_errors
    from sky_kueue.kueue import parse, validation

    try:
        state = parse.parse_documents(objects)
    except model_errors.ModelError as exc:
        return str(exc)
    problems = validation.state_errors(state)
    return problems[0] if problems else None
