"""The five entry points under fuzz: their base inputs, typed fields, and how to run one.

Every target returns an :class:`Outcome` from an in-process run (click's ``CliRunner`` for
the CLI, a real policy server in a thread for the request body), so a thousand mutants take
seconds; only the cases that could kill the interpreter run in subprocesses
(``test_crash_safety``).
"""

from __future__ import annotations

import copy
import json
import random
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from sky_kueue.cli.main import cli
from tests.fuzz.mutator import BYTE_MUTATIONS, Field, Mutant, Raw, Values, deep_copy, dump_yaml, pick
from tests.fuzz.yaml_operators import WRONG_TYPES, YamlTarget, mutate_yaml

ROOT = Path(__file__).resolve().parents[2]
ORACLE = ROOT / "tests" / "oracle"
#: A mutant must be answered within this (a hang or a CPU burn fails the test).
MUTANT_TIME_LIMIT_SECONDS = 5.0


class MutantTimeout(BaseException):
    """Raised in the main thread when a mutant runs past its time limit (not an Exception,
    so nothing in the program under test can swallow it)."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the block with :class:`MutantTimeout` after ``seconds`` (main thread only)."""

    def expire(signum: int, frame: Any) -> None:
        raise MutantTimeout(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Outcome:
    """What one run produced."""

    code: int
    stdout: str
    stderr: str
    exception: BaseException | None
    seconds: float


def run_cli(args: list[str]) -> Outcome:
    """Run ``sky-kueue ARGS`` in-process."""
    runner = CliRunner(mix_stderr=False)
    started = time.perf_counter()
    try:
        with time_limit(MUTANT_TIME_LIMIT_SECONDS):
            result = runner.invoke(cli, args, catch_exceptions=True)
    except MutantTimeout as timeout:
        return Outcome(-1, "", "", timeout, time.perf_counter() - started)
    exception = result.exception if not isinstance(result.exception, SystemExit) else None
    return Outcome(result.exit_code, result.stdout, result.stderr, exception, time.perf_counter() - started)


# --- predict --snapshot -----------------------------------------------------------------


def _kind(*kinds: str) -> Callable[[Any], bool]:
    return lambda doc: doc.get("kind") in kinds


_ANY = lambda doc: True  # noqa: E731 - a field of every object
_POD = "spec.podSets[*].template.spec"
SNAPSHOT_FIELDS = (
    Field("metadata.name", "str", _ANY),
    Field("metadata.labels", "strmap", _ANY),
    Field("metadata", "map", _ANY),
    Field("spec.nodeLabels", "strmap", _kind("ResourceFlavor")),
    Field("spec.nodeTaints", "list", _kind("ResourceFlavor")),
    Field("value", "int32", _kind("WorkloadPriorityClass")),
    Field("spec.cohort", "str", _kind("ClusterQueue")),
    Field("spec.namespaceSelector", "map", _kind("ClusterQueue")),
    Field("spec.resourceGroups", "list", _kind("ClusterQueue")),
    Field("spec.resourceGroups[*].coveredResources", "list", _kind("ClusterQueue")),
    Field("spec.resourceGroups[*].flavors[*].name", "str", _kind("ClusterQueue")),
    Field("spec.resourceGroups[*].flavors[*].resources[*].nominalQuota", "quota", _kind("ClusterQueue")),
    Field("spec.preemption", "map", _kind("ClusterQueue")),
    Field("spec.preemption.withinClusterQueue", "str", _kind("ClusterQueue")),
    Field("spec.queueingStrategy", "str", _kind("ClusterQueue")),
    Field("spec.fairSharing.weight", "weight", _kind("ClusterQueue", "Cohort", "LocalQueue")),
    Field("spec.clusterQueue", "str", _kind("LocalQueue")),
    Field("spec.queueName", "str", _kind("Workload")),
    Field("spec.priority", "int32", _kind("Workload")),
    Field("spec.podSets", "list", _kind("Workload")),
    Field("spec.podSets[*].count", "count", _kind("Workload")),
    Field(_POD, "map", _kind("Workload")),
    Field(f"{_POD}.containers", "list", _kind("Workload")),
    Field(f"{_POD}.containers[*]", "map", _kind("Workload")),
    Field(f"{_POD}.containers[*].resources", "map", _kind("Workload")),
    Field(f"{_POD}.containers[*].resources.requests", "map", _kind("Workload")),
    Field(f"{_POD}.containers[*].resources.requests.cpu", "request", _kind("Workload")),
    Field(f"{_POD}.containers[*].resources.requests.memory", "request", _kind("Workload")),
    Field(f"{_POD}.nodeSelector", "strmap", _kind("Workload")),
    Field(f"{_POD}.overhead", "map", _kind("Workload")),
    Field(f"{_POD}.overhead.cpu", "request", _kind("Workload")),
    Field(f"{_POD}.tolerations", "list", _kind("Workload")),
    Field("metadata.creationTimestamp", "timestamp", _kind("Workload")),
    Field("status.conditions", "list", _kind("Workload")),
)


def _duplicate_object(rng: random.Random, docs: list[Any]) -> list[Any]:
    """Kubernetes keeps one object per kind, namespace and name: a second one is an error."""
    original = pick(rng, [d for d in docs if isinstance(d, dict)])
    twin = copy.deepcopy(original)
    twin.setdefault("metadata", {}).setdefault("annotations", {})["fuzz"] = "second copy"
    return [*docs, twin]


def _not_a_mapping(rng: random.Random, docs: list[Any]) -> list[Any]:
    index = rng.randrange(len(docs))
    return [*docs[:index], pick(rng, ["just text", [docs[index]], 42]), *docs[index + 1 :]]


def _edit(path: tuple[str, ...], value: Any = None, delete: bool = False) -> Callable[..., list[Any] | None]:
    def apply(rng: random.Random, docs: list[Any]) -> list[Any] | None:
        candidates = [d for d in docs if isinstance(d, dict) and (path[0] != "metadata" or "metadata" in d)]
        if path[-1] in ("namespace", "creationTimestamp"):
            candidates = [d for d in candidates if d.get("kind") == "Workload"]
        if not candidates:
            return None
        doc = pick(rng, candidates)
        node = doc
        for key in path[:-1]:
            node = node.setdefault(key, {})
        if delete:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = value
        return docs

    return apply


def _reorder(rng: random.Random, docs: list[Any]) -> list[Any]:
    shuffled = list(docs)
    rng.shuffle(shuffled)
    return shuffled


def _as_list(rng: random.Random, docs: list[Any]) -> list[Any]:
    return [{"apiVersion": "v1", "kind": "List", "items": docs}]


def _empty_documents(rng: random.Random, docs: list[Any]) -> list[Any]:
    index = rng.randrange(len(docs) + 1)
    return [*docs[:index], None, *docs[index:]]


def _unicode_annotation(rng: random.Random, docs: list[Any]) -> list[Any]:
    doc = pick(rng, [d for d in docs if isinstance(d, dict)])
    doc.setdefault("metadata", {}).setdefault("annotations", {})["fuzz.example/note"] = "naïve — 日本語 ✓"
    return docs


def _millicores(rng: random.Random, docs: list[Any]) -> list[Any] | None:
    """``cpu: 2`` and ``cpu: 2000m`` are the same request."""
    from sky_kueue.kueue import quantity

    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") != "Workload":
            continue
        for pod_set in doc.get("spec", {}).get("podSets", []):
            for container in pod_set.get("template", {}).get("spec", {}).get("containers", []):
                requests = container.get("resources", {}).get("requests", {})
                if "cpu" in requests:
                    requests["cpu"] = f"{quantity.parse_amount('cpu', requests['cpu'])}m"
                    return docs
    return None


def _unknown_field(rng: random.Random, docs: list[Any]) -> list[Any]:
    """The API server prunes unknown fields of these objects; they change nothing."""
    doc = pick(rng, [d for d in docs if isinstance(d, dict)])
    doc["fuzzUnknown"] = {"nested": {"list": [1, "two", None]}}
    return docs


SNAPSHOT_TARGET = YamlTarget(
    fields=SNAPSHOT_FIELDS,
    extra_allowed=True,
    duplicate=_duplicate_object,
    structural=(
        _not_a_mapping,
        _edit(("kind",), "Pod"),
        _edit(("apiVersion",), "kueue.x-k8s.io/v9"),
        _edit(("metadata", "name"), delete=True),
        _edit(("metadata", "name"), ""),
        _edit(("metadata", "namespace"), delete=True),
        _edit(("metadata", "creationTimestamp"), delete=True),
    ),
    valid_rewrites=(_reorder, _as_list, _empty_documents, _unicode_annotation, _millicores, _unknown_field),
    header_mutations=(
        ("# cycle-cap: 0", False),
        ("# cycle-cap: many", False),
        ("# cycle-cap: " + "9" * 5000, False),
        ("# kueue-config: bogusMode", False),
        ("# kueue-config:", False),
        ("# kueue-config: admissionFairSharing usageHalfLifeTime=30m resourceWeights=cpu:NaN", False),
        ("# kueue-config: admissionFairSharing usageHalfLifeTime=30m resourceWeights=cpu:-1", False),
        ("# kueue-config: admissionFairSharing usageHalfLifeTime=30m resourceWeights=cpu:Infinity", False),
        ("# kueue-config: admissionFairSharing usageHalfLifeTime=30m resourceWeights=cpu:1E+999999", False),
        ("# kueue-config: admissionFairSharing usageHalfLifeTime=99999999999999999999h", False),
        ("# kueue-config: admissionFairSharing bogus=1", False),
        ("# kueue-config: fairSharing", True),
        ("# cycle-cap: 2", True),
        (
            "# kueue-config: admissionFairSharing usageHalfLifeTime=30m usageSamplingInterval=5m "
            "resourceWeights=cpu:1,memory:0",
            True,
        ),
    ),
)

#: Public scenarios without a scheduling-mode header (the header mutations add one).
SNAPSHOT_SETS = ("seeds", "public", "hier-public")
SNAPSHOT_BASES_PER_SET = 4


def snapshot_bases() -> list[tuple[str, list[Any]]]:
    """The smallest few scenarios of each set, parsed (the mutator works on documents)."""
    bases = []
    for name in SNAPSHOT_SETS:
        files = sorted((ORACLE / name / "scenarios").glob("*.yaml"), key=lambda p: p.stat().st_size)
        for path in files[:SNAPSHOT_BASES_PER_SET]:
            text = path.read_text(encoding="utf-8")
            bases.append((path.stem, [d for d in yaml.safe_load_all(text) if d is not None]))
    return bases


# --- check-config and setup --teams: pydantic in lax mode ---------------------------------

#: Wrong types under pydantic's lax decoding (no value here is coerced to the right type).
LAX_WRONG_TYPES: dict[str, tuple[Any, ...]] = {
    "str": ({"a": "b"}, ["x"], 7, True, 1.5),
    "name": ({"a": "b"}, ["x"], 7, "Not_A_Name", ""),
    "int": ("five", [1], {"a": 1}, 1.5),
    "bool": ("maybe", [1], {"a": 1}, 5),
    "list": ("text", {"a": 1}, 7),
    "map": ("text", ["x"], 7),
    "strmap": ("text", ["x"], 7, {"k": {"a": 1}}, {"k": 5}),
    "decimal": ("abc", [1], {"a": 1}),
    "quantity": ([1], {"a": 1}, True, "1Qi", "abc"),
}
LAX_WRONG_TYPES.update(dict.fromkeys(("int32", "count", "seconds", "seconds_pos"), LAX_WRONG_TYPES["int"]))

CONFIG_MAGNITUDES: dict[str, Values] = {
    "int32": Values(invalid=(2**31, -(2**31) - 1, 10**30, Raw("9" * 4301))),
    "count": Values(invalid=(-1, 2**31, Raw("9" * 4301)), valid=(0, 5)),
    "seconds": Values(invalid=(0, -5, 2**31, Raw("9" * 4301)), valid=(-1, 60)),
    "seconds_pos": Values(invalid=(0, -1, 2**31, Raw("9" * 4301)), valid=(1, 3600)),
    "decimal": Values(invalid=("-1", "NaN", "Infinity", "1e400", Raw(".nan"), Raw(".inf")), valid=("0.5", 3)),
    "quantity": Values(
        invalid=("1E+999999", "-1", "1e400", Raw(".inf"), Raw(".nan"), 10**30, Raw("9" * 4301)), valid=("0", "1")
    ),
}

CONFIG_FIELDS = (
    Field("teams", "map"),
    Field("teams.*", "map"),
    Field("teams.*.namespace", "name"),
    Field("teams.*.local_queue", "name"),
    Field("teams.*.users", "list"),
    Field("teams.*.priority_classes", "map"),
    Field("teams.*.priority_classes.allowed", "list"),
    Field("teams.*.priority_classes.default", "str"),
    Field("teams.*.limits.max_gpus", "count"),
    Field("teams.*.limits.max_cpus", "decimal"),
    Field("teams.*.admission_timeout_seconds", "seconds"),
    Field("teams.*.burst.max_queue_wait_seconds", "seconds_pos", create=False),
    Field("priority_classes", "map"),
    Field("priority_classes.*", "int32"),
    Field("kubernetes.contexts", "list"),
    Field("kubernetes.gpu_resource", "str"),
    Field("aging.enabled", "bool"),
)


def _second_team_same_queue(rng: random.Random, docs: list[Any]) -> list[Any] | None:
    """Two teams sharing one LocalQueue: the config's cross-check refuses it."""
    teams = docs[0].get("teams", {})
    name = pick(rng, sorted(teams))
    teams["fuzz-twin"] = copy.deepcopy(teams[name])
    return docs


def _unknown_key(rng: random.Random, docs: list[Any]) -> list[Any]:
    docs[0]["fuzz_unknown_key"] = 1
    return docs


def _reorder_keys(rng: random.Random, docs: list[Any]) -> list[Any]:
    items = list(docs[0].items())
    rng.shuffle(items)
    return [dict(items)]


CONFIG_TARGET = YamlTarget(
    fields=CONFIG_FIELDS,
    wrong_types=LAX_WRONG_TYPES,
    extra_allowed=False,
    duplicate=_second_team_same_queue,
    structural=(_not_a_mapping, _unknown_key, _edit(("teams",), {})),
    valid_rewrites=(_reorder_keys,),
    magnitudes=CONFIG_MAGNITUDES,
)

TEAMS_FIELDS = (
    Field("cohort", "str"),
    Field("flavors", "map"),
    Field("flavors.*.resources", "list"),
    Field("flavors.*.node_labels", "strmap"),
    Field("priority_classes.*.value", "int32"),
    Field("priority_classes.*.description", "str"),
    Field("teams.*.quotas.*", "quantity"),
    Field("teams.*.namespace_labels", "strmap"),
    Field("teams.*.priority_classes", "list"),
    Field("lenders.*.quotas.*", "quantity"),
    Field("defaults.preemption", "map"),
    Field("defaults.queueing_strategy", "str"),
)

TEAMS_TARGET = YamlTarget(
    fields=TEAMS_FIELDS,
    wrong_types=LAX_WRONG_TYPES,
    extra_allowed=False,
    structural=(_not_a_mapping, _unknown_key, _edit(("teams",), {}), _edit(("flavors",), {})),
    valid_rewrites=(_reorder_keys,),
    magnitudes=CONFIG_MAGNITUDES,
)


def config_bases() -> list[tuple[str, list[Any]]]:
    return [
        (path.stem, [yaml.safe_load(path.read_text(encoding="utf-8"))])
        for path in (ROOT / "configs" / "sky-kueue.yaml", ROOT / "configs" / "sky-kueue-demo.yaml")
    ]


def teams_bases() -> list[tuple[str, list[Any]]]:
    path = ROOT / "configs" / "teams.yaml"
    return [(path.stem, [yaml.safe_load(path.read_text(encoding="utf-8"))])]


# --- simulate --trace FILE.csv -------------------------------------------------------------

CSV_COLUMNS = ("job_id", "submit_time", "duration", "gpus", "cpus", "memory", "priority_class", "team", "failed")
CSV_BASE_ROWS = (
    ("j1", "0", "600", "1", "4", "16Gi", "low", "vision", "false"),
    ("j2", "30", "1200", "2", "8", "32Gi", "high", "nlp", "false"),
    ("j3", "60", "300", "0", "2", "4Gi", "medium", "vision", "true"),
    ("j4", "90", "1h", "1", "500m", "8Gi", "high", "nlp", "false"),
)
CSV_INVALID_CELLS: dict[str, tuple[str, ...]] = {
    "submit_time": ("x", "nan", "inf", "1e400", "-5", "", "9" * 400, "2025-13-01T00:00:00Z"),
    "duration": ("0", "-5", "nan", "1e400", "", "99999999999999999999h", "1y", "inf"),
    "gpus": ("1.5", "-1", "", "٣", "1e3", "9999999999", " 1 1"),
    "cpus": ("-1", "1e400", "NaN", "1E+999999", "lots", "1e99999999"),
    "memory": ("-1Gi", "1e400", "1Qi", "1E+999999", "9223372036854775808"),
    "priority_class": ("urgent", ""),
    "team": ("",),
    "failed": ("maybe", "2"),
}
CSV_VALID_CELLS: dict[str, tuple[str, ...]] = {
    "cpus": ("0.5", "2000m", ""),
    "memory": ("1Gi", "1073741824", ""),
    "duration": ("1h30m", "90", "0.5"),
    "failed": ("", "yes", "no", "TRUE"),
}


def _csv_text(columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return out.getvalue()


def mutate_csv(rng: random.Random) -> Mutant:
    """A mutant CSV trace (validity by construction, as for YAML)."""
    columns = CSV_COLUMNS
    rows = [list(r) for r in CSV_BASE_ROWS]
    roll = rng.random()
    if roll < 0.55:
        column = pick(rng, sorted(CSV_INVALID_CELLS))
        row = pick(rng, rows)
        value = pick(rng, CSV_INVALID_CELLS[column])
        row[columns.index(column)] = value
        return Mutant(_csv_text(columns, [tuple(r) for r in rows]).encode(), False, f"cell {column}={value[:30]!r}")
    if roll < 0.62:
        rows[1][0] = rows[0][0]
        return Mutant(_csv_text(columns, [tuple(r) for r in rows]).encode(), False, "duplicate job_id")
    if roll < 0.67:
        rows[rng.randrange(1, len(rows))][1] = "2025-03-01T09:00:00Z"
        return Mutant(_csv_text(columns, [tuple(r) for r in rows]).encode(), False, "mixed submit_time forms")
    if roll < 0.72:
        pick(rng, rows).append("surplus")
        return Mutant(_csv_text(columns, [tuple(r) for r in rows]).encode(), False, "more values than columns")
    if roll < 0.76:
        required = ("submit_time", "duration", "gpus", "priority_class", "team")
        drop = columns.index(pick(rng, required))
        kept = tuple(c for i, c in enumerate(columns) if i != drop)
        trimmed = [tuple(v for i, v in enumerate(r) if i != drop) for r in rows]
        return Mutant(_csv_text(kept, trimmed).encode(), False, f"missing column {columns[drop]!r}")
    if roll < 0.84:
        mutation = pick(rng, BYTE_MUTATIONS)
        return Mutant(
            mutation.apply(rng, _csv_text(columns, [tuple(r) for r in rows]).encode()), mutation.valid, mutation.label
        )
    if roll < 0.92:
        column = pick(rng, sorted(CSV_VALID_CELLS))
        row = pick(rng, rows)
        row[columns.index(column)] = pick(rng, CSV_VALID_CELLS[column])
        return Mutant(_csv_text(columns, [tuple(r) for r in rows]).encode(), True, f"valid cell {column}")
    if roll < 0.96:
        rng.shuffle(rows)
        return Mutant(_csv_text(columns, [tuple(r) for r in rows]).encode(), True, "rows reordered")
    extra_columns = (*columns, "fuzz_extra")
    extra_rows = [(*r, "ignored") for r in rows]
    return Mutant(_csv_text(extra_columns, extra_rows).encode(), True, "unknown column")


# --- the policy server's request body -----------------------------------------------------

TASK_FIELDS = (
    Field("name", "str"),
    Field("num_nodes", "num_nodes"),
    Field("resources", "map"),
    Field("resources.labels", "strmap"),
    Field("resources.cpus", "amount"),
    Field("resources.memory", "amount"),
    Field("resources.accelerators", "accelerators"),
    Field("resources.infra", "str"),
    Field("resources.ordered", "list"),
    Field("config", "map"),
    Field("config.kubernetes", "map"),
    Field("envs", "map"),
)
TASK_WRONG_TYPES: dict[str, tuple[Any, ...]] = {
    **WRONG_TYPES,
    "num_nodes": ("two", [1], {"a": 1}, 1.5, True),
    "amount": ({"a": 1}, [1], True),
    "accelerators": ({"A100": "two"}, [1], 5, True),
}
TASK_MAGNITUDES: dict[str, Values] = {"num_nodes": Values(invalid=(0, -1, 2**31, 10**30, Raw("9" * 4301)))}

TASK_TARGET = YamlTarget(
    fields=TASK_FIELDS, wrong_types=TASK_WRONG_TYPES, extra_allowed=True, magnitudes=TASK_MAGNITUDES
)


def task_bases() -> list[tuple[str, dict[str, Any]]]:
    return [
        (path.stem, yaml.safe_load(path.read_text(encoding="utf-8")))
        for path in sorted((ROOT / "task_templates").glob("*.yaml"))
    ]


def request_body(task_text: str, **overrides: Any) -> dict[str, Any]:
    """The inner object of SkyPilot's RestfulAdminPolicy request."""
    return {
        "task": task_text,
        "skypilot_config": "active_workspace: default\n",
        "request_name": "jobs.launch",
        "at_client_side": False,
        "user": "id: abc123\nname: alice",
        "request_options": None,
        "client_api_version": None,
        "client_version": None,
        **overrides,
    }


def encode(inner: Any) -> bytes:
    return json.dumps(json.dumps(inner)).encode()


#: Request-level (JSON) mutations, each invalid.
def _json_mutations(rng: random.Random, task_text: str) -> tuple[bytes, str]:
    choice = rng.randrange(12)
    if choice == 0:
        return b"{not json", "body not JSON"
    if choice == 1:
        depth = pick(rng, [1000, 100_000])
        return b"[" * depth + b"]" * depth, f"JSON nested {depth} deep"
    if choice == 2:
        options = b'"request_options": {"idle_minutes_to_autostop": ' + b"9" * 4400 + b"}"
        return b'{"task": "name: x", "request_name": "launch", ' + options + b"}", "4,400-digit JSON integer"
    if choice == 3:
        return encode([request_body(task_text)]), "body is a list"
    if choice == 4:
        body = request_body(task_text)
        del body["task"]
        return encode(body), "no task"
    if choice == 5:
        return encode(request_body(pick(rng, [[1], {"a": 1}, 5]))), "task not YAML text"
    if choice == 6:
        return encode(request_body(task_text, request_name="   ")), "empty request_name"
    if choice == 7:
        return encode(request_body(task_text, user="name: nobody")), "user without id"
    if choice == 8:
        return encode(request_body(task_text, at_client_side=pick(rng, ["yes", 1, None]))), "at_client_side not bool"
    if choice == 9:
        return encode(request_body(task_text, request_options={"idle_minutes_to_autostop": "soon"})), "bad options"
    if choice == 10:
        return encode(
            request_body(task_text, skypilot_config=pick(rng, ["- a\n- b\n", "workspaces: [1]\n"]))
        ), "bad config"
    return encode(request_body(task_text)).replace(b"j", b"\xff", 1), "invalid UTF-8 body"


def mutate_request(rng: random.Random, task: dict[str, Any]) -> Mutant:
    """A mutant policy request body."""
    roll = rng.random()
    task_text = yaml.safe_dump(task, sort_keys=False)
    if roll < 0.25:
        data, label = _json_mutations(rng, task_text)
        return Mutant(data, False, f"request: {label}")
    if roll < 0.32:
        inner = request_body(task_text, fuzz_unknown="ignored")
        items = list(inner.items())
        rng.shuffle(items)
        return Mutant(encode(dict(items)), True, "request keys reordered, one unknown")
    if roll < 0.36:
        return Mutant(json.dumps(request_body(task_text)).encode(), True, "request as a plain JSON object")
    task_mutant = mutate_yaml(rng, [deep_copy(task)], TASK_TARGET)
    try:
        text = task_mutant.data.decode("utf-8")
    except UnicodeDecodeError:
        # An encoding mutation of the task: it reaches the server as the body's bytes.
        body = encode(request_body("PLACEHOLDER")).replace(b"PLACEHOLDER", task_mutant.data[:40] + b"\xff")
        return Mutant(body, False, f"task: {task_mutant.label}")
    return Mutant(encode(request_body(text)), task_mutant.valid, f"task: {task_mutant.label}")


def dumped(docs: list[Any]) -> bytes:
    return dump_yaml(docs).encode()
