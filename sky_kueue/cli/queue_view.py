"""Rich rendering of a :class:`~sky_kueue.mirror.view.QueueView`, kubectl-like.

One block per ClusterQueue: a title line (cohort, preemptions), a quota table (per flavor and
resource: nominal, usage, borrowed, lent, limits) and a workload table (admitted first, then
pending in queue order). Then, when the cluster has relaunch lanes, one line per lane
(admitted/nominal per resource, relaunches admitted and waiting) and the waiting relaunches
with their wait, longest first. Upper-case headers, ages like ``kubectl get`` (``5m``, ``3h``,
``2d``), ``-`` for unknown values.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from sky_kueue.kueue import quantity
from sky_kueue.mirror.lanes import LaneView
from sky_kueue.mirror.view import POSITIONS_VISIBILITY, ClusterQueueView, QueueView, WorkloadRow

if TYPE_CHECKING:
    from sky_kueue.cli.queue_eta import PendingEta

#: Longest Kueue message shown in a table cell (characters).
MAX_MESSAGE_CHARS = 90
#: Width used when output goes to a pipe or file (characters): like kubectl, don't squeeze
#: columns to 80 when nobody's terminal is there to fit.
PIPE_WIDTH_CHARS = 220
_SECONDS_PER_UNIT: tuple[tuple[str, int], ...] = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def age(seconds: float) -> str:
    """``kubectl``-style age: the largest whole unit (``45s``, ``12m``, ``3h``, ``2d``)."""
    for unit, size in _SECONDS_PER_UNIT:
        if seconds >= size or unit == "s":
            return f"{int(seconds // size)}{unit}"
    return "0s"


def console() -> Console:
    """A console for standard output: the terminal's width, or a wide one for pipes."""
    return Console(width=None if sys.stdout.isatty() else PIPE_WIDTH_CHARS)


def _limit(resource: str, value: int | None) -> str:
    return "-" if value is None else quantity.format_amount(resource, value)


def _quota_table(cq: ClusterQueueView) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for header in ("FLAVOR", "RESOURCE", "NOMINAL", "USAGE", "BORROWED", "LENT", "BORROW-LIMIT", "LEND-LIMIT"):
        table.add_column(header, no_wrap=True, justify="left" if header in ("FLAVOR", "RESOURCE") else "right")
    for row in cq.resources:
        fmt = quantity.format_amount
        table.add_row(
            row.flavor,
            row.resource,
            fmt(row.resource, row.nominal),
            fmt(row.resource, row.usage),
            fmt(row.resource, row.borrowed) if row.borrowed else "-",
            fmt(row.resource, row.lent) if row.lent else "-",
            _limit(row.resource, row.borrowing_limit),
            _limit(row.resource, row.lending_limit),
        )
    return table


def _reason(row: WorkloadRow) -> str:
    text = f"{row.reason}: {row.message}" if row.reason and row.message else row.reason or row.message
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"


def _eta_cell(etas: Mapping[str, PendingEta], row: WorkloadRow) -> str:
    """``12m (declared)``, ``unknown: no run times``; ``-`` when not estimated (admitted)."""
    eta = etas.get(row.key)
    return "-" if eta is None else eta.text().removeprefix("ETA ")


def _workload_table(cq: ClusterQueueView, predicted: bool, etas: Mapping[str, PendingEta] | None = None) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    headers = ["WORKLOAD", "STATE", "PRIORITY", "AGE", "POS", "SKYPILOT", "PREEMPTED"]
    if predicted:
        headers.append("PREDICTED")
    if etas is not None:
        headers.append("ETA")
    headers.append("REASON")
    for header in headers:
        table.add_column(
            header,
            no_wrap=header not in ("REASON", "PREDICTED", "ETA"),
            justify="right" if header in ("PRIORITY", "AGE", "POS", "PREEMPTED") else "left",
        )
    for row in (*cq.admitted, *cq.pending):
        cells = [
            row.key,
            row.state,
            str(row.priority),
            age(row.age_seconds),
            "-" if row.position is None else str(row.position),
            row.skypilot.display() if row.skypilot and row.skypilot.display() else "-",
            str(row.preemptions) if row.preemptions else "-",
        ]
        if predicted:
            cells.append(row.predicted or "-")
        if etas is not None:
            cells.append(_eta_cell(etas, row))
        cells.append(_reason(row) or "-")
        table.add_row(*cells)
    return table


def render(view: QueueView, etas: Mapping[str, PendingEta] | None = None) -> RenderableType:
    """The whole view as one renderable; ``etas``: the pending Workloads' ETAs (an ETA column
    when predicted)."""
    parts: list[RenderableType] = []
    if not view.cluster_queues:
        parts.append(Text("No ClusterQueues match."))
    for cq in view.cluster_queues:
        title = Text.assemble(
            ("ClusterQueue ", "bold"),
            (cq.name, "bold cyan"),
            f"  cohort: {cq.cohort or '-'}",
            f"  admitted: {len(cq.admitted)}  pending: {len(cq.pending)}  preemptions: {cq.preemptions}",
        )
        parts.extend([title, _quota_table(cq)])
        if cq.admitted or cq.pending:
            parts.append(Text(""))
            parts.append(_workload_table(cq, view.predicted, etas if view.predicted else None))
        parts.append(Text(""))
    if view.lanes:
        parts.extend(render_lanes(view.lanes))
        parts.append(Text(""))
    source = "Kueue's visibility API" if view.positions_from == POSITIONS_VISIBILITY else "the model's queue order"
    parts.append(Text(f"positions: {source}; as of {view.taken_at.strftime('%Y-%m-%d %H:%M:%S %Z')}", style="dim"))
    for note in view.notes:
        parts.append(Text(f"note: {note}", style="yellow"))
    return Group(*parts)


def render_lanes(lanes: tuple[LaneView, ...]) -> list[RenderableType]:
    """The relaunch lanes: occupancy per lane, then the relaunches waiting for each."""
    parts: list[RenderableType] = [Text("Relaunch lanes", style="bold")]
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for header in ("LANE", "SCOPE", "ADMITTED/NOMINAL", "RUNNING", "WAITING", "LONGEST WAIT"):
        table.add_column(header, no_wrap=header != "ADMITTED/NOMINAL")
    for lane in lanes:
        longest = age(lane.waiting[0].wait_seconds) if lane.waiting else "-"
        table.add_row(
            lane.cluster_queue,
            lane.scope,
            lane.occupancy_text(),
            str(lane.admitted),
            str(lane.waiting_count),
            longest,
        )
    parts.append(table)
    waits = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for header in ("WAITING RELAUNCH", "LANE", "PRIORITY", "WAIT", "SKYPILOT"):
        waits.add_column(header, no_wrap=True, justify="right" if header in ("PRIORITY", "WAIT") else "left")
    for lane in lanes:
        for waiting in lane.waiting:
            waits.add_row(
                waiting.workload,
                lane.cluster_queue,
                str(waiting.priority),
                age(waiting.wait_seconds),
                waiting.job or "-",
            )
    if waits.row_count:
        parts.extend([Text(""), waits])
    return parts


def render_side_by_side(
    clusters: list[tuple[str, QueueView | None, str | None]],
    etas: Mapping[str, Mapping[str, PendingEta]] | None = None,
) -> RenderableType:
    """Several clusters, one column each: the context as a title, then its view (or why
    there is none); ``etas``: per context, its pending Workloads' ETAs."""
    grid = Table.grid(padding=(0, 4))
    for _ in clusters:
        grid.add_column(vertical="top")
    cells: list[RenderableType] = []
    for context, view, problem in clusters:
        title = Text.assemble(("context ", "bold"), (context, "bold magenta"))
        shown = (etas or {}).get(context)
        body: RenderableType = render(view, shown) if view is not None else Text(f"error: {problem}", style="red")
        cells.append(Group(title, body))
    grid.add_row(*cells)
    return grid
