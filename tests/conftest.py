"""Suite-wide hooks: the ``ref`` and ``cluster`` markers of the tests that need the reference
data or the rehearsal's binaries through a fixture, and CI's rule on skips
(tests/skip_policy.py): in CI a skip the suite does not declare fails the run."""

from __future__ import annotations

import pytest
from skip_policy import enforced_here, unexpected

# Fixtures that read ../shared/ref (or $RAYTPU_*_CRDS) or need `raytpu rehearse --build`;
# tests that read the reference data without one are marked where they are.
MARKED_BY_FIXTURE = {"validate_crd": "ref", "ref_dir": "ref", "built_cache": "cluster"}

_FOUND: list[tuple[str, str]] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for fixture in getattr(item, "fixturenames", ()):
            marker = MARKED_BY_FIXTURE.get(fixture)
            if marker is not None:
                item.add_marker(marker)


def _reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ")


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not enforced_here():
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    reports = reporter.stats.get("skipped", []) if reporter is not None else []
    _FOUND[:] = unexpected((r.nodeid, _reason(r)) for r in reports
                           if not hasattr(r, "wasxfail"))
    if _FOUND:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _FOUND:
        return
    terminalreporter.section("skips CI does not expect", sep="=", red=True, bold=True)
    for nodeid, reason in _FOUND:
        terminalreporter.line(f"{nodeid}: {reason}")
    terminalreporter.line(
        f"{len(_FOUND)} unexpected skip(s) fail this CI run: make what they need available, "
        "or declare them in tests/skip_policy.py EXPECTED_SKIPS with the reason")
