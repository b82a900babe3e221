"""The ``sky-kueue`` command.

Logging is configured once, here (:mod:`sky_kueue.cli.console`): one line per message,
warnings and errors only unless ``-v``.

Why lazy: the CLI must start fast (``sky-kueue predict`` on a scenario runs in well under a
second), so heavy modules (``sky``, ``kubernetes``) are imported only by the subcommands that
need them. Each subcommand lives in its own module under ``sky_kueue.cli`` and is loaded on
first use through :class:`LazyGroup`.
"""

from __future__ import annotations

import importlib

import click

from sky_kueue.cli import console, errors

#: subcommand name -> "module:attribute" of the click command implementing it.
SUBCOMMANDS: dict[str, str] = {
    "predict": "sky_kueue.cli.predict_cmd:predict",
    "queue": "sky_kueue.cli.queue_cmd:queue",
    "snapshot": "sky_kueue.cli.snapshot_cmd:snapshot",
    "demo": "sky_kueue.cli.demo_cmd:demo",
    "aging": "sky_kueue.cli.aging_cmd:aging",
    "controller": "sky_kueue.cli.controller_cmd:controller",
    "sandbox": "sky_kueue.cli.sandbox_cmd:sandbox",
    "policy-server": "sky_kueue.cli.policy_server_cmd:policy_server",
    "check-config": "sky_kueue.cli.config_cmd:check_config",
    "simulate": "sky_kueue.cli.simulate_cmd:simulate",
    "setup": "sky_kueue.cli.setup_cmd:setup",
    "launch": "sky_kueue.cli.launch_cmd:launch",
    "real-cluster": "sky_kueue.cli.real_cluster_cmd:real_cluster",
}


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module only when it is invoked.

    It is also the one place where click's usage errors, of this group and of every command
    below it, become :class:`~sky_kueue.cli.errors.UserError` (one line, exit 2).
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as err:
            raise errors.from_usage(err, ctx) from None

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as err:
            raise errors.from_usage(err, ctx) from None

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except click.UsageError as err:  # a subcommand's arguments (parsed inside invoke)
            raise errors.from_usage(err, ctx) from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(SUBCOMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = SUBCOMMANDS.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        module_name, attr = target.split(":")
        command = getattr(importlib.import_module(module_name), attr)
        if not isinstance(command, click.Command):
            raise click.ClickException(f"internal error: {target} is not a click command")
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sky-kueue")
@click.option("-v", "--verbose", is_flag=True, help="Show debug messages, with the name of the logger.")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """sky-kueue: SkyPilot on Kueue-managed Kubernetes clusters."""
    ctx.call_on_close(console.configure(verbose=verbose))


def main() -> None:
    """Console-script entry point."""
    cli()


if __name__ == "__main__":
    main()
