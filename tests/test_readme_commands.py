"""The README's Quick start commands are the ones CI runs, and they install the tested set.

A newcomer copies them from the README; ``.ci/run`` takes them from the same text
(``.ci/readme_commands.py``), so a README edit changes what CI runs and cannot drift."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _reader() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_commands",
                                                  ROOT / ".ci" / "readme_commands.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def commands() -> list[str]:
    found: list[str] = _reader().quick_start_commands((ROOT / "README.md").read_text())
    return found


def test_quick_start_has_the_plan_and_the_test_command() -> None:
    plan, tests = commands()
    assert plan.endswith(".venv/bin/raytpu plan --stack dev")
    assert tests.endswith(".venv/bin/python -m pytest")


def test_every_install_uses_the_tested_constraints() -> None:
    # Without -c constraints.txt pip resolves newer releases than the lock and
    # tests/test_dependencies.py fails on a fresh clone.
    for command in commands():
        for step in command.split("&&"):
            words = shlex.split(step)
            if "install" in words:
                assert "-c" in words and words[words.index("-c") + 1] == "constraints.txt", step


def test_ci_runs_the_readme_commands_from_the_readme() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 .ci/readme_commands.py" in ci
    # No test run of its own beside the README's (the examples run against the wheel).
    own = [line for line in ci.splitlines()
           if re.search(r"-m pytest", line) and "RAYTPU_EXPECT_WHEEL" not in line]
    assert own == [], own
