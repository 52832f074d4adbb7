"""``raytpu manifests`` and the Ray tables of ``raytpu plan``."""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml
from ray_support import SAMPLES
from raytpu.operations.manifests import MARKER, write_plan_manifests
from raytpu.plan.engine import PlanResult, run_plan
from raytpu.plan.objects import api_version_of
from raytpu.plan.ray_tables import ray_tables
from raytpu.plan.render import render_table
from raytpu.plan.tables import PlanTable
from rich.console import Console

Validate = Callable[[Mapping[str, Any]], list[str]]


def _load(path: Path) -> dict[str, Any]:
    text = path.read_text()
    assert text.startswith(MARKER)
    doc: dict[str, Any] = yaml.safe_load(text)
    return doc


def test_type_tokens_to_api_versions() -> None:
    assert api_version_of("kubernetes:core/v1:Namespace") == "v1"
    assert api_version_of("kubernetes:ray.io/v1:RayCluster") == "ray.io/v1"
    assert api_version_of("kubernetes:apps/v1:Deployment") == "apps/v1"
    for skipped in ("kubernetes:helm.sh/v4:Chart", "kubernetes:helm.sh/v3:Release",
                    "pulumi:providers:kubernetes", "raytpu:ray:TpuRayCluster",
                    "gcp:container/nodePool:NodePool"):
        assert api_version_of(skipped) is None


def test_writes_one_file_per_object_and_the_chart_list(
    tmp_path: Path, sample_previews: dict[str, PlanResult], validate_crd: Validate,
) -> None:
    written = write_plan_manifests(sample_previews["v6e-ilb"], tmp_path)
    names = sorted(p.name for p in written)
    assert names == ["helm-releases.txt", "namespace-cert-manager.yaml",
                     "namespace-kuberay-system.yaml", "namespace-ray.yaml",
                     "networkpolicy-ray-raytpu-deny-ingress.yaml",
                     "networkpolicy-ray-raytpu-ray-head.yaml",
                     "networkpolicy-ray-raytpu-ray-metrics.yaml",
                     "networkpolicy-ray-raytpu-ray-peers.yaml",
                     "podmonitoring-ray-trillium-ray.yaml", "raycluster-ray-trillium.yaml",
                     "service-ray-trillium-dashboard-ilb.yaml",
                     "serviceaccount-ray-ray-workload.yaml"]
    for path in written:
        if path.suffix != ".yaml":
            continue
        obj = _load(path)
        assert list(obj)[:3] == ["apiVersion", "kind", "metadata"]
        if obj["kind"] == "RayCluster":
            assert validate_crd(obj) == []
        elif obj["kind"] == "PodMonitoring":
            continue  # against the GMP CRD in test_monitoring_crds.py
        else:
            kubernetes_validate.validate(obj, "1.33", strict=True)
    rc = _load(tmp_path / "raycluster-ray-trillium.yaml")
    assert (rc["apiVersion"], rc["metadata"]["namespace"]) == ("ray.io/v1", "ray")
    assert list(rc) == ["apiVersion", "kind", "metadata", "spec"]


def test_helm_releases_list_charts_versions_and_values(
    tmp_path: Path, sample_previews: dict[str, PlanResult],
) -> None:
    write_plan_manifests(sample_previews["v4-fixed"], tmp_path)
    text = (tmp_path / "helm-releases.txt").read_text()
    assert "kuberay-operator:\n  chart:      kuberay-operator\n" in text
    assert "  version:    1.7.0\n" in text
    assert ("render:     helm template kuberay-operator kuberay-operator --version 1.7.0 "
            "--namespace kuberay-system --repo https://ray-project.github.io/kuberay-helm/ "
            "--include-crds") in text
    assert "      name: RayMultiHostIndexing" in text
    assert "oci://us-docker.pkg.dev/ai-on-gke/kuberay-tpu-webhook-helm/kuberay-tpu-webhook" in text
    write_plan_manifests(sample_previews["v5p-addon"], tmp_path)
    assert "GKE Ray Operator add-on" in (tmp_path / "helm-releases.txt").read_text()


def test_stale_generated_files_are_removed_others_kept(
    tmp_path: Path, sample_previews: dict[str, PlanResult],
) -> None:
    write_plan_manifests(sample_previews["v6e-ilb"], tmp_path)
    (tmp_path / "notes.yaml").write_text("mine: true\n")
    write_plan_manifests(sample_previews["v4-fixed"], tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert "raycluster-ray-trillium.yaml" not in names and "raycluster-ray-raytpu.yaml" in names
    assert "notes.yaml" in names


def test_manifests_of_a_stack_file_run_the_stack_program(tmp_path: Path) -> None:
    """The CLI entry point end to end, on a stack file, through raytpu.program.stack.build."""
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "Pulumi.t.yaml").write_text(yaml.safe_dump({"config": SAMPLES["v5e-elastic"]}))
    written = write_plan_manifests(run_plan("t", stacks, preview=True), tmp_path / "out")
    rc = _load(tmp_path / "out" / "raycluster-ray-raytpu.yaml")
    assert [g["groupName"] for g in rc["spec"]["workerGroupSpecs"]] == ["pod16", "single8"]
    assert tmp_path / "out" / "helm-releases.txt" in written


def _render(tables: list[PlanTable]) -> str:
    out = io.StringIO()
    console = Console(file=out, width=200)
    for t in tables:
        render_table(console, t)
    return out.getvalue()


def test_plan_tables_show_operator_stack_and_groups(sample_plans: dict[str, PlanResult]) -> None:
    text = _render(ray_tables(sample_plans["v6e-ilb"]))
    assert "KubeRay operator" in text and "kuberay-tpu-webhook" in text and "0.3.1" in text
    assert "RayCluster ray/trillium (Ray 2.60.0, autoscaling v2)" in text
    rows = [line for line in text.splitlines() if "v6-16" in line or "v6-8" in line]
    assert any("2/2/2" in r and "tpu-v6e-slice" in r and "4x4" in r for r in rows), rows
    assert any("1/1/4" in r and "2x4" in r for r in rows), rows
    assert "RayMultiHostIndexing: off" in text and "tpu-webhook:v1.3.1-gke.2@sha256:" in text
    addon = _render(ray_tables(sample_plans["v5p-addon"]))
    assert "GKE add-on" in addon and "GKE-managed" in addon
    assert "waits for the add-on's RayCluster CRD" in addon


def test_the_raycluster_table_says_why_a_group_holds_fewer_slices_than_its_pools() -> None:
    from raytpu.plan.ray_tables import raycluster_table

    prod = run_plan("prod")
    (rc,) = prod.by_type("kubernetes:ray.io/v1:RayCluster")
    table = raycluster_table(rc, prod.config)
    assert table.notes == [
        "v5e-16: maxReplicas 2 of its 6 pools; the teams' nominal quotas 4 hold the rest "
        "(Kueue cannot count this cluster's slices, so the pools are split)"]
    assert raycluster_table(rc).notes == []  # a RayJob's cluster: no split to explain


def test_prod_operator_table_is_the_add_on_not_kueue() -> None:
    # Prod: GKE add-on mode with teams (the Kueue chart). The operator table lists only the
    # operator component's charts; the add-on row and its CRD-wait note are there, and the
    # Kueue chart is named under the team tables instead.
    from raytpu.plan.kueue_tables import team_tables
    from raytpu.plan.ray_tables import operator_table

    prod = run_plan("prod")
    table = operator_table(prod)
    assert table is not None
    assert [row[:2] for row in table.rows] == [
        ["kuberay-operator + kuberay-tpu-webhook", "GKE add-on"]]
    assert any("waits for the add-on's RayCluster CRD" in n for n in table.notes)
    notes = [n for t in team_tables(prod) for n in t.notes]
    assert any(n.startswith("Kueue chart oci://registry.k8s.io/kueue/charts/kueue 0.19.2")
               for n in notes), notes
