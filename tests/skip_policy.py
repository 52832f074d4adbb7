"""Which skips a CI run may have: the one list (:data:`EXPECTED_SKIPS`) and the rule that
applies it (tests/conftest.py wires it into pytest).

In CI (``CI=true``, as GitHub Actions sets it, or any ``RAYTPU_REQUIRE_*`` set, as
``.ci/run`` does) a skipped test fails the run unless an entry here declares it: an import
that stops working (``torch_xla``, ``ray.train``) skips whole modules through
``pytest.importorskip``, and without this CI would stay green with them unrun. A local run
skips as before, each skip with its reason (``-ra``).

Tests that need what a run may lack are deselected by name instead (``-m "not ref"``,
``not cluster``, ``not slow``: markers in pyproject.toml), so a subset is always explicit in
the command that runs it (.github/workflows/preview.yml).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ExpectedSkip:
    """A skip CI may have: of tests whose node id starts with ``where``, for a reason
    ``reason`` (a regular expression) finds."""

    where: str
    reason: str
    why: str


# Under .ci/run every extra is installed, the reference data is beside the checkout and the
# rehearsal's binaries are built (RAYTPU_REQUIRE_* turn their absence into failures), so no
# skip is expected there. Add an entry only with its why.
EXPECTED_SKIPS: tuple[ExpectedSkip, ...] = ()

REQUIRE_PREFIX = "RAYTPU_REQUIRE_"


def enforced(environ: Mapping[str, str]) -> bool:
    """Whether this run is CI's: ``CI=true`` or any ``RAYTPU_REQUIRE_*`` set (not ``0``)."""
    return environ.get("CI", "").lower() == "true" or any(
        k.startswith(REQUIRE_PREFIX) and v not in ("", "0") for k, v in environ.items())


def enforced_here() -> bool:
    return enforced(os.environ)


def unexpected(skips: Iterable[tuple[str, str]],
               expected: Iterable[ExpectedSkip] = EXPECTED_SKIPS) -> list[tuple[str, str]]:
    """The (node id, reason) pairs of ``skips`` that no ``expected`` entry declares."""
    declared = list(expected)
    return [(where, reason) for where, reason in skips
            if not any(where.startswith(e.where) and re.search(e.reason, reason)
                       for e in declared)]
