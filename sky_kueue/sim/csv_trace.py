"""A user's own trace as CSV, so aging and burst settings can be tuned before touching a cluster.

Format: a header row, then one job per row. Columns (any order; extra columns are ignored):

==================  ========  ===================================================================
column              required  value
==================  ========  ===================================================================
``submit_time``     yes       seconds from the trace's start (``0``, ``12.5``) or an RFC 3339
                              timestamp (``2025-03-01T09:00:00Z``); all rows use the same form
``duration``        yes       run time: seconds (``3600``) or a Go duration (``1h30m``); > 0
``gpus``            yes       whole GPUs, >= 0
``cpus``            no        cores (``8``, ``0.5``) or a quantity (``500m``); default 8 per GPU
``memory``          no        bytes or a quantity (``64Gi``); default 64 GiB per GPU
``priority_class``  yes       a WorkloadPriorityClass name (``low``, ``medium``, ``high`` unless
                              ``--cluster`` defines others)
``team``            yes       the team; with ``--cluster``, a LocalQueue ``namespace/name`` or a
                              namespace with one LocalQueue
``job_id``          no        unique id (default: ``row-<line>``)
``failed``          no        ``true``/``false``: the job exits with an error after ``duration``
==================  ========  ===================================================================

Every bad value is reported as ``FILE:LINE: column 'NAME': what was expected, got 'VALUE'``.

Without ``--cluster``, each team gets a ClusterQueue in one cohort whose nominal GPU quota
is the team's mean GPU demand over the trace (divided by :data:`CSV_SIZING_LOAD`), and at
least its largest job, so the trace loads the cluster about as it loaded the real one.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from sky_kueue.inputs import files
from sky_kueue.inputs.errors import InputError
from sky_kueue.kueue import loader
from sky_kueue.kueue.errors import ModelError
from sky_kueue.sim import trace_row
from sky_kueue.sim.cluster import (
    DEFAULT_CPU_PER_GPU_MILLI,
    DEFAULT_MEMORY_PER_GPU_BYTES,
    ClusterSpec,
    SimCluster,
    TeamSpec,
    build_cluster,
    cluster_from_state,
)
from sky_kueue.sim.traces import JobSpec, Trace, TraceError

REQUIRED_COLUMNS = ("submit_time", "duration", "gpus", "priority_class", "team")
OPTIONAL_COLUMNS = ("cpus", "memory", "job_id", "failed")
#: Generated team quotas are mean GPU demand divided by this (1.0: the trace fills them).
CSV_SIZING_LOAD = 1.0


@dataclass(frozen=True)
class _Row:
    line: int
    values: dict[str, str]


def _rows(path: Path) -> tuple[list[str], Iterator[_Row]]:
    try:
        text = files.read_text(path, "CSV file")
    except InputError as exc:
        raise TraceError(str(exc)) from None
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        header = next(reader, None)
        if header is None:
            raise TraceError(f"{path}: empty file; expected a header row with {', '.join(REQUIRED_COLUMNS)}")
        names = [h.strip().lower() for h in header]
        rows: list[_Row] = []
        for cells in reader:
            if not any(c.strip() for c in cells):
                continue
            if len(cells) > len(names):
                raise TraceError(
                    f"{path}:{reader.line_num}: {len(cells)} values but the header has {len(names)} columns"
                )
            rows.append(_Row(reader.line_num, {n: c.strip() for n, c in zip(names, cells, strict=False)}))
    except csv.Error as exc:
        raise TraceError(f"{path}: invalid CSV: {exc}") from None
    return names, iter(rows)


def _bad(path: Path, row: _Row, column: str, expected: str) -> TraceError:
    return TraceError(f"{path}:{row.line}: column {column!r}: expected {expected}, got {row.values.get(column, '')!r}")


def load(path: Path, *, cluster_yaml: Path | None = None) -> Trace:
    """Reads a CSV trace.

    Args:
        path: the CSV file.
        cluster_yaml: Kueue objects (multi-document YAML) to run on; default: generated.

    Raises:
        TraceError: unreadable file, missing columns, or a bad row (``FILE:LINE: ...``).
    """
    names, rows = _rows(path)
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise TraceError(
            f"{path}: header: missing column(s) {', '.join(repr(m) for m in missing)}; "
            f"required: {', '.join(REQUIRED_COLUMNS)}; optional: {', '.join(OPTIONAL_COLUMNS)}"
        )
    state = None
    if cluster_yaml is not None:
        try:
            state = loader.load_state(loader.read_text(cluster_yaml), str(cluster_yaml))
        except ModelError as exc:
            raise TraceError(str(exc)) from exc
        state.workloads.clear()
    known_classes = set(state.priority_classes) if state is not None else {"low", "medium", "high"}
    jobs: list[JobSpec] = []
    seen: dict[str, int] = {}
    absolute: bool | None = None
    for row in rows:
        try:
            cells = trace_row.parse_row(row.values)
        except trace_row.RowError as exc:
            raise _bad(path, row, exc.column, exc.expected) from None
        submit = cells.submit_time
        if absolute is None:
            absolute = submit.absolute
        elif absolute != submit.absolute:
            raise _bad(path, row, "submit_time", "the same form as the first row (seconds or timestamps)")
        gpus = cells.gpus
        cpu_milli = cells.cpus if cells.cpus is not None else gpus * DEFAULT_CPU_PER_GPU_MILLI
        memory = cells.memory if cells.memory is not None else gpus * DEFAULT_MEMORY_PER_GPU_BYTES
        if gpus == 0 and cpu_milli == 0 and memory == 0:
            raise _bad(path, row, "gpus", "a job that requests something (gpus, cpus or memory)")
        klass = cells.priority_class
        if klass not in known_classes:
            raise _bad(path, row, "priority_class", f"one of {', '.join(sorted(known_classes))}")
        job_id = cells.job_id or f"row-{row.line}"
        if job_id in seen:
            raise _bad(path, row, "job_id", f"a unique id (line {seen[job_id]} has the same)")
        seen[job_id] = row.line
        jobs.append(
            JobSpec(
                job_id=job_id,
                submit_s=submit.seconds,
                duration_s=cells.duration,
                gpus=gpus,
                cpu_milli=cpu_milli,
                memory_bytes=memory,
                priority_class=klass,
                team=cells.team,
                fails=cells.failed,
            )
        )
    if not jobs:
        raise TraceError(f"{path}: no jobs after the header")
    start = min(j.submit_s for j in jobs)
    if max(j.submit_s for j in jobs) - start > trace_row.MAX_TRACE_SECONDS:
        raise TraceError(f"{path}: column 'submit_time': the trace spans more than {trace_row.MAX_TRACE_SECONDS:.0f} s")
    jobs = sorted(
        (replace(j, submit_s=j.submit_s - start) for j in jobs),
        key=lambda j: (j.submit_s, j.job_id),
    )
    teams = sorted({j.team for j in jobs})
    try:
        cluster = cluster_from_state(state, teams) if state is not None else _sized_cluster(jobs, teams)
    except ModelError as exc:
        raise TraceError(f"{cluster_yaml or path}: {exc}") from exc
    description = f"{path.name}: {len(jobs)} jobs, {len(teams)} teams" + (
        f", cluster {cluster_yaml.name}" if cluster_yaml is not None else ", generated quotas"
    )
    return Trace(name=path.name, jobs=tuple(jobs), cluster=cluster, description=description)


def _sized_cluster(jobs: list[JobSpec], teams: list[str]) -> SimCluster:
    span = max(max(j.submit_s + j.duration_s for j in jobs), 1.0)
    specs = []
    for team in teams:
        own = [j for j in jobs if j.team == team]
        demand = sum(j.gpus * j.duration_s for j in own) / span / CSV_SIZING_LOAD
        largest = max(j.gpus for j in own)
        cpu = max(j.cpu_milli for j in own)
        memory = max(j.memory_bytes for j in own)
        gpus = max(largest, math.ceil(demand))
        specs.append(
            TeamSpec(
                name=team,
                gpus=gpus,
                cpu_milli=max(cpu, gpus * DEFAULT_CPU_PER_GPU_MILLI * 2),
                memory_bytes=max(memory, gpus * DEFAULT_MEMORY_PER_GPU_BYTES * 2),
            )
        )
    return build_cluster(ClusterSpec(teams=tuple(specs)))
