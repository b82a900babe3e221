"""Suite-wide options: the real-Kueue tier runs only when asked for; the model runs pure Python.

The tests under ``tests/real_kueue`` need a real Kubernetes control plane and the real Kueue
built from their Go modules (``sky-kueue real-cluster build``: tens of minutes the first time,
then cached) and start a cluster (about half a minute). The default run deselects them and
says so in its summary; ``--real-kueue`` selects them (``.ci/run`` runs them as their own
stage). Deselection, not skipping: a selected real-Kueue test whose cluster cannot be built
or started fails.

The ``long`` tier (``--long``) is the same: whole processes SIGKILLed through hundreds of
preemptions, the controller installed from its manifests, the model's equivalence over the
benchmark traces. Each takes tens of seconds of CPU, together more than the default run may
spend (three minutes on two cores), so the default run deselects them and ``.ci/run`` runs them
as their own stage.
"""

from __future__ import annotations

import os

import pytest

# The pure-Python model: tests patch its internals, which compiled classes do not allow, and
# the processes they start inherit it. tests/sim/test_compiled_model.py runs the compiled
# build on purpose (sky_kueue/kueue/compiled.py); SKY_KUEUE_PURE=0 runs the suite on the build.
os.environ.setdefault("SKY_KUEUE_PURE", "1")

REAL_KUEUE_MARK = "real_kueue"
LONG_MARK = "long"
#: Each opt-in tier: its marker, the option that selects it, and what the summary calls it.
TIERS = (
    (REAL_KUEUE_MARK, "--real-kueue", "real-Kueue"),
    (LONG_MARK, "--long", "long"),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--real-kueue",
        action="store_true",
        default=False,
        help="also run the real-Kueue tier (tests/real_kueue): builds and starts real Kubernetes and Kueue",
    )
    parser.addoption(
        "--long",
        action="store_true",
        default=False,
        help="also run the long tier (crash fuzzing, the install from manifests, the model's equivalence)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    deselected: dict[str, int] = {}
    for mark, option, _ in TIERS:
        if config.getoption(option):
            continue
        tier = [item for item in items if item.get_closest_marker(mark)]
        if not tier:
            continue
        config.hook.pytest_deselected(items=tier)
        items[:] = [item for item in items if not item.get_closest_marker(mark)]
        deselected[mark] = len(tier)
    config.stash[_DESELECTED] = deselected


_DESELECTED = pytest.StashKey[dict[str, int]]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    deselected = config.stash.get(_DESELECTED, {})
    for mark, option, name in TIERS:
        count = deselected.get(mark, 0)
        if count:
            terminalreporter.write_line(f"{count} {name} tests deselected: run them with {option} (.ci/run does)")
