"""Fixtures for tests/infra (helpers live in infra_support.py)."""

from __future__ import annotations

import pytest
from infra_support import STACKS, STACKS_DIR
from raytpu.plan import PlanResult, run_plan


@pytest.fixture(scope="session")
def stack_plans() -> dict[str, PlanResult]:
    """The whole program's plan for every committed stack file (read-only, shared)."""
    return {name: run_plan(name, STACKS_DIR) for name in STACKS}


@pytest.fixture(scope="session")
def stack_previews() -> dict[str, PlanResult]:
    """What `raytpu plan` shows for every committed stack: computed values unknown."""
    return {name: run_plan(name, STACKS_DIR, preview=True) for name in STACKS}
