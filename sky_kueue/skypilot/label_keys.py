"""``sky-kueue.io/`` label keys in a task: the ones sky-kueue reads, and a did-you-mean for
the rest.

Why: the policy reads a task's team, burst choice and expected run time from labels
(:mod:`sky_kueue.skypilot.labels`). A misspelled key (``sky-kueue.io/teem``,
``sky-kueue.io/expected-runtme``) was simply not read: the task went to the user's default
team, or ran without a run time, and nothing said why. The prefix is sky-kueue's own, so any
key under it that sky-kueue does not define can only be a mistake; the admin policy rejects the
task (``BAD_LABEL``) and ``predict --task`` refuses it, naming the closest defined key.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from sky_kueue.skypilot import labels
from sky_kueue.skypilot.task_yaml import OVERRIDES_KEY, get_path

#: The prefix sky-kueue owns.
SKY_KUEUE_PREFIX = "sky-kueue.io/"
#: Label keys a task may carry (``resources.labels``, or its pods' labels).
TASK_LABEL_KEYS = (labels.TEAM_LABEL, labels.BURST_LABEL, labels.RUNTIME_LABEL)
#: How alike (difflib's ratio, 0..1) a key's name must be to a defined one to be suggested.
SUGGESTION_CUTOFF_RATIO = 0.6


def misspelled_label(candidates: Iterable[Mapping[str, Any]]) -> str | None:
    """One line naming the first ``sky-kueue.io/`` key of the candidates' ``labels`` or pod
    labels that sky-kueue does not define, with the closest defined key; None when all are known."""
    for candidate in candidates:
        pod_labels = get_path(candidate.get(OVERRIDES_KEY) or {}, "kubernetes", "pod_config", "metadata", "labels")
        for where, found in (("resources.labels", candidate.get("labels")), ("pod labels", pod_labels)):
            if not isinstance(found, Mapping):
                continue
            for key in found:
                problem = _unknown(str(key), where)
                if problem is not None:
                    return problem
    return None


def _unknown(key: str, where: str) -> str | None:
    if not key.lower().startswith(SKY_KUEUE_PREFIX) or key in TASK_LABEL_KEYS:
        return None
    names = [k.removeprefix(SKY_KUEUE_PREFIX) for k in TASK_LABEL_KEYS]
    close = difflib.get_close_matches(key[len(SKY_KUEUE_PREFIX) :].lower(), names, n=1, cutoff=SUGGESTION_CUTOFF_RATIO)
    hint = f"did you mean {SKY_KUEUE_PREFIX}{close[0]}?" if close else f"sky-kueue reads {', '.join(TASK_LABEL_KEYS)}"
    return f"label {key!r} in {where} is not a sky-kueue label: {hint}"
