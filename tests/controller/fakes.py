"""Test doubles for the engine's ports."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sky_kueue.controller.actuators import ActuationError, ActuationOutcome, ActuationResult, WorkloadPatch


class RecordingActuator:
    """Records patches; answers with scripted outcomes (APPLIED when the script is empty)."""

    name = "fake"

    def __init__(self, outcomes: Iterable[ActuationOutcome | Exception] = ()) -> None:
        self.patches: list[WorkloadPatch] = []
        self._outcomes = list(outcomes)

    def apply(self, patch: WorkloadPatch) -> ActuationResult:
        self.patches.append(patch)
        outcome = self._outcomes.pop(0) if self._outcomes else ActuationOutcome.APPLIED
        if isinstance(outcome, Exception):
            raise outcome
        return ActuationResult(outcome, patch.summary)

    def then(self, *outcomes: ActuationOutcome | Exception) -> None:
        """Scripts the outcomes of the next applies (after those already scripted)."""
        self._outcomes.extend(outcomes)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [dict(p.body) for p in self.patches]


def transient(message: str = "HTTP 503") -> ActuationError:
    return ActuationError(message)
