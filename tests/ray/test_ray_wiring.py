"""The Ray layer as the real stack program (``raytpu.program.stack.build``) wires it, on every stack
file and on stacks written for one rule each: what the RayCluster and the operators wait for,
which provider they use, which pools the worker groups select."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from ray_support import (
    CHART,
    RAYCLUSTER,
    STACKS_DIR,
    as_object,
    pod_templates,
    semantic_problems,
    stack_files,
    validate_pod,
)
from raytpu.config.team_rules import nominal_slices
from raytpu.plan.engine import PlanResult, run_plan

Validate = Callable[[Mapping[str, Any]], list[str]]
NODE_POOL = "gcp:container/nodePool:NodePool"
GKE_CLUSTER = "gcp:container/cluster:Cluster"
JOB = "kubernetes:batch/v1:Job"


@pytest.fixture(scope="module")
def plans() -> dict[str, PlanResult]:
    return {stack: run_plan(stack, STACKS_DIR) for stack in stack_files()}


def _plan_of(tmp_path: Path, config: dict[str, Any]) -> PlanResult:
    (tmp_path / "Pulumi.t.yaml").write_text(yaml.safe_dump({"config": config}))
    return run_plan("t", tmp_path)


def _deps(r: Any) -> set[str]:
    """Names of what ``r`` waits for (dependsOn holds URNs; these names are unique here)."""
    return {u.rsplit("::", 1)[-1] for u in r.options.get("dependsOn", [])}


def _pools(plan: PlanResult) -> tuple[str, set[str]]:
    """(system pool, TPU pools) resource names."""
    (system,) = [r.name for r in plan.by_type(NODE_POOL) if r.inputs["name"] == "system"]
    return system, {r.name for r in plan.by_type(NODE_POOL)} - {system}


@pytest.mark.parametrize("stack", stack_files())
def test_stack_declares_a_valid_raycluster(
    stack: str, plans: dict[str, PlanResult], validate_crd: Validate,
) -> None:
    plan = plans[stack]
    (rc,) = plan.by_type(RAYCLUSTER)
    obj = as_object(rc.inputs)
    assert validate_crd(obj) == []
    assert [p for w, t in pod_templates(obj) for p in validate_pod(w, t)] == []
    assert "@sha256:" in plan.outputs["image"]  # the stack's build, by digest
    assert semantic_problems(obj, plan.config, plan.outputs["image"]) == []


@pytest.mark.parametrize("stack", stack_files())
def test_raycluster_waits_for_the_pools_and_the_operator(
    stack: str, plans: dict[str, PlanResult],
) -> None:
    plan = plans[stack]
    (rc,) = plan.by_type(RAYCLUSTER)
    system, tpu = _pools(plan)
    assert tpu and {system, *tpu} <= _deps(rc)
    if plan.config.kuberay.mode == "helm":
        charts = {r.inputs["name"]: r.name for r in plan.by_type(CHART)}
        assert {charts["kuberay-operator"], charts["kuberay-tpu-webhook"]} <= _deps(rc)
    else:
        (job,) = plan.by_type(JOB)
        assert job.name in _deps(rc)
    # The GKE cluster's provider, not a default one.
    k8s_providers = [r.urn for r in plan.by_type("pulumi:providers:kubernetes")]
    assert len(k8s_providers) == 1 and rc.options["provider"] == k8s_providers[0]
    head = rc.inputs["spec"]["headGroupSpec"]["template"]["spec"]
    assert head["nodeSelector"] == {"cloud.google.com/gke-nodepool": "system"}
    (ksa,) = [r for r in plan.by_type("kubernetes:core/v1:ServiceAccount") if r.parent == "ray"]
    gsa = ksa.inputs["metadata"]["annotations"]["iam.gke.io/gcp-service-account"]
    assert gsa == plan.outputs["checkpoint_gsa_email"]
    env = {e["name"]: e["value"] for e in head["containers"][0]["env"]}
    assert env["RAYTPU_CHECKPOINT_URI"] == f"gs://{plan.outputs['bucket_name']}/runs"


@pytest.mark.parametrize("stack", stack_files())
def test_operators_wait_for_the_cluster_and_system_pool_never_the_tpu_pools(
    stack: str, plans: dict[str, PlanResult],
) -> None:
    """A TPU stockout (a TPU pool that never finishes creating) must not hold back
    cert-manager, KubeRay, the webhook or the add-on CRD wait: they run on the system pool."""
    plan = plans[stack]
    system, tpu = _pools(plan)
    (cluster,) = plan.by_type(GKE_CLUSTER)
    operator = [r for r in plan.resources if r.parent == "kuberay"]
    assert operator, "the operator layer declares something in either mode"
    for r in operator:
        assert {cluster.name, system} <= _deps(r), r.name
        assert not _deps(r) & tpu, (r.name, _deps(r) & tpu)


@pytest.mark.parametrize("stack", stack_files())
def test_workload_identity_binding_matches_the_ray_service_account(
    stack: str, plans: dict[str, PlanResult],
) -> None:
    """The GSA's workloadIdentityUser member (GKE side) names our namespace/KSA exactly."""
    plan = plans[stack]
    members = [r.inputs["member"] for r in plan.by_type("gcp:serviceaccount/iAMMember:IAMMember")
               if r.inputs.get("role") == "roles/iam.workloadIdentityUser"]
    ray_ns = f".svc.id.goog[{plan.config.ray.namespace}/"
    assert [m for m in members if ray_ns in m] == [plan.outputs["ray_workload_identity_member"]]


def _node_labels(pool: Any) -> dict[str, str]:
    """The labels GKE puts on a TPU pool's nodes, from the pool's own inputs: accelerator and
    instance type from the machine type, topology from the placement policy (multi-host) or
    the machine's own chips (single-host)."""
    from raytpu.facts.catalog import GENERATIONS, slice_shape

    machine = pool.inputs["nodeConfig"]["machineType"]
    (gen,) = [g for g in GENERATIONS.values() if machine in g.machine_types.values()]
    chips = {m: c for c, m in gen.machine_types.items()}[machine]
    topology = (pool.inputs.get("placementPolicy") or {}).get("tpuTopology") or slice_shape(
        gen.accelerator_type(chips), machine_type=machine).topology
    return {"cloud.google.com/gke-tpu-accelerator": gen.accelerator_label,
            "cloud.google.com/gke-tpu-topology": topology,
            "node.kubernetes.io/instance-type": machine}


def _selected_pools(plan: PlanResult) -> dict[str, set[str]]:
    """Worker group -> GKE names of the TPU pools whose nodes its nodeSelector matches."""
    (rc,) = plan.by_type(RAYCLUSTER)
    _, tpu = _pools(plan)
    pools = [r for r in plan.by_type(NODE_POOL) if r.name in tpu]
    out = {}
    for w in rc.inputs["spec"]["workerGroupSpecs"]:
        selector = w["template"]["spec"]["nodeSelector"]
        out[w["groupName"]] = {p.inputs["name"] for p in pools
                               if all(_node_labels(p).get(k) == v for k, v in selector.items())}
    return out


@pytest.mark.parametrize("stack", stack_files())
def test_each_worker_group_selects_exactly_its_own_pools(
    stack: str, plans: dict[str, PlanResult],
) -> None:
    plan = plans[stack]
    assert _selected_pools(plan) == {g: set(p) for g, p in plan.outputs["node_pools"].items()}


def test_one_tpu_shape_on_two_machine_types_selects_separate_pools(tmp_path: Path) -> None:
    """v5e 2x4 as one ct5lp-hightpu-8t VM and as two -4t VMs: the accelerator and topology
    labels of both are equal; each group must still land on its own pools only."""
    plan = _plan_of(tmp_path, {
        "gcp:project": "acme-ml", "raytpu:zone": "us-west4-a",
        "raytpu:slices": [
            {"name": "one-vm", "tpu": "v5litepod-8", "machineType": "ct5lp-hightpu-8t"},
            {"name": "two-vms", "tpu": "v5litepod-8", "machineType": "ct5lp-hightpu-4t",
             "count": 2},
        ],
    })
    assert _selected_pools(plan) == {"one-vm": {"one-vm"}, "two-vms": {"two-vms-0", "two-vms-1"}}


@pytest.mark.parametrize("stack", stack_files())
def test_ray_groups_fit_the_node_pools(stack: str, plans: dict[str, PlanResult]) -> None:
    """One GKE node pool per multi-host slice: maxReplicas of a group = its slice's pools less
    the teams' nominal quotas; the head's nodeSelector names a real pool."""
    plan = plans[stack]
    (rc,) = plan.by_type(RAYCLUSTER)
    pools_by_slice = plan.outputs["node_pools"]
    for w in rc.inputs["spec"]["workerGroupSpecs"]:
        pools = pools_by_slice[w["groupName"]]
        # Single-host slices share one pool (one node per slice).
        nominal = nominal_slices(plan.config).get(w["groupName"], 0)
        assert len(pools) == (w["maxReplicas"] + nominal if w["numOfHosts"] > 1 else 1), \
            w["groupName"]
    head = rc.inputs["spec"]["headGroupSpec"]["template"]["spec"]["nodeSelector"]
    gke_names = {r.inputs.get("name") for r in plan.by_type(NODE_POOL)}
    assert head["cloud.google.com/gke-nodepool"] in gke_names
