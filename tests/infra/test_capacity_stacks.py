"""Issue 44's two stacks, planned whole: an Ironwood stack (a multi-host flex-start group that
starts at 0, a single-host group, two teams) and a v6e flex-start group with ``count: 0``.

The TPU pools must be what xpk 1.16 creates for the same shape and mode (``xpk cluster create
--tpu-type tpu7x-16 --flex --dry-run``, shared/ref/tpu/SOURCE.txt): ``--machine-type
tpu7x-standard-4t --flex-start --enable-autoscaling --location-policy=ANY
--reservation-affinity=none --no-enable-autorepair --max-nodes=2 --num-nodes=0
--placement-policy=<workload policy> --max-pods-per-node 15``.
"""

from __future__ import annotations

from typing import Any

from infra_support import NODE_POOL, PROJECT
from raytpu.plan.cost import cost_of
from raytpu.plan.engine import PlannedResource, PlanResult, run_program

RESOURCE_POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"
RAYCLUSTER = "kubernetes:ray.io/v1:RayCluster"

IRONWOOD: dict[str, Any] = {
    "gcp:project": PROJECT,
    "raytpu:zone": "us-central1-c",
    "raytpu:slices": [
        {"name": "iw-16", "tpu": "tpu7x-16", "count": 0, "autoscaling": {"min": 0, "max": 4},
         "capacity": "flex-start", "maxRunDuration": "72h"},
        {"name": "iw-8", "tpu": "tpu7x-8", "count": 1},
    ],
    "raytpu:cluster": {"name": "iron", "deletionProtection": False,
                       "minMasterVersion": "1.34.1-gke.1829001", "dataplaneV2": True,
                       "securityGroup": "gke-security-groups@example.com"},
    "raytpu:teams": [
        {"name": "vision", "members": ["group:vision@example.com"], "quota": {"iw-16": 1}},
        {"name": "speech", "members": ["group:speech@example.com"], "quota": {"iw-16": 1}},
    ],
}

V6E_FLEX: dict[str, Any] = {
    "gcp:project": PROJECT,
    "raytpu:zone": "us-east5-a",
    "raytpu:slices": [{"name": "v6e-16", "tpu": "v6e-16", "count": 0,
                       "autoscaling": {"min": 0, "max": 2}, "capacity": "flex-start"}],
    "raytpu:cluster": {"name": "flex", "deletionProtection": False, "dataplaneV2": True},
}


def _plan(raw: dict[str, Any]) -> PlanResult:
    return run_program("t", raw, preview=True)


def _pools(plan: PlanResult, group: str) -> list[PlannedResource]:
    return sorted((p for p in plan.by_type(NODE_POOL) if p.inputs["name"].startswith(group)),
                  key=lambda p: p.inputs["name"])


def _xpk_flex(p: PlannedResource, hosts: int) -> None:
    i, nc = p.inputs, p.inputs["nodeConfig"]
    assert nc["flexStart"] is True and nc["spot"] is False
    assert nc["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert i["management"]["autoRepair"] is False
    assert i["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": hosts, "locationPolicy": "ANY"}
    assert i["initialNodeCount"] == 0 and "nodeCount" not in i
    assert i["maxPodsPerNode"] == 15


def test_ironwood_stack_declares_xpks_pools() -> None:
    plan = _plan(IRONWOOD)
    flex = _pools(plan, "iw-16-")
    assert [p.inputs["name"] for p in flex] == [f"iw-16-{i}" for i in range(4)]
    (policy,) = plan.by_type(RESOURCE_POLICY)
    assert policy.inputs["name"] == "iron-iw-16" and policy.inputs["region"] == "us-central1"
    assert policy.inputs["workloadPolicy"] == {"type": "HIGH_THROUGHPUT",
                                               "acceleratorTopology": "2x2x2"}
    for p in flex:
        _xpk_flex(p, hosts=2)
        assert p.inputs["nodeConfig"]["machineType"] == "tpu7x-standard-4t"
        assert p.inputs["nodeConfig"]["maxRunDuration"] == "259200s"
        assert p.inputs["placementPolicy"]["policyName"] == "iron-iw-16"
        assert p.inputs["placementPolicy"]["type"] != "COMPACT"
    (single,) = _pools(plan, "iw-8")
    assert single.inputs["nodeCount"] == 1 and "placementPolicy" not in single.inputs
    assert single.inputs["nodeConfig"]["machineType"] == "tpu7x-standard-4t"
    assert "flexStart" not in single.inputs["nodeConfig"]


def test_ironwood_stack_ray_groups_start_at_zero_and_cost_nothing_at_count() -> None:
    plan = _plan(IRONWOOD)
    (rc,) = [r for r in plan.by_type(RAYCLUSTER) if r.inputs["metadata"]["name"] == "raytpu"] \
        or plan.by_type(RAYCLUSTER)[:1]
    groups = {w["groupName"]: w for w in rc.inputs["spec"]["workerGroupSpecs"]}
    iw16 = groups["iw-16"]
    assert (iw16["minReplicas"], iw16["replicas"], iw16["maxReplicas"]) == (0, 0, 2)
    assert iw16["numOfHosts"] == 2
    assert iw16["template"]["spec"]["nodeSelector"]["cloud.google.com/gke-tpu-accelerator"] \
        == "tpu7x"
    cost = cost_of(plan.config)
    row = next(g for g in cost["groups"] if g["name"] == "iw-16")
    assert row["capacity"] == "flex-start" and row["slices"]["count"] == 0
    assert any("no stored source lists its zones" in w for w in plan.warnings)


def test_v6e_flex_start_group_at_count_zero() -> None:
    plan = _plan(V6E_FLEX)
    pools = _pools(plan, "v6e-16-")
    assert len(pools) == 2
    for p in pools:
        _xpk_flex(p, hosts=4)
        assert p.inputs["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "4x4"}
    cost = cost_of(plan.config)
    (row,) = cost["groups"]
    hourly = row["hourly"]
    assert hourly["count"] == 0 and hourly["max"] > 0
    assert "flexStart" in row["price_source"]
    assert not any("flex-start zones" in w for w in plan.warnings)
