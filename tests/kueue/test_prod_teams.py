"""The shipped prod stack: two teams sharing its slices, as ``raytpu manifests`` writes them
and ``raytpu plan`` shows them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kueue_support import REPO, kueue_problems
from raytpu.config.file import load_stack_file
from raytpu.operations.manifests import write_plan_manifests
from raytpu.plan.engine import PlanResult, run_plan
from raytpu.plan.kueue_tables import team_tables
from raytpu.plan.objects import objects
from raytpu.program.kueue_program import tpu_flavors

STACKS = REPO / "stacks"


@pytest.fixture(scope="module")
def prod() -> PlanResult:
    return run_plan("prod", STACKS, preview=True)


def test_prod_declares_two_teams_sharing_its_slices(prod: PlanResult) -> None:
    teams = prod.config.teams
    assert [t.name for t in teams] == ["vision", "speech"]
    shared = set(teams[0].slice_groups) & set(teams[1].slice_groups)
    assert shared == {"v5e-16"}
    warnings = prod.warnings
    assert warnings == [w for w in warnings if not w.startswith("raytpu:teams")]


def test_manifests_write_valid_kueue_objects(prod: PlanResult, tmp_path: Path) -> None:
    written = write_plan_manifests(prod, tmp_path)
    kueue = [yaml.safe_load(p.read_text()) for p in written
             if p.name.startswith(("resourceflavor-", "clusterqueue-", "localqueue-",
                                   "workloadpriorityclass-"))]
    assert sorted(o["kind"] for o in kueue) == [
        "ClusterQueue", "ClusterQueue", "LocalQueue", "LocalQueue", "ResourceFlavor",
        "ResourceFlavor", "WorkloadPriorityClass", "WorkloadPriorityClass",
        "WorkloadPriorityClass"]
    for obj in kueue:
        assert kueue_problems(obj) == [], obj["metadata"]["name"]
    releases = (tmp_path / "helm-releases.txt").read_text()
    assert "oci://registry.k8s.io/kueue/charts/kueue" in releases and "0.19.2" in releases


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_every_slice_groups_flavor_selects_its_worker_nodes(stack: str) -> None:
    """Per slice group of every shipped stack: the flavor Kueue would give its worker group
    has exactly the group's nodeSelector (else that group's team jobs never admit)."""
    plan = run_plan(stack, STACKS)
    (cluster,) = [o for o in objects(plan) if o["kind"] == "RayCluster"]
    selectors = {w["groupName"]: w["template"]["spec"]["nodeSelector"]
                 for w in cluster["spec"]["workerGroupSpecs"]}
    flavors = tpu_flavors(plan.config)
    assert set(flavors) == set(selectors) == {s.name for s in plan.config.slices}
    for group, flavor in flavors.items():
        assert flavor.node_labels == selectors[group], group
    declared = {o["metadata"]["name"]: o["spec"].get("nodeLabels") for o in objects(plan)
                if o["kind"] == "ResourceFlavor"}
    for f in flavors.values():
        if f.name in declared:
            assert declared[f.name] == f.node_labels


def test_plan_tables_show_teams_queues_and_quotas(prod: PlanResult) -> None:
    teams, quotas = team_tables(prod)
    assert [r[0] for r in teams.rows] == ["vision", "speech"]
    vision = dict(zip(teams.columns, teams.rows[0], strict=True))
    assert vision["queues"] == "vision <- vision/default"
    assert vision["checkpoints"] == "gs://raytpu-prod-prod-raytpu/teams/vision/runs"
    rows = {(r[0], r[1]): r[2:] for r in quotas.rows}
    assert rows[("vision", "v5litepod-16-4x4-ct5lp-hightpu-4t")] == [
        "32 chips (2 slices)", "32 chips (2 slices)"]
    assert rows[("speech", "v5litepod-16-4x4-ct5lp-hightpu-4t")] == [
        "32 chips (2 slices)", "16 chips (1 slice)"]
    assert "v5e-16 4 of 6" in quotas.notes[0]


def test_stacks_without_teams_have_no_team_tables() -> None:
    raw = load_stack_file("dev", STACKS)
    assert "raytpu:teams" not in raw
    assert team_tables(run_plan("dev", STACKS)) == []


# Reads the reference data beside the checkout (../shared/ref): deselected by name where it is
# absent (-m "not ref", .github/workflows/preview.yml; docs/tests-in-ci.md).
pytestmark = pytest.mark.ref
