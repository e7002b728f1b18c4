"""requirements/lock.txt: the versions `make run` and `make test` install (docs/development.md).

The lock must agree with pyproject.toml (every range there admits the version pinned here) and
must be what this environment was installed from; `make test-latest` sets QUIPU_LOCK empty to
run the suite on the newest releases instead, where the second check does not apply.
"""

from __future__ import annotations

import os
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "lock.txt"
TOOLS = ROOT / "requirements" / "tools.in"
OWN_NAME = "quipu-memory"


def _lock_pins(text: str) -> dict[str, Version]:
    """The pins of the lock whose markers hold for this interpreter (a universal lock may
    pin one package twice under different markers)."""
    pins: dict[str, Version] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate():
            continue
        (spec,) = req.specifier
        assert spec.operator == "==", f"the lock pins exactly: {line!r}"
        pins[canonicalize_name(req.name)] = Version(spec.version)
    return pins


def _declared() -> list[Requirement]:
    """Every requirement pyproject.toml declares: runtime, each extra, the build system, and
    the installers of requirements/tools.in."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    lines = list(project["project"]["dependencies"])
    for extra in project["project"]["optional-dependencies"].values():
        lines.extend(extra)
    lines.extend(project["build-system"]["requires"])
    lines.extend(
        line for line in TOOLS.read_text().splitlines() if line.strip() and not line.startswith("#")
    )
    return [Requirement(line) for line in lines]


def _disagreements(declared: list[Requirement], pins: dict[str, Version]) -> list[str]:
    env = default_environment()
    problems = []
    for req in declared:
        if req.marker is not None and not req.marker.evaluate({**env, "extra": ""}):
            continue
        pinned = pins.get(canonicalize_name(req.name))
        if pinned is None:
            problems.append(f"{req} is not pinned in the lock")
        elif not req.specifier.contains(pinned, prereleases=True):
            problems.append(f"{req} does not admit the lock's {pinned}")
    return problems


def test_every_declared_range_admits_the_version_the_lock_pins() -> None:
    problems = _disagreements(_declared(), _lock_pins(LOCK.read_text()))
    assert problems == [], "run `make lock` (docs/development.md):\n" + "\n".join(problems)


def test_the_check_sees_a_range_the_lock_falls_outside() -> None:
    pins = _lock_pins("uvicorn==0.30.0\nfastapi==0.115.0\n")
    declared = [Requirement("uvicorn>=0.31"), Requirement("fastapi>=0.115"), Requirement("rich")]
    assert _disagreements(declared, pins) == [
        "uvicorn>=0.31 does not admit the lock's 0.30.0",
        "rich is not pinned in the lock",
    ]


@pytest.mark.skipif(
    os.environ.get("QUIPU_LOCK") == "", reason="make test-latest: installed without the lock"
)
def test_this_environment_was_installed_from_the_lock() -> None:
    pins = _lock_pins(LOCK.read_text())
    drift = []
    for dist in metadata.distributions():
        name = canonicalize_name(dist.metadata["Name"])
        if name == OWN_NAME or name not in pins:
            continue
        if Version(dist.version) != pins[name]:
            drift.append(f"{name} {dist.version} installed, {pins[name]} locked")
    assert drift == [], "reinstall with `make test` (it installs from the lock):\n" + "\n".join(
        drift
    )
