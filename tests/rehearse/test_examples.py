"""The cluster tier for the two example programs (examples/): each program is run under its
own test's mocks (examples/conftest.py), and what it declared is brought up on the local
control plane. An example adds pools and RayClusters to a cluster another stack owns, so
the owning stack's system pool (prod's: two-teams names it; byo-cluster-v5e's "platform"
cluster is taken to have the same n2-standard-8 pool) is faked beside the example's own."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from raytpu.facts.names import NODEPOOL_LABEL
from raytpu.plan.engine import PlannedResource, run_plan
from raytpu.rehearse.build import Cache
from raytpu.rehearse.nodes import fake_nodes
from raytpu.rehearse.report import render
from raytpu.rehearse.run import rehearse

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@dataclass
class ExamplePlan:
    stack: str
    resources: list[PlannedResource]


def _declared(example: str) -> ExamplePlan:
    harness = _load(EXAMPLES / "conftest.py", "examples_conftest")
    test = _load(next((EXAMPLES / example).glob("test_*.py")), f"example_{example}")
    recorded = harness.run_example(EXAMPLES / example, test.CONFIG,
                                   getattr(test, "OWNER", None))
    return ExamplePlan(example, [PlannedResource(t, n, None, True, inputs)
                                 for t, n, inputs in recorded.resources])


def _owner_system_pool(objs: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
    # At its largest: two-teams' two heads do not fit one n2-standard-8 (the rehearsal at
    # the pool's initial size leaves the second Pending, "Insufficient cpu"); on GKE the
    # cluster autoscaler adds the system node, which a rehearsal has no autoscaler to do.
    _, owner = fake_nodes(run_plan("prod", preview=True), at_max=True)
    nodes += [n for n in owner if n["metadata"]["labels"][NODEPOOL_LABEL] == "system"]


@pytest.mark.parametrize("example", ["byo-cluster-v5e", "two-teams"])
def test_example_comes_up_each_slice_on_a_pool_of_its_own(
        built_cache: Cache, ref_dir: Path, example: str) -> None:
    r = rehearse(_declared(example), built_cache, crds=ref_dir, edit=_owner_system_pool)
    assert [o for o in r.objects if not o.admitted] == [], render(r)
    assert r.missing_pods == [], render(r)
    assert r.pods and all(p.node is not None for p in r.pods), render(r)
    workers = [p for p in r.pods if p.group != "headgroup"]
    assert workers and all(p.pool and p.pool.startswith("v5e-") for p in workers)
    assert len(r.slices) == 2  # both examples: two v5e-16 slices, 4 hosts each
    assert all(s.bound and s.hosts == 4 for s in r.slices), render(r)
    assert len({s.pool for s in r.slices}) == 2
    assert r.ok
