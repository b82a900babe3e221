"""ConfigMap and Secret volumes as the files a container sees."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from sky_kueue.sandbox.apiserver import ObjectStore
from sky_kueue.sandbox.workloads.volumes import VolumeFiles, VolumeSourceMissing


def _pod(*volumes: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"volumes": list(volumes)},
    }


def _container(*mounts: dict[str, Any]) -> dict[str, Any]:
    return {"name": "main", "volumeMounts": list(mounts)}


@pytest.fixture
def store() -> ObjectStore:
    store = ObjectStore()
    store.create(
        "configmaps",
        {
            "metadata": {"name": "config", "namespace": "default"},
            "data": {"sky-kueue.yaml": "teams: {}\n", "other": "x"},
            "binaryData": {"blob": base64.b64encode(b"\x00\x01").decode()},
        },
    )
    store.create(
        "secrets",
        {"metadata": {"name": "creds", "namespace": "default"}, "data": {"token": base64.b64encode(b"s3").decode()}},
    )
    return store


def test_every_key_of_a_configmap_under_the_mount_path(store: ObjectStore) -> None:
    files = VolumeFiles(store)(
        _pod({"name": "config", "configMap": {"name": "config"}}, {"name": "tmp", "emptyDir": {}}),
        _container({"name": "config", "mountPath": "/etc/sky-kueue"}, {"name": "tmp", "mountPath": "/tmp"}),
    )
    assert files == {
        "/etc/sky-kueue/sky-kueue.yaml": b"teams: {}\n",
        "/etc/sky-kueue/other": b"x",
        "/etc/sky-kueue/blob": b"\x00\x01",
    }


def test_items_sub_path_and_secrets(store: ObjectStore) -> None:
    volumes = (
        {"name": "config", "configMap": {"name": "config", "items": [{"key": "other", "path": "renamed.txt"}]}},
        {"name": "creds", "secret": {"secretName": "creds"}},
    )
    files = VolumeFiles(store)(
        _pod(*volumes),
        _container(
            {"name": "config", "mountPath": "/etc/app"},
            {"name": "creds", "mountPath": "/etc/token", "subPath": "token"},
        ),
    )
    assert files == {"/etc/app/renamed.txt": b"x", "/etc/token": b"s3"}


def test_a_missing_source_fails_unless_optional(store: ObjectStore) -> None:
    volume = {"name": "gone", "configMap": {"name": "absent"}}
    mount = {"name": "gone", "mountPath": "/etc/gone"}
    with pytest.raises(VolumeSourceMissing, match='configmap "absent" not found'):
        VolumeFiles(store)(_pod(volume), _container(mount))
    optional = {"name": "gone", "configMap": {"name": "absent", "optional": True}}
    assert VolumeFiles(store)(_pod(optional), _container(mount)) == {}
