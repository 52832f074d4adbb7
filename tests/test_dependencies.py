"""Dependencies: compatible ranges in pyproject.toml, one exact tested set in constraints.txt.

CI (.ci/run) installs with ``-c constraints.txt``, so the installed versions are the
constraints; each must fall in pyproject's range, and the file must list the whole closure
of ``raytpu[dev,workloads]`` (a new dependency without a re-lock fails here)."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, pinned = line.partition("==")
            assert pinned, f"constraints.txt: {line!r} is not an exact pin"
            pins[canonical(name)] = pinned
    return pins


def declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = [*project["dependencies"], *(d for extra in project["optional-dependencies"].values()
                                         for d in extra)]
    return [Requirement(d) for d in lines]


@pytest.mark.parametrize("req", declared(), ids=str)
def test_each_dependency_has_a_tested_version_within_its_range(req: Requirement) -> None:
    pinned = constraints().get(canonical(req.name))
    assert pinned, f"{req.name} is not in constraints.txt: run python .ci/lock.py"
    assert req.specifier.contains(pinned, prereleases=True), (str(req), pinned)
    assert version(req.name) == pinned  # installed with -c constraints.txt


def test_core_runtime_dependencies_are_ranges_not_pins() -> None:
    core = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not [d for d in core if "==" in d], core


def test_constraints_are_the_whole_closure() -> None:
    spec = importlib.util.spec_from_file_location("lock", ROOT / ".ci" / "lock.py")
    assert spec and spec.loader
    lock = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lock)
    assert lock.closure("raytpu", frozenset({"dev", "workloads"})) == constraints()
