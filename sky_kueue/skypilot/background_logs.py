"""Keep the live view's background chatter out of the user's terminal.

Why: the admin policy runs inside ``sky launch`` (client side) and SkyPilot's API server,
whose terminals show every record at warning level or above that reaches the root logger
(Python's last-resort handler). While a team's cluster is down, the mirror's reflector
threads retry their lists and watches, and urllib3 warns on each retried connection
(``urllib3/connectionpool.py``, "Retrying (...) after connection broken by ..."): in one
measured ``sky launch`` 672 of 690 lines were these. The user needs one line per cluster
saying it cannot be reached, which :class:`~sky_kueue.skypilot.cluster_view.LiveClusterView`
writes itself; everything else is detail for ``--verbose`` runs.

How: a filter on the loggers that carry the chatter lowers their records to debug when they
come from a reflector thread or from a request the live view makes while :func:`quiet` is on
(connecting, probing). Handlers at warning or info then drop them; a debug handler still sees
them. The filter is installed by the policy's live view only (:func:`install`): the
controller, which runs the same mirror, keeps its warnings.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: Loggers whose records the filter may lower (urllib3's retry warnings, the mirror's loops).
CHATTY_LOGGERS: tuple[str, ...] = (
    "urllib3.connectionpool",
    "sky_kueue.mirror.reflector",
    "sky_kueue.mirror.mirror",
    "sky_kueue.mirror.visibility",
)
#: Name prefix of the mirror's reflector threads (``sky_kueue.mirror.reflector``).
REFLECTOR_THREAD_PREFIX = "sky-kueue-reflector-"

_local = threading.local()
_install_lock = threading.Lock()


class BackgroundFilter(logging.Filter):
    """Lowers records from background work to ``DEBUG`` (they are kept, never dropped)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.DEBUG and _in_background():
            record.levelno = logging.DEBUG
            record.levelname = logging.getLevelName(logging.DEBUG)
        return True


_FILTER = BackgroundFilter()


def _in_background() -> bool:
    return bool(getattr(_local, "quiet", 0)) or threading.current_thread().name.startswith(REFLECTOR_THREAD_PREFIX)


def install() -> None:
    """Attach the filter to :data:`CHATTY_LOGGERS` (once per process)."""
    with _install_lock:
        for name in CHATTY_LOGGERS:
            target = logging.getLogger(name)
            if _FILTER not in target.filters:
                target.addFilter(_FILTER)


def uninstall() -> None:
    """Detach the filter (tests)."""
    with _install_lock:
        for name in CHATTY_LOGGERS:
            logging.getLogger(name).removeFilter(_FILTER)


@contextmanager
def quiet() -> Iterator[None]:
    """Within the block, this thread's records on :data:`CHATTY_LOGGERS` are debug records."""
    _local.quiet = getattr(_local, "quiet", 0) + 1
    try:
        yield
    finally:
        _local.quiet -= 1
