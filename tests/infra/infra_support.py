"""Helpers for the GKE-side tests: a minimal stack config, running one component alone
under the recording mocks, and plan queries.

Every assertion is made on the recorded plan after ``run_program`` returns (all
registrations drained), never inside an ``apply``.
"""

from __future__ import annotations

import copy
import gc
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pulumi
from raytpu.plan.engine import PlannedResource, PlanResult, run_program

REPO = Path(__file__).resolve().parents[2]
STACKS_DIR = REPO / "stacks"
SNAPSHOTS_DIR = Path(__file__).resolve().parent / "snapshots"
STACKS = ("dev", "staging", "prod")

PROJECT = "acme-ml"
ZONE = "us-west4-a"
REGION = "us-west4"
MARKER = "test:index:Marker"

# The smallest valid stack config; component tests only need it to pass validation.
BASE_CONFIG: dict[str, Any] = {
    "gcp:project": PROJECT,
    "raytpu:zone": ZONE,
    "raytpu:slices": [{"name": "v5e-4", "tpu": "v5litepod-4"}],
    "raytpu:cluster": {"name": "raytpu-test", "deletionProtection": False},
}

FIREWALL = "gcp:compute/firewall:Firewall"
NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
PROJECT_IAM = "gcp:projects/iAMMember:IAMMember"


def raw_config(**overrides: Any) -> dict[str, Any]:
    """BASE_CONFIG with top-level keys replaced (``raytpu_slices=[...]`` -> ``raytpu:slices``)."""
    raw = copy.deepcopy(BASE_CONFIG)
    for key, value in overrides.items():
        ns, _, rest = key.partition("_")
        raw[f"{ns}:{rest}"] = value
    return raw


def run_alone(program: Callable[[], Any], raw: dict[str, Any] | None = None) -> PlanResult:
    """Run ``program`` (which declares one component) under the recording mocks."""
    return run_program("test", raw or raw_config(), program)


def marker() -> None:
    """A resource that is not ours: lets a program whose component refused to build still
    produce a plan, so the test can check that nothing else was registered."""
    pulumi.ComponentResource(MARKER, "marker")


def refused_alone(*builds: Callable[[], Any]) -> list[Exception]:
    """Run each component build in one program; every one must refuse its Args (ValueError
    or TypeError) and the plan must hold nothing but the marker. Returns the errors."""
    errors: list[Exception] = []

    def program() -> None:
        for build in builds:
            try:
                build()
            except (ValueError, TypeError) as e:
                errors.append(e)
        marker()

    plan = run_alone(program)
    assert len(errors) == len(builds), errors
    assert [r.type for r in plan.resources] == [MARKER]
    return errors


def children_of(plan: PlanResult, parent: str) -> list[PlannedResource]:
    return [r for r in plan.resources if r.parent == parent]


def custom(plan: PlanResult, types: Iterable[str] | None = None) -> list[PlannedResource]:
    wanted = set(types) if types is not None else None
    return [r for r in plan.resources
            if r.custom and (wanted is None or r.type in wanted)]


def error_chain(exc: BaseException) -> list[BaseException]:
    """An exception and its causes (Pulumi wraps errors raised in applies)."""
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in out:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def program_errors(
    program: Callable[[], Any], raw: dict[str, Any] | None = None
) -> list[tuple[type[BaseException], str]]:
    """Run a program that must fail; return its error chain as (type, message) pairs.

    A failed Pulumi program leaves every dependent output holding the exception; asyncio
    logs each one as "Future exception was never retrieved" when they are collected (at
    interpreter exit: thousands of lines). Drop them here, with that logger muted.
    """
    log = logging.getLogger("asyncio")
    log.disabled = True
    try:
        chain: list[tuple[type[BaseException], str]] = []
        try:
            run_alone(program, raw)
        except Exception as e:  # the engine wraps the program's error
            chain = [(type(x), str(x)) for x in error_chain(e)]
        run_alone(marker)  # replaces the failed run's runtime state
        gc.collect()
    finally:
        log.disabled = False
    assert chain, "the program was expected to fail"
    return chain
