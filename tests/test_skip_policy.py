"""CI fails on a skip the suite does not declare (tests/skip_policy.py, wired in
tests/conftest.py): an import that stops working must not leave whole modules unrun under a
green CI. Checked on a throwaway suite run by pytest itself, as CI runs ours."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from skip_policy import EXPECTED_SKIPS, ExpectedSkip, enforced, unexpected

TESTS = Path(__file__).resolve().parent
SUITE = '''
import pytest

def test_runs():
    pass

def test_skips():
    pytest.skip("no GPU here")

@pytest.mark.xfail(strict=True, reason="pending")
def test_xfails():
    assert False
'''
MISSING_IMPORT = '''
import pytest

pytest.importorskip("raytpu_no_such_module")

def test_never_runs():
    pass
'''


@pytest.mark.parametrize(("environ", "on"), [
    ({}, False),
    ({"CI": "true"}, True),  # GitHub Actions
    ({"CI": "false"}, False),
    ({"RAYTPU_REQUIRE_REF": "1"}, True),  # .ci/run
    ({"RAYTPU_REQUIRE_CLUSTER": "0"}, False),
])
def test_the_rule_holds_in_ci_only(environ: dict[str, str], on: bool) -> None:
    assert enforced(environ) is on


def test_ci_run_is_ci() -> None:
    exported = re.findall(r"(RAYTPU_REQUIRE_\w+)=1", (TESTS.parent / ".ci" / "run").read_text())
    assert exported and enforced(dict.fromkeys(exported, "1"))


def test_only_a_declared_skip_is_expected() -> None:
    skips = [("tests/a.py::test_x", "no GPU here"), ("tests/b.py", "could not import 'jax'")]
    declared = [ExpectedSkip("tests/a.py", r"^no GPU", "the example has no GPU")]
    assert unexpected(skips, declared) == [("tests/b.py", "could not import 'jax'")]
    assert unexpected(skips, []) == skips


def test_every_declared_skip_says_why() -> None:
    assert all(e.where and e.reason and e.why for e in EXPECTED_SKIPS)


def _suite(tmp_path: Path, expected: str = "()") -> Path:
    for name in ("conftest.py", "skip_policy.py"):
        shutil.copy(TESTS / name, tmp_path / name)
    policy = tmp_path / "skip_policy.py"
    text = policy.read_text()
    assert "EXPECTED_SKIPS: tuple[ExpectedSkip, ...] = ()" in text
    policy.write_text(text.replace("EXPECTED_SKIPS: tuple[ExpectedSkip, ...] = ()",
                                   f"EXPECTED_SKIPS: tuple[ExpectedSkip, ...] = {expected}"))
    (tmp_path / "test_suite.py").write_text(SUITE)
    (tmp_path / "test_needs_module.py").write_text(MISSING_IMPORT)
    return tmp_path


def _pytest(suite: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if k != "CI" and not k.startswith("RAYTPU_REQUIRE_")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-rs", str(suite)], cwd=suite, env={**base, **env},
                          capture_output=True, text=True, timeout=120, check=False)


def test_an_undeclared_skip_fails_a_ci_run(tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    local = _pytest(suite)
    assert local.returncode == 0, local.stdout  # a local run skips, and says so
    for env in ({"CI": "true"}, {"RAYTPU_REQUIRE_REF": "1"}):
        ci = _pytest(suite, **env)
        assert ci.returncode == 1, ci.stdout
        section = ci.stdout.split("skips CI does not expect", 1)[1]
        assert "test_suite.py::test_skips: no GPU here" in section
        assert "test_needs_module.py: could not import 'raytpu_no_such_module'" in section
        assert "test_xfails" not in section  # an xfail is not a skip
        assert "2 unexpected skip(s) fail this CI run" in section


def test_a_declared_skip_passes_a_ci_run(tmp_path: Path) -> None:
    suite = _suite(tmp_path, expected=(
        '(ExpectedSkip("test_suite.py::test_skips", r"^no GPU", "no GPU in CI"), '
        'ExpectedSkip("test_needs_module.py", "raytpu_no_such_module", "an example"))'))
    ci = _pytest(suite, CI="true")
    assert ci.returncode == 0, ci.stdout
    assert "skips CI does not expect" not in ci.stdout
