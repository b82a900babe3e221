"""PNG plots of a comparison: wait-time CDFs per class, and one ClusterQueue's timeline.

matplotlib is optional (not a dependency of sky-kueue): it is imported only inside
:func:`plot`, and its absence is a one-line :class:`PlotError`. The backend is forced to
``Agg`` so plotting works without a display.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sky_kueue.sim.compare import Comparison


class PlotError(RuntimeError):
    """The plot cannot be made (matplotlib missing, or the file cannot be written)."""


def require_matplotlib() -> Any:
    """matplotlib.pyplot with the Agg backend.

    Raises:
        PlotError: matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotError("--plot needs matplotlib, which is not installed (pip install matplotlib)") from exc
    return plt


def plot(comparison: Comparison, path: Path) -> None:
    """Writes the figure to ``path``.

    Raises:
        PlotError: matplotlib is not installed, or the file cannot be written.
    """
    plt = require_matplotlib()
    classes = list(reversed(comparison.class_order))
    columns = max(len(classes), 1)
    fig, axes = plt.subplots(2, columns, figsize=(5 * columns, 8), squeeze=False)
    for col, class_name in enumerate(classes):
        ax = axes[0][col]
        for name, run in comparison.runs.items():
            waits = sorted(j.wait_s / 3600.0 for j in run.jobs if j.priority_class == class_name)
            if not waits:
                continue
            fractions = [(i + 1) / len(waits) for i in range(len(waits))]
            ax.step(waits, fractions, where="post", label=name)
        ax.set_title(f"wait CDF: {class_name}")
        ax.set_xlabel("wait (hours)")
        ax.set_ylabel("fraction of jobs")
        ax.set_ylim(0, 1.01)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="lower right")
    timeline_ax = axes[1][0]
    pending_ax = timeline_ax.twinx()
    cq = ""
    for name, run in comparison.runs.items():
        cq = run.timeline_cq
        if not run.timeline:
            continue
        hours = [p.at / 3600.0 for p in run.timeline]
        line = timeline_ax.step(hours, [p.used_gpus for p in run.timeline], where="post", label=f"{name}: GPUs used")
        pending_ax.step(
            hours,
            [p.pending for p in run.timeline],
            where="post",
            linestyle=":",
            color=line[0].get_color(),
            label=f"{name}: pending",
        )
    timeline_ax.set_title(f"ClusterQueue {cq}")
    timeline_ax.set_xlabel("simulated time (hours)")
    timeline_ax.set_ylabel("GPUs in use (solid)")
    pending_ax.set_ylabel("pending Workloads (dotted)")
    timeline_ax.grid(True, alpha=0.3)
    timeline_ax.legend(loc="upper left", fontsize="small")
    for col in range(1, columns):
        axes[1][col].axis("off")
    fig.suptitle(comparison.trace.description, fontsize="small")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise PlotError(f"{path}: cannot write the plot: {exc.strerror or exc}") from exc
    finally:
        plt.close(fig)
