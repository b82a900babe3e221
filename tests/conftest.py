"""Suite-wide options: the real-Kueue tier runs only when asked for; the model runs pure Python.

The tests under ``tests/real_kueue`` need a real Kubernetes control plane and the real Kueue
built from their Go modules (``sky-kueue real-cluster build``: tens of minutes the first time,
then cached) and start a cluster (about half a minute). The default run deselects them and
says so in its summary; ``--real-kueue`` selects them (``.ci/run`` runs them as their own
stage). Deselection, not skipping: a selected real-Kueue test whose cluster cannot be built
or started fails.
"""

from __future__ import annotations

import os

import pytest

# The pure-Python model: tests patch its internals, which compiled classes do not allow, and
# the processes they start inherit it. tests/sim/test_compiled_model.py runs the compiled
# build on purpose (sky_kueue/kueue/compiled.py); SKY_KUEUE_PURE=0 runs the suite on the build.
os.environ.setdefault("SKY_KUEUE_PURE", "1")

REAL_KUEUE_MARK = "real_kueue"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--real-kueue",
        action="store_true",
        default=False,
        help="also run the real-Kueue tier (tests/real_kueue): builds and starts real Kubernetes and Kueue",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--real-kueue"):
        return
    real = [item for item in items if item.get_closest_marker(REAL_KUEUE_MARK)]
    if not real:
        return
    config.hook.pytest_deselected(items=real)
    items[:] = [item for item in items if not item.get_closest_marker(REAL_KUEUE_MARK)]
    config.stash[_DESELECTED] = len(real)


_DESELECTED = pytest.StashKey[int]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    count = config.stash.get(_DESELECTED, 0)
    if count:
        terminalreporter.write_line(f"{count} real-Kueue tests deselected: run them with --real-kueue (.ci/run does)")
