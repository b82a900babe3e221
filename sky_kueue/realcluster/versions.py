"""The pinned versions of the real cluster's upstream components, read from one file.

The file (``sky_kueue/data/real-cluster-versions.env``) is plain ``KEY=VALUE`` lines so the
shell wrapper (``scripts/real-cluster.sh``) and this module read the same pins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

#: The keys the pins file must define, one per component.
PIN_KEYS = ("KUBERNETES_VERSION", "KUEUE_VERSION", "ETCD_VERSION", "KWOK_VERSION")

_VERSION = re.compile(r"^v\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$")


class PinsError(ValueError):
    """The pins file is missing a key or pins something that is not a module version."""


@dataclass(frozen=True)
class Pins:
    """One version per upstream component (Go module versions, ``v1.35.4`` style)."""

    kubernetes: str
    kueue: str
    etcd: str
    kwok: str

    @property
    def kubernetes_staging(self) -> str:
        """The tag of k8s.io/kubernetes's staging modules for this release (v1.35.4 -> v0.35.4)."""
        return "v0." + self.kubernetes.removeprefix("v1.")

    @property
    def kubernetes_minor(self) -> str:
        return self.kubernetes.removeprefix("v1.").split(".")[0]


def pins_path() -> Path:
    """Where the shipped pins file is (inside the installed package)."""
    return Path(str(resources.files("sky_kueue.data").joinpath("real-cluster-versions.env")))


def parse_pins(text: str, where: str) -> Pins:
    """Read ``KEY=VALUE`` lines (``#`` comments, blank lines ignored) into :class:`Pins`.

    Raises:
        PinsError: a line that is not ``KEY=VALUE``, a missing key, or a value that is not a
            Go module version.
    """
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise PinsError(f"{where}:{number}: expected KEY=VALUE, got {line!r}")
        values[key.strip()] = value.strip()
    missing = [key for key in PIN_KEYS if key not in values]
    if missing:
        raise PinsError(f"{where}: missing {', '.join(missing)}")
    for key in PIN_KEYS:
        if not _VERSION.match(values[key]):
            raise PinsError(f"{where}: {key}={values[key]!r} is not a Go module version such as v1.2.3")
    return Pins(
        kubernetes=values["KUBERNETES_VERSION"],
        kueue=values["KUEUE_VERSION"],
        etcd=values["ETCD_VERSION"],
        kwok=values["KWOK_VERSION"],
    )


def load_pins(path: Path | None = None) -> Pins:
    """The pins of ``path`` (default: the shipped file)."""
    target = path or pins_path()
    return parse_pins(target.read_text(encoding="utf-8"), str(target))
