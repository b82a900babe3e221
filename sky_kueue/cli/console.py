"""How log records reach the terminal: one line per message, in the CLI's own voice.

Why here: library modules log (``sky_kueue.skypilot.engine`` logs every decision for the
operator of a policy server), and without a configuration Python prints them in its raw
default form (``INFO:sky_kueue.skypilot.engine:...``, which ``logging.basicConfig`` gives;
SkyPilot calls it when ``sky`` is imported). The root command configures logging once,
through :func:`configure`:

* by default only warnings and errors are shown, as ``warning: <message>`` and
  ``error: <message>``, each on one line (urllib3's retry warnings only with ``-v``);
* ``sky-kueue -v`` also shows sky-kueue's own info and debug records, with the logger's
  name (``debug: sky_kueue.mirror.reflector: ...``) and a traceback when there is one; other
  libraries (kubernetes, urllib3, ...) stay at warnings;
* a server command (``policy-server``) shows sky-kueue's info records with
  :func:`show_info`, each line with a timestamp.

SkyPilot's own loggers (``sky.*``) do not reach the root logger: SkyPilot gives them a
handler of their own on stdout, at info, when ``sky`` is imported. :func:`quiet_skypilot`
lowers them to warnings (unless ``-v``) while a command only asks SkyPilot questions;
:func:`restore_skypilot` lets SkyPilot speak again when the command hands it real work
(``launch`` submitting a job: its progress lines are SkyPilot's to print).

Everything :func:`configure` changes is undone when the command's context closes, so a
command invoked in-process (click's ``CliRunner``) leaves logging as it found it.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import click

#: Prefix of each level in the default voice; info has none.
_PREFIXES = {
    logging.DEBUG: "debug: ",
    logging.INFO: "",
    logging.WARNING: "warning: ",
    logging.ERROR: "error: ",
    logging.CRITICAL: "error: ",
}
#: The logger sky-kueue's modules log under (``-v`` shows its debug records).
OUR_LOGGER = "sky_kueue"
#: The logger SkyPilot's modules log under (``sky_logging`` gives it its own handler).
SKYPILOT_LOGGER = "sky"
#: Loggers whose warnings are transport detail, shown only with ``-v``: urllib3 warns on each
#: retry of a Kubernetes API call, and the command reports an unreachable cluster itself.
TRANSPORT_LOGGERS = ("urllib3",)


def _prefix(levelno: int) -> str:
    for level in sorted(_PREFIXES, reverse=True):
        if levelno >= level:
            return _PREFIXES[level]
    return _PREFIXES[logging.DEBUG]


def _one_line(text: str) -> str:
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


class ConsoleFormatter(logging.Formatter):
    """``[time ]<level prefix><logger name: >message``; one line unless verbose.

    Args:
        verbose: name the logger and keep tracebacks (``-v``).
        timestamps: start each line with the local time (server commands).
    """

    def __init__(self, verbose: bool = False, timestamps: bool = False) -> None:
        super().__init__()
        self.verbose = verbose
        self.timestamps = timestamps

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        name = f"{record.name}: " if self.verbose else ""
        when = time.strftime("%Y-%m-%d %H:%M:%S ", time.localtime(record.created)) if self.timestamps else ""
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            if self.verbose:
                message += "\n" + self.formatException(record.exc_info)
            else:
                detail = str(error).splitlines()[0] if str(error) else ""
                message += f": {type(error).__name__}" + (f": {detail}" if detail else "")
        if not self.verbose:
            message = _one_line(message)
        return f"{when}{_prefix(record.levelno)}{name}{message}"


class ConsoleHandler(logging.Handler):
    """Writes each record to the CLI's stderr (looked up at each message, as click does)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            click.echo(self.format(record), err=True)
        except Exception:  # noqa: BLE001 - logging must never break the command
            self.handleError(record)


def _no_transport_warnings(record: logging.LogRecord) -> bool:
    """A handler filter (not a logger level: the kubernetes client resets urllib3's level)."""
    transport = any(record.name == name or record.name.startswith(name + ".") for name in TRANSPORT_LOGGERS)
    return not transport or record.levelno >= logging.ERROR


@dataclass
class _State:
    """What :func:`configure` changed, to undo it."""

    verbose: bool = False
    handler: ConsoleHandler | None = None
    undo: list[Callable[[], None]] = field(default_factory=list)
    skypilot_level: int | None = None


_STATE = _State()


def configure(verbose: bool = False) -> Callable[[], None]:
    """Route every log record to stderr in the CLI's voice (see the module docstring).

    Bare stream handlers already on the root logger (what ``logging.basicConfig`` installs,
    e.g. when SkyPilot was imported earlier in this process) are set aside so a message is
    never printed twice; other handlers (a test's capture handler) are left alone.

    Args:
        verbose: show debug records with logger names (``-v``).

    Returns:
        A function that restores the previous configuration.
    """
    reset()
    root = logging.getLogger()
    handler = ConsoleHandler()
    handler.setFormatter(ConsoleFormatter(verbose=verbose))
    if not verbose:
        handler.addFilter(_no_transport_warnings)
    ours = logging.getLogger(OUR_LOGGER)
    set_aside = [(i, h) for i, h in enumerate(root.handlers) if type(h) is logging.StreamHandler]
    previous_levels = [(logger, logger.level) for logger in (root, ours)]
    for _, old in set_aside:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    ours.setLevel(logging.DEBUG if verbose else logging.NOTSET)

    def restore() -> None:
        root.removeHandler(handler)
        for index, old in set_aside:  # back where it was, so the handlers' order is unchanged
            if old not in root.handlers:
                root.handlers.insert(min(index, len(root.handlers)), old)
        for logger, level in previous_levels:
            logger.setLevel(level)

    _STATE.verbose = verbose
    _STATE.handler = handler
    _STATE.undo = [restore]
    return reset


def reset() -> None:
    """Undo :func:`configure`, :func:`show_info` and :func:`quiet_skypilot` (latest first)."""
    while _STATE.undo:
        _STATE.undo.pop()()
    _STATE.handler = None
    _STATE.verbose = False


def show_info(timestamps: bool = True) -> None:
    """Show sky-kueue's info records too (a server's request log), with the time on each line."""
    handler = _STATE.handler
    if handler is None:
        return
    ours = logging.getLogger(OUR_LOGGER)
    previous_level, previous_formatter = ours.level, handler.formatter
    if not _STATE.verbose:
        ours.setLevel(logging.INFO)
    handler.setFormatter(ConsoleFormatter(verbose=_STATE.verbose, timestamps=timestamps))

    def restore() -> None:
        ours.setLevel(previous_level)
        handler.setFormatter(previous_formatter)

    _STATE.undo.append(restore)


def quiet_skypilot() -> None:
    """Keep SkyPilot's info lines off the output (not with ``-v``); call after importing ``sky``.

    SkyPilot sets its ``sky`` logger to debug and gives it a stdout handler at info when it is
    imported (``sky.sky_logging``); raising the logger's level to warning keeps its warnings
    and errors. ``SKYPILOT_DEBUG=1`` still shows everything, as SkyPilot documents.
    """
    if _STATE.handler is None or _STATE.verbose or "sky" not in sys.modules:
        return
    from sky.utils import env_options

    if env_options.Options.SHOW_DEBUG_INFO.get():
        return
    logger = logging.getLogger(SKYPILOT_LOGGER)
    if _STATE.skypilot_level is not None or logger.level >= logging.WARNING:
        return
    _STATE.skypilot_level = logger.level
    logger.setLevel(logging.WARNING)
    _STATE.undo.append(restore_skypilot)


def restore_skypilot() -> None:
    """Undo :func:`quiet_skypilot`: SkyPilot speaks again (before handing it a submission)."""
    if _STATE.skypilot_level is not None:
        logging.getLogger(SKYPILOT_LOGGER).setLevel(_STATE.skypilot_level)
        _STATE.skypilot_level = None
