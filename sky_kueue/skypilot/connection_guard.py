"""Per-connection limits of the policy server: a whole-request deadline and connections per client.

Why these and not uvicorn's own: uvicorn bounds a connection only between requests
(``timeout_keep_alive``, armed after a response and disarmed by any byte received;
``uvicorn/protocols/http/h11_impl.py``, ``H11Protocol.data_received``), so a client that
opens a connection and sends one byte every few seconds holds it for ever. That costs the
asyncio server no thread, but it costs a file descriptor and a slot of ``limit_concurrency``;
forty such clients stalled the previous thread-pool server completely (issue 36). So each
connection here gets

* a **deadline for the whole request**, headers and body together: armed when the
  connection opens and again when a response completes (for the next request on a kept-alive
  connection); a request not wholly received by then (or not answered early, as a 401 is
  before its body) has its connection closed, however steadily its bytes trickle in;
* a **slot per client address**: a client already holding its share of connections has
  further ones closed at once, before they cost a request, so one remote host cannot take
  every connection the server allows. Clients on the loopback share one address (SkyPilot's
  API server is one client), so the share is sized well above a launch storm's concurrency.

The protocol is uvicorn's h11 one (its ``h11_max_incomplete_event_size`` also bounds the
request line and headers); the hooks used are ``connection_made``, ``connection_lost`` and
``on_response_complete`` and the request cycle's ``more_body``/``response_started``, which
is why ``pyproject.toml`` pins uvicorn's minor version.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle
from uvicorn.server import ServerState

logger = logging.getLogger(__name__)


class ClientSlots:
    """Open connections per client address, bounded; used from the event loop's thread only.

    Args:
        per_client: most connections one address may hold at once.
    """

    def __init__(self, per_client: int) -> None:
        if per_client < 1:
            raise ValueError(f"per_client must be at least 1, got {per_client}")
        self.per_client = per_client
        self._open: Counter[str] = Counter()
        self._refused_since_logged: Counter[str] = Counter()

    def take(self, address: str) -> bool:
        """Take a slot for a new connection from ``address``; False when it holds its share."""
        if self._open[address] >= self.per_client:
            if not self._refused_since_logged[address]:
                logger.warning(
                    "sky-kueue policy server: %s holds %d connections, the most one client may; "
                    "closing its further connections until some close",
                    address,
                    self.per_client,
                )
            self._refused_since_logged[address] += 1
            return False
        self._open[address] += 1
        return True

    def give_back(self, address: str) -> None:
        """Release the slot of a closed connection from ``address``."""
        self._open[address] -= 1
        if self._open[address] <= 0:
            del self._open[address]
        if self._open[address] < self.per_client and address in self._refused_since_logged:
            del self._refused_since_logged[address]

    def held(self, address: str) -> int:
        """Connections ``address`` holds now."""
        return self._open.get(address, 0)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a whole-request deadline and a slot per client.

    Args:
        config, server_state, app_state, _loop: as uvicorn passes them to its protocol.
        slots: the server's slots per client address (shared by its connections).
        request_deadline_seconds: time a request has to arrive whole, headers and body.
    """

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        slots: ClientSlots,
        request_deadline_seconds: float,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._slots = slots
        self._deadline_seconds = request_deadline_seconds
        self._deadline: asyncio.TimerHandle | None = None
        self._armed_after: RequestResponseCycle | None = None
        self._slot_address: str | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        address = self.client[0] if self.client else ""
        if not self._slots.take(address):
            transport.close()
            return
        self._slot_address = address
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._slot_address is not None:
            self._slots.give_back(self._slot_address)
            self._slot_address = None
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        # Armed before uvicorn starts a pipelined next request, so that request's cycle
        # counts as arrived after this point.
        self._arm()
        super().on_response_complete()

    def _arm(self) -> None:
        self._disarm()
        self._armed_after = self.cycle
        self._deadline = self.loop.call_later(self._deadline_seconds, self._on_deadline)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _on_deadline(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        arrived = (
            cycle is not None and cycle is not self._armed_after and (not cycle.more_body or cycle.response_started)
        )
        if arrived:
            return  # answered or being answered; the next request's deadline starts with the response
        logger.info(
            "sky-kueue policy server: closed a connection from %s: no whole request within %g s",
            self._slot_address,
            self._deadline_seconds,
        )
        self.transport.close()
