"""Fixtures for tests/ray (helpers live in ray_support.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from ray_support import SAMPLES, crd_problems, plan_ray, require_crds
from raytpu.plan.engine import PlanResult


@pytest.fixture(scope="session")
def sample_plans() -> dict[str, PlanResult]:
    """One plan per built-in sample stack (read-only, shared)."""
    return {name: plan_ray(raw) for name, raw in SAMPLES.items()}


@pytest.fixture(scope="session")
def sample_previews() -> dict[str, PlanResult]:
    """The same, as ``raytpu manifests`` sees them: computed values unknown."""
    return {name: plan_ray(raw, preview=True) for name, raw in SAMPLES.items()}


@pytest.fixture
def validate_crd() -> Callable[[Mapping[str, Any]], list[str]]:
    """CRD schema errors of an object. Without the KubeRay CRDs the test is skipped, saying
    how to get them (or fails with RAYTPU_REQUIRE_CRDS=1)."""
    require_crds()
    return crd_problems
