"""Notice that the plugin config file changed, so the controller can start again from it.

Why: the controller reads its config once (the team namespaces whose pods it watches, each
team's aging, holds, lanes and burst gates), and a team added while it ran was invisible until
someone restarted it. In a cluster the config is a ConfigMap mounted as a file, which the
kubelet updates in place; polling the file's content costs one small read per interval.

A change counts only once the new file is a valid config: an edit that breaks it is logged
(once per content) and the controller keeps running on the config it has, so a typo never
stops it. What to do on a change is the caller's (``controller run`` stops its session and
re-executes itself, reading everything again).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path

#: How often the file is read, in seconds (``controller run --config-poll-interval``).
CONFIG_POLL_SECONDS = 10.0

log = logging.getLogger("sky_kueue.controller")

#: Checks a config file: None when valid, else why not (one line).
Validator = Callable[[Path], "str | None"]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class ConfigWatch:
    """Polls ``path`` every ``poll_seconds`` and calls ``on_change`` once, when its content
    differs from what it was at start and ``validate`` accepts it."""

    def __init__(
        self,
        path: Path,
        validate: Validator,
        on_change: Callable[[], None],
        *,
        poll_seconds: float = CONFIG_POLL_SECONDS,
    ) -> None:
        if poll_seconds <= 0:
            raise ValueError(f"poll_seconds must be positive, got {poll_seconds}")
        self.path = path
        self._validate = validate
        self._on_change = on_change
        self._poll_seconds = poll_seconds
        self._started_digest = _digest(path)
        #: The last content judged invalid or unreadable, so each is logged once.
        self._reported: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="config-watch", daemon=True)
        self.changed = False

    def start(self) -> ConfigWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def check(self) -> bool:
        """Read the file once; True (and ``on_change`` called) if it changed to a valid config."""
        if self.changed:
            return True
        try:
            digest = _digest(self.path)
        except OSError as exc:
            if self._reported != "unreadable":
                self._reported = "unreadable"
                log.warning(
                    "config file unreadable; running on the config read at start",
                    extra={"fields": {"config": str(self.path), "error": str(exc)}},
                )
            return False
        if digest == self._started_digest or digest == self._reported:
            return False
        problem = self._validate(self.path)
        if problem is not None:
            self._reported = digest
            log.error(
                "config changed but is not valid; running on the config read at start",
                extra={"fields": {"config": str(self.path), "error": problem}},
            )
            return False
        self.changed = True
        log.info("config changed; starting again from it", extra={"fields": {"config": str(self.path)}})
        self._on_change()
        return True

    def _run(self) -> None:
        while not self._stop.wait(self._poll_seconds):
            if self.check():
                return
