"""Dependencies point inward: pure logic never imports I/O, production never the sandbox."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import sky_kueue.controller as controller_package

CONTROLLER = Path(controller_package.__file__).parent
#: Modules that decide things; they must run without SQLite, Kubernetes or the network.
PURE = (
    "sky_kueue.controller.aging",
    "sky_kueue.controller.actuators",
    "sky_kueue.controller.burst",
    "sky_kueue.controller.clock",
    "sky_kueue.controller.detection",
    "sky_kueue.controller.engine",
    "sky_kueue.controller.history",
    "sky_kueue.mirror.identity",
    "sky_kueue.controller.keys",
    "sky_kueue.controller.state_spec",
    "sky_kueue.kueue.api",
    "sky_kueue.mirror.identity",
    "sky_kueue.mirror.preemption_message",
    "sky_kueue.mirror.transitions",
    "sky_kueue.controller.relaunch",
    "sky_kueue.controller.work_queue",
    "sky_kueue.controller.vanished",
    "sky_kueue.mirror.server_state",
)
IO_MODULES = ("sqlite3", "kubernetes", "urllib3", "socket", "http.client", "sky")


def test_pure_modules_import_no_io_library() -> None:
    code = (
        "import sys\n"
        + "".join(f"import {name}\n" for name in PURE)
        + f"bad = sorted(m for m in {IO_MODULES!r} if m in sys.modules)\n"
        + "print(','.join(bad))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "", f"pure modules pulled in: {proc.stdout.strip()}"


def test_no_controller_module_imports_the_sandbox() -> None:
    offenders = []
    for path in sorted(CONTROLLER.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.startswith("sky_kueue.sandbox")]
    assert offenders == []


def _imports(package: Path) -> list[tuple[str, str]]:
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found += [(path.name, alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                found += [(path.name, node.module)]
    return found


def test_the_mirror_never_imports_the_skypilot_side() -> None:
    """One direction only: ``skypilot`` reads the cluster through the mirror, never the reverse."""
    mirror = CONTROLLER.parent / "mirror"
    assert [(f, m) for f, m in _imports(mirror) if m.startswith("sky_kueue.skypilot")] == []


def test_one_kubernetes_stack_no_second_watch_module() -> None:
    assert [(f, m) for f, m in _imports(CONTROLLER.parent) if "kube_watch" in m] == []
