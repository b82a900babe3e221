"""Bounded, jittered backoff that honours ``Retry-After``, built on ``tenacity``.

Why these rules (client-go's reflector and the apiserver's priority-and-fairness guidance):

* exponential growth from :attr:`RetryPolicy.initial_delay_seconds`, capped at
  :attr:`RetryPolicy.max_delay_seconds`, so a long outage costs one request per cap interval
  per reflector, not a storm;
* "equal jitter" (a delay drawn from the upper half of the current step), so reflectors that
  failed together (an apiserver restart) do not come back in lockstep;
* a 429 or 503 with ``Retry-After`` waits at least as long as the server asks (bounded by
  :attr:`RetryPolicy.max_retry_after_seconds` against a misbehaving proxy);
* only transient failures are retried (:func:`sky_kueue.mirror.errors.is_transient`); a 403
  does not become less forbidden by asking again.

Two users: :func:`retrying` wraps one request (a list page, a discovery GET) in a
``tenacity.Retrying``; :class:`FailureBackoff` paces the re-watch loop of a reflector, where
a healthy watch session resets the count. Both compute delays with :func:`delay_seconds`.
The sleep function is injected, so tests observe the delays without waiting them.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import tenacity

from sky_kueue.mirror.errors import is_transient, retry_after_seconds

#: First retry delay (seconds, before jitter).
INITIAL_DELAY_SECONDS = 0.2
#: Largest delay between attempts (seconds).
MAX_DELAY_SECONDS = 30.0
#: Largest ``Retry-After`` honoured (seconds); a larger value is clamped to this.
MAX_RETRY_AFTER_SECONDS = 300.0


@dataclass(frozen=True)
class RetryPolicy:
    """How to retry.

    Attributes:
        initial_delay_seconds: delay after the first failure (before jitter).
        max_delay_seconds: cap of the exponential delay.
        max_retry_after_seconds: cap of a server's ``Retry-After``.
        max_attempts: give up after this many attempts; None retries until stopped.
    """

    initial_delay_seconds: float = INITIAL_DELAY_SECONDS
    max_delay_seconds: float = MAX_DELAY_SECONDS
    max_retry_after_seconds: float = MAX_RETRY_AFTER_SECONDS
    max_attempts: int | None = None


#: For reflectors: retry until the mirror stops.
BACKGROUND_POLICY = RetryPolicy()
#: For one-shot commands (``snapshot``, ``predict --kubeconfig``, ``queue``): a few quick tries.
ONE_SHOT_POLICY = RetryPolicy(initial_delay_seconds=0.2, max_delay_seconds=5.0, max_attempts=4)

Sleep = Callable[[float], None]


def delay_seconds(attempt: int, exc: BaseException | None, policy: RetryPolicy, rng: random.Random) -> float:
    """Delay before retry number ``attempt`` (1 = first retry) after failure ``exc``."""
    step = min(policy.max_delay_seconds, policy.initial_delay_seconds * (2 ** max(0, attempt - 1)))
    delay = step / 2 + rng.uniform(0, step / 2)
    asked = retry_after_seconds(exc) if exc is not None else None
    if asked is not None:
        delay = max(delay, min(asked, policy.max_retry_after_seconds))
    return delay


class _WaitRetryAfter(tenacity.wait.wait_base):
    """A tenacity wait strategy applying :func:`delay_seconds`."""

    def __init__(self, policy: RetryPolicy, rng: random.Random) -> None:
        self._policy = policy
        self._rng = rng

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None and outcome.failed else None
        return delay_seconds(retry_state.attempt_number, exc, self._policy, self._rng)


def retrying(
    policy: RetryPolicy,
    *,
    sleep: Sleep,
    should_stop: Callable[[], bool] = lambda: False,
    rng: random.Random | None = None,
    retry_on: Callable[[BaseException], bool] = is_transient,
) -> tenacity.Retrying:
    """A ``tenacity.Retrying`` for one request: transient failures only, re-raising the last.

    ``should_stop`` ends the retries early (the mirror is stopping); the last failure is
    then re-raised.
    """
    stop: tenacity.stop.stop_base = _StopWhen(should_stop)
    if policy.max_attempts is not None:
        stop = tenacity.stop_any(stop, tenacity.stop_after_attempt(policy.max_attempts))
    return tenacity.Retrying(
        retry=tenacity.retry_if_exception(retry_on),
        wait=_WaitRetryAfter(policy, rng or random.Random()),
        stop=stop,
        sleep=sleep,
        reraise=True,
    )


class _StopWhen(tenacity.stop.stop_base):
    """A tenacity stop strategy: stop once ``predicate()`` is true (the mirror is stopping)."""

    def __init__(self, predicate: Callable[[], bool]) -> None:
        self._predicate = predicate

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return self._predicate()


class FailureBackoff:
    """Delays of a loop that must keep going: consecutive failures grow the delay, a success resets it."""

    def __init__(self, policy: RetryPolicy, rng: random.Random | None = None) -> None:
        self._policy = policy
        self._rng = rng or random.Random()
        self.consecutive_failures = 0

    def failure(self, exc: BaseException | None) -> float:
        """Record a failure; returns how long to wait before the next attempt."""
        self.consecutive_failures += 1
        return delay_seconds(self.consecutive_failures, exc, self._policy, self._rng)

    def success(self) -> None:
        self.consecutive_failures = 0
