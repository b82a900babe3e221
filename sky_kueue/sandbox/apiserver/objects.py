"""Helpers on stored objects: metadata access, name rules, generation, identity.

Why separate: the store's rules on metadata (what a client may not change, when
``generation`` moves, what a valid name is) are the part of apiserver behaviour clients rely
on most and misread most; keeping them in one small module keeps them reviewable against
the Kubernetes documentation.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Mapping
from typing import Any

from sky_kueue.sandbox.apiserver import errors

Obj = dict[str, Any]

#: Length of the random suffix ``generateName`` appends (as the apiserver does).
GENERATED_NAME_SUFFIX_LENGTH_CHARS = 5
#: Characters of that suffix (no vowels, no look-alikes; the apiserver's alphabet).
GENERATED_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
#: Names longer than this are refused (DNS-1123 subdomain).
MAX_NAME_LENGTH_CHARS = 253
#: Namespace names longer than this are refused (DNS-1123 label).
MAX_NAMESPACE_NAME_LENGTH_CHARS = 63
#: ``generateName`` prefixes are cut so that prefix + suffix fits in a label.
MAX_GENERATE_NAME_PREFIX_CHARS = MAX_NAMESPACE_NAME_LENGTH_CHARS - GENERATED_NAME_SUFFIX_LENGTH_CHARS

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

#: Top-level keys that are not part of an object's "spec" for generation purposes.
_NON_SPEC_KEYS = frozenset({"metadata", "status", "apiVersion", "kind"})


@dataclasses.dataclass(frozen=True, order=True)
class ObjectKey:
    """Where an object lives in its resource's store; ``namespace`` is "" if cluster-scoped."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def metadata(obj: Mapping[str, Any]) -> dict[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, dict) else {}


def key_of(obj: Mapping[str, Any]) -> ObjectKey:
    meta = metadata(obj)
    return ObjectKey(meta.get("namespace") or "", meta.get("name") or "")


def resource_version(obj: Mapping[str, Any]) -> str:
    return str(metadata(obj).get("resourceVersion") or "")


def finalizers(obj: Mapping[str, Any]) -> list[str]:
    return list(metadata(obj).get("finalizers") or [])


def is_deleting(obj: Mapping[str, Any]) -> bool:
    return bool(metadata(obj).get("deletionTimestamp"))


def owner_uids(obj: Mapping[str, Any]) -> set[str]:
    return {ref["uid"] for ref in metadata(obj).get("ownerReferences") or [] if isinstance(ref, dict) and "uid" in ref}


def spec_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether anything outside metadata and status differs (what bumps ``generation``)."""
    keys = (set(old) | set(new)) - _NON_SPEC_KEYS
    return any(old.get(key) != new.get(key) for key in keys)


def same_content(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether two versions differ only in ``metadata.resourceVersion`` (a no-op write)."""
    if set(old) != set(new):
        return False
    for key, value in old.items():
        if key == "metadata":
            old_meta = {k: v for k, v in value.items() if k != "resourceVersion"}
            new_meta = {k: v for k, v in metadata(new).items() if k != "resourceVersion"}
            if old_meta != new_meta:
                return False
        elif new[key] != value:
            return False
    return True


def validate_name(kind: str, group: str, name: str, *, namespace_name: bool = False) -> None:
    """Checks a name against the DNS rules the apiserver applies.

    Raises:
        ApiError: 422 for an invalid name.
    """
    if namespace_name:
        valid = len(name) <= MAX_NAMESPACE_NAME_LENGTH_CHARS and bool(_LABEL.match(name))
        rule = "a lowercase RFC 1123 label"
    else:
        valid = len(name) <= MAX_NAME_LENGTH_CHARS and bool(_SUBDOMAIN.match(name))
        rule = "a lowercase RFC 1123 subdomain"
    if not valid:
        raise errors.invalid(kind, group, name, f"metadata.name: Invalid value: {name!r}: must be {rule}")


def generated_name(prefix: str, rng: random.Random) -> str:
    suffix = "".join(rng.choice(GENERATED_NAME_ALPHABET) for _ in range(GENERATED_NAME_SUFFIX_LENGTH_CHARS))
    return prefix[:MAX_GENERATE_NAME_PREFIX_CHARS] + suffix
