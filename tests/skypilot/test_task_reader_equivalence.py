"""sky-kueue's own task reader gives what SkyPilot's parser gives, or leaves the task to it.

``launch --dry-run`` reads the task with :mod:`sky_kueue.skypilot.task_reader` instead of
``sky.Task.from_yaml(path).to_yaml_config()`` (issue 35, item 6). For every shipped task
template, every task fixture and a table of tricky spellings, the reader either returns
exactly SkyPilot's dict (``any_of`` compared as a set: SkyPilot keeps it in a Python set of
objects, whose order varies per process) and therefore the same demand (GPU type and count,
CPUs, memory, nodes, pod labels), or says it leaves the task to SkyPilot; it never reads a
task SkyPilot refuses. The same for the user's identity and SkyPilot's client config.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sky_kueue.skypilot import client_identity, skypilot_files
from sky_kueue.skypilot.demand import DemandError, accelerator_count, pod_requests
from sky_kueue.skypilot.task_reader import NotRead, read_task, task_from_text
from sky_kueue.skypilot.task_yaml import OVERRIDES_KEY, candidates, get_path, parse_infra
from tests.skypilot.builders import REPO, TEMPLATES
from tests.skypilot.conftest import SkyEnv

GPU_RESOURCE = "nvidia.com/gpu"
TASK_FILES = sorted([*TEMPLATES.glob("*.yaml"), *(REPO / "tests" / "e2e" / "tasks").glob("*.yaml")])

#: (spelling, whether the reader reads it itself). SkyPilot is asked about every one of them.
SPELLINGS: list[tuple[str, bool]] = [
    # accelerators
    ("resources: {accelerators: A100:2}", True),
    ("resources: {accelerators: {A100: 2}}", True),
    ("resources: {accelerators: A100}", True),
    ("resources: {accelerators: 'A100:0.5'}", True),
    ("resources: {accelerators: {A100: 1.5}}", True),
    ("resources: {accelerators: {A100: null}}", True),
    ("resources: {accelerators: {A100: 2.0}}", True),
    ("resources: {accelerators: [A100:2, H100:1]}", True),
    ("resources: {accelerators: [A100:2, A100:2]}", True),
    ("resources: {accelerators: {A100: 2, H100: 1}}", True),
    ("resources: {accelerators: 'a100:2'}", True),
    ("resources: {gpus: 'L4:1'}", True),
    ("resources: {gpus: 'A100:2', accelerators: A100:1}", False),
    ("resources: {accelerators: 'A100:0'}", False),
    ("resources: {accelerators: {A100: 0}}", False),
    ("resources: {accelerators: 'A100:two'}", False),
    ("resources: {accelerators: {A100: true}}", False),
    ("resources: {accelerators: 'tpu-v4-8'}", False),
    # cpus
    ("resources: {cpus: 4+}", True),
    ("resources: {cpus: 4.5}", True),
    ("resources: {cpus: 4.0}", True),
    ("resources: {cpus: '4'}", True),
    ("resources: {cpus: 0}", False),
    ("resources: {cpus: nan}", False),
    ("resources: {cpus: true}", False),
    ("resources: {cpus: '4 '}", False),
    # memory
    ("resources: {memory: 8+}", True),
    ("resources: {memory: 16GB}", True),
    ("resources: {memory: 16gb}", True),
    ("resources: {memory: 16Gb}", True),
    ("resources: {memory: 512MB}", True),
    ("resources: {memory: 1TB+}", True),
    ("resources: {memory: 1.5TB}", True),
    ("resources: {memory: 100KB}", True),
    ("resources: {memory: 16Gi}", True),
    ("resources: {memory: 2x}", True),
    ("resources: {memory: 16GBx}", True),
    ("resources: {memory: 16.5}", True),
    ("resources: {memory: '0.5'}", True),
    ("resources: {memory: 2X}", False),
    ("resources: {memory: 16G}", False),
    ("resources: {memory: 0}", False),
    ("resources: {memory: 1e3}", False),
    # where
    ("resources: {infra: k8s}", True),
    ("resources: {infra: K8S/Ctx}", True),
    ("resources: {infra: kubernetes/ctx}", True),
    ("resources: {infra: 'k8s/*'}", True),
    ("resources: {infra: k8s/arn:aws:eks:us-east-1:1:cluster/x}", True),
    ("resources: {cloud: kubernetes, region: ctx}", True),
    ("resources: {cloud: Kubernetes}", True),
    ("resources: {infra: 'k8s/ctx/'}", False),
    ("resources: {infra: k8s/ssh-pool}", False),
    ("resources: {cloud: k8s}", False),
    ("resources: {infra: '*/ctx'}", False),
    ("resources: {infra: aws}", False),
    ("resources: {infra: k8s, cloud: kubernetes}", False),
    ("resources: {region: ctx}", False),
    ("resources: {zone: z, cloud: kubernetes}", False),
    # nodes
    ("num_nodes: 3\nresources: {cpus: 2}", True),
    ("num_nodes: 0", False),
    ("num_nodes: true", False),
    ("num_nodes: 2.0", False),
    # any_of / ordered
    ("resources: {any_of: [{infra: k8s/a}, {infra: k8s/b}], cpus: 2}", True),
    ("resources: {ordered: [{infra: k8s/a}, {infra: k8s/b, cpus: 4}], cpus: 2, labels: {z: w}}", True),
    ("resources: {ordered: [{infra: k8s/a, labels: {x: y}}, {infra: k8s/b}]}", True),
    ("resources: {ordered: [{infra: k8s/a}]}", True),
    ("resources: {accelerators: A100:2, any_of: [{infra: k8s/a}, {infra: k8s/b, accelerators: H100:1}]}", True),
    ("resources: {ordered: [{cloud: kubernetes, region: a}, {infra: K8s/b, memory: 1TB}], memory: 8+, gpus: L4}", True),
    ("resources: {ordered: [{infra: k8s/a, labels: {x: y}}, {infra: k8s/b}], labels: {z: w}}", False),
    ("resources: {ordered: []}", False),
    ("resources: {ordered: [{infra: k8s/a}], any_of: [{infra: k8s/b}]}", False),
    ("resources: {accelerators: A100:2, ordered: [{infra: k8s/a}, {infra: k8s/b, accelerators: null}]}", False),
    ("resources: {accelerators: [A100:2, H100:1], ordered: [{infra: k8s/a}]}", False),
    ("resources: {accelerators: {A100: 2, H100: 1}, any_of: [{infra: k8s/a}]}", False),
    ("resources: {ordered: [{infra: k8s/a, accelerators: {A100: null}}]}", False),
    ("resources: {ordered: [{infra: k8s/a, cpus: null}], cpus: 4}", False),
    # labels, priority, recovery, other resource keys
    ("resources: {labels: {sky-kueue.io/team: team-a}}", True),
    ("resources: {labels: {}}", True),
    ("resources: {labels: {a: true}}", False),
    ("resources: {priority_class: dev-priority, job_recovery: FAILOVER}", True),
    ("resources: {priority_class: '  dev  '}", True),
    ("resources: {priority_class: ''}", True),
    ("resources: {job_recovery: none}", True),
    ("resources: {job_recovery: NONE}", True),
    ("resources: {job_recovery: {strategy: failover, max_restarts_on_errors: 2}}", True),
    ("resources: {job_recovery: {max_restarts_on_errors: 2}}", True),
    ("resources: {job_recovery: {strategy: none}}", True),
    ("resources: {job_recovery: {strategy: x, recover_on_exit_codes: [1]}}", False),
    ("resources: {instance_type: 4CPU--16GB}", True),
    ("resources:", True),
    ("resources: {cpus: null, memory: null, accelerators: null, labels: null}", True),
    ("resources: {use_spot: false}", False),
    ("resources: {disk_size: 100}", False),
    ("resources: {cpus: [1, 2], nonsense: true}", False),
    # the task's config block
    ("config: {kubernetes: {pod_config: {metadata: {labels: {a: b}}}}}\nresources: {cpus: 1}", True),
    (
        "config: {kubernetes: {pod_config: {metadata: {labels: {a: b}}}}}\n"
        "resources: {ordered: [{cpus: 1}, {cpus: 2}]}",
        True,
    ),
    ("config: {kubernetes: {pod_config: {spec: {nodeSelector: {a: b}}}}}", True),
    ("config: {kubernetes: {pod_config: {}}}", True),
    ("config: {kubernetes: {}}", True),
    ("config: {}", True),
    ("config:", True),
    ("config: {kubernetes: {provision_timeout: 10}}", False),
    # envs, workdir, name, setup/run, other top-level keys, YAML problems
    ("envs: {A: 1, B: true, C: 1.5, D: ''}\nrun: echo", True),
    ("envs: {}", True),
    ("envs:", False),
    ("envs: {A: null}", False),
    ("envs: {1A: x}", False),
    ("envs: {SKYPILOT_DOCKER_USERNAME: x}", False),
    ("workdir: .\nrun: echo", True),
    ("workdir: ${DIR}\nenvs: {DIR: /tmp}", False),
    ("", True),
    ("name: x", True),
    ("name: 5", False),
    ("setup: [a, b]", False),
    ("run: 5", False),
    ("file_mounts: {/a: /tmp}", False),
    ("name: a\nname: b", False),
    ("- a", False),
    ("just text", False),
    ("name: x\r\nrun: |\r\n  echo a\r\n", True),
]
#: Spellings SkyPilot answers only after fetching its accelerator catalog from the internet:
#: asked of the reader alone, which must leave them to SkyPilot.
CATALOG_SPELLINGS = ["resources: {accelerators: 80GB+}", "resources: {accelerators: 'nvidia:80GB:2'}"]


def skypilots(sky_env: SkyEnv, text: str) -> dict[str, Any] | str:
    """SkyPilot's own reading of ``text``, or its refusal as text."""
    try:
        loaded: dict[str, Any] = sky_env.sky.Task.from_yaml_str(text).to_yaml_config()
    except (ValueError, TypeError, KeyError, AttributeError, AssertionError) as exc:
        return f"refused: {type(exc).__name__}"
    return loaded


def comparable(task: dict[str, Any]) -> dict[str, Any]:
    """``task`` with ``any_of`` as a sorted list (SkyPilot's order varies per process)."""
    out = json.loads(json.dumps(task))
    group = out.get("resources", {})
    if "any_of" in group:
        group["any_of"] = sorted(group["any_of"], key=lambda c: json.dumps(c, sort_keys=True))
    return out


def demand(task: dict[str, Any]) -> tuple[int, list[str]]:
    """What Kueue is asked for: nodes, and per candidate the location, GPU type and count,
    pod requests (CPU millicores, memory bytes, GPUs) and pod labels (or why the policy cannot
    size it: ``memory: 100KB`` is ``'9.5367431640625e-05'`` GB to SkyPilot, which
    :mod:`sky_kueue.skypilot.demand` does not read)."""
    rows = []
    for candidate in candidates(task):
        try:
            requests: dict[str, int] | str = pod_requests(candidate, GPU_RESOURCE)
        except DemandError as exc:
            requests = str(exc)
        pod_labels = {
            **(candidate.get("labels") or {}),
            **(get_path(candidate, OVERRIDES_KEY, "kubernetes", "pod_config", "metadata", "labels") or {}),
        }
        row = {
            "infra": parse_infra(candidate).to_infra_string(),
            "gpu_types": sorted(candidate.get("accelerators") or {}),
            "gpus": accelerator_count(candidate),
            "requests": requests,
            "pod_labels": pod_labels,
        }
        rows.append(json.dumps(row, sort_keys=True))
    any_of = "any_of" in task.get("resources", {})
    return task["num_nodes"], sorted(rows) if any_of else rows


def assert_same_as_skypilot(fast: dict[str, Any], skypilot: dict[str, Any] | str, what: str) -> None:
    assert not isinstance(skypilot, str), f"{what}: the reader reads a task SkyPilot {skypilot}"
    assert comparable(fast) == comparable(skypilot), what
    assert demand(fast) == demand(skypilot), what


@pytest.mark.parametrize("path", TASK_FILES, ids=lambda p: p.name)
def test_every_shipped_task_is_read_as_skypilot_reads_it(sky_env: SkyEnv, path: Path) -> None:
    fast = read_task(path)
    assert not isinstance(fast, NotRead), f"{path.name} is left to SkyPilot: {fast}"
    assert_same_as_skypilot(fast, sky_env.sky.Task.from_yaml(str(path)).to_yaml_config(), path.name)


def test_tricky_spellings_are_read_as_skypilot_reads_them_or_left_to_it(sky_env: SkyEnv) -> None:
    read = left = 0
    for text, reads_itself in SPELLINGS:
        fast = task_from_text(text)
        skypilot = skypilots(sky_env, text)
        if isinstance(fast, NotRead):
            assert not reads_itself, f"{text!r} left to SkyPilot: {fast.reason}"
            left += 1
            continue
        assert reads_itself, f"{text!r} read, expected to be left to SkyPilot"
        assert_same_as_skypilot(fast, skypilot, repr(text))
        read += 1
    assert (read, left) == (sum(r for _, r in SPELLINGS), sum(not r for _, r in SPELLINGS))


@pytest.mark.parametrize("text", CATALOG_SPELLINGS)
def test_accelerators_named_by_memory_are_left_to_skypilots_catalog(text: str) -> None:
    fast = task_from_text(text)
    assert isinstance(fast, NotRead)
    assert "by memory" in fast.reason


def test_the_config_keys_are_skypilots(sky_env: SkyEnv) -> None:
    from sky.utils import schemas

    assert set(schemas.get_config_schema()["properties"]) == skypilot_files.CONFIG_KEYS


# --- the identity and SkyPilot config a request carries ----------------------------------------

#: name: (global config, project config); every one is read from the files.
CONFIGS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "none": ({}, {}),
    "a context list, an admin policy, an API server and a database": (
        {
            "kubernetes": {"allowed_contexts": ["a", "b"]},
            "admin_policy": "sky_kueue.skypilot.policy.KueuePolicy",
            "api_server": {"endpoint": "http://127.0.0.1:46580"},
            "db": "postgresql://u@h/d",
        },
        {},
    ),
    "the project overlays the global config": (
        {"kubernetes": {"allowed_contexts": ["a"], "pod_config": {"metadata": {"labels": {"x": "y"}}}}},
        {"kubernetes": {"allowed_contexts": "all"}, "jobs": {"controller": {"resources": {"cpus": 2}}}},
    ),
    "a workspace": (
        {"active_workspace": "team-b", "workspaces": {"team-b": {"kubernetes": {"allowed_contexts": ["b"]}}}},
        {},
    ),
}


@pytest.fixture()
def skypilot_files_env(sky_env: SkyEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """SkyPilot's config files and user hash in ``tmp_path``, SkyPilot reloaded from them."""
    from sky import skypilot_config
    from sky.utils import common_utils

    monkeypatch.setenv("SKYPILOT_GLOBAL_CONFIG", str(tmp_path / "global.yaml"))
    monkeypatch.setenv("SKYPILOT_PROJECT_CONFIG", str(tmp_path / "project.yaml"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home" / ".sky").mkdir(parents=True)
    (tmp_path / "home" / ".sky" / "user_hash").write_text("ab12cd34\n")
    monkeypatch.setattr(common_utils, "USER_HASH_FILE", str(tmp_path / "home" / ".sky" / "user_hash"))
    for name in ("SKYPILOT_USER", "SKYPILOT_USER_ID", "SKYPILOT_CONFIG", "IS_SKYPILOT_SERVER"):
        monkeypatch.delenv(name, raising=False)
    yield tmp_path
    monkeypatch.undo()
    skypilot_config.reload_config()


def write_configs(root: Path, global_config: dict[str, Any], project_config: dict[str, Any]) -> None:
    from sky import skypilot_config

    (root / "global.yaml").write_text(yaml.safe_dump(global_config))
    (root / "project.yaml").write_text(yaml.safe_dump(project_config))
    skypilot_config.reload_config()


@pytest.mark.parametrize("setup", sorted(CONFIGS))
def test_the_request_config_and_identity_are_skypilots(
    skypilot_files_env: Path, monkeypatch: pytest.MonkeyPatch, setup: str
) -> None:
    import os

    write_configs(skypilot_files_env, *CONFIGS[setup])
    for user in (None, "carol"):
        if user is not None:
            monkeypatch.setenv("SKYPILOT_USER", user)
        from_files = skypilot_files.request_config(os.environ)
        assert from_files is not None
        assert from_files == client_identity.client_skypilot_config()  # SkyPilot is loaded: asks it
        assert client_identity.identity_from_files(os.environ) == client_identity.current_identity()


def test_a_user_id_variable_wins_over_the_hash_file_as_in_skypilot(
    skypilot_files_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    write_configs(skypilot_files_env, {}, {})
    monkeypatch.setenv("SKYPILOT_USER_ID", "ef56ab78")
    found = client_identity.identity_from_files(os.environ)
    assert found is not None and found.user.id == "ef56ab78"
    assert found == client_identity.current_identity()


@pytest.mark.parametrize(
    "global_config, project_config, why",
    [
        ({"bogus_key": 1}, {}, "a key SkyPilot's schema refuses"),
        ({"kubernetes": {"allowed_contexts": 5}}, {}, "a type SkyPilot's schema refuses"),
        ({"dashboard": {"external_links": []}}, {}, "a section SkyPilot checks itself"),
        (
            {"kubernetes": {"pod_config": {"spec": {"containers": [{"name": "a"}]}}}},
            {"kubernetes": {"pod_config": {"spec": {"containers": [{"name": "b"}]}}}},
            "pod_config in both files, which SkyPilot merges item by item",
        ),
    ],
)
def test_configs_skypilot_reads_differently_are_left_to_it(
    skypilot_files_env: Path, global_config: dict[str, Any], project_config: dict[str, Any], why: str
) -> None:
    import os

    (skypilot_files_env / "global.yaml").write_text(yaml.safe_dump(global_config))
    (skypilot_files_env / "project.yaml").write_text(yaml.safe_dump(project_config))
    assert skypilot_files.request_config(os.environ) is None, why
    assert client_identity.identity_from_files(os.environ) is None, why
