"""TpuSlicePool alone: one pool per multi-host slice (COMPACT + topology, hosts nodes),
one pool for all single-host slices (no topology), per-zone all-or-nothing autoscaling."""

from __future__ import annotations

from typing import Any

import pytest
from infra_support import NODE_POOL, PROJECT, ZONE, refused_alone, run_alone
from raytpu.components import SliceAutoscaling, TpuSlicePool, TpuSlicePoolArgs
from raytpu.components.tpu_slice_pool import RESERVATION_KEY
from raytpu.facts.catalog import SliceShape, slice_shape
from raytpu.plan.engine import PlannedResource, PlanResult
from test_gcp_input_names import gcp_inputs_problems

CLUSTER_ID = f"projects/{PROJECT}/locations/{ZONE}/clusters/c"
SA = f"c-nodes@{PROJECT}.iam.gserviceaccount.com"


def pool_args(shape: SliceShape, zone: str = ZONE, **kw: Any) -> TpuSlicePoolArgs:
    base: dict[str, Any] = dict(
        shape=shape, cluster=CLUSTER_ID, zone=zone, node_service_account=SA, project=PROJECT,
        node_tags=("c-node", "c-tpu"),
    )
    return TpuSlicePoolArgs(**{**base, **kw})


def plan_pools(shape: SliceShape, **kw: Any) -> tuple[PlanResult, dict[str, Any]]:
    attrs: dict[str, Any] = {}

    def program() -> None:
        p = TpuSlicePool("tpu", pool_args(shape, **kw))
        attrs.update(node_pool_names=p.node_pool_names, node_selector=p.node_selector,
                     hosts_per_slice=p.hosts_per_slice, slices=p.slices,
                     pools=len(p.node_pools))

    return run_alone(program), attrs


def pools(plan: PlanResult) -> list[PlannedResource]:
    return sorted(plan.by_type(NODE_POOL), key=lambda r: r.name)


# (tpu, machine type or None, zone, hosts, topology, multi-host)
SHAPES = [
    ("v4-8", None, "us-central2-b", 1, "2x2x1", False),
    ("v4-16", None, "us-central2-b", 2, "2x2x2", True),
    ("v4-32", None, "us-central2-b", 4, "2x2x4", True),
    ("v5litepod-4", None, "us-west4-a", 1, "2x2", False),
    ("v5litepod-8", None, "us-west4-a", 1, "2x4", False),  # one 8-chip VM
    ("v5litepod-8", "ct5lp-hightpu-4t", "us-west4-a", 2, "2x4", True),
    ("v5litepod-16", None, "us-west4-a", 4, "4x4", True),
    ("v5p-8", None, "us-east5-a", 1, "2x2x1", False),
    ("v5p-16", None, "us-east5-a", 2, "2x2x2", True),
    ("v6e-8", None, "us-east5-b", 1, "2x4", False),  # ct6e-standard-8t
    ("v6e-8", "ct6e-standard-4t", "us-east5-b", 2, "2x4", True),
    ("v6e-16", None, "us-east5-b", 4, "4x4", True),
]


@pytest.mark.parametrize(("tpu", "machine", "zone", "hosts", "topology", "multi"), SHAPES)
def test_static_pools_per_shape(
    tpu: str, machine: str | None, zone: str, hosts: int, topology: str, multi: bool
) -> None:
    shape = slice_shape(tpu, machine_type=machine)
    assert (shape.hosts, shape.topology, shape.multi_host) == (hosts, topology, multi)
    plan, attrs = plan_pools(shape, zone=zone, location=zone, slices=2)
    found = pools(plan)
    assert attrs["hosts_per_slice"] == hosts and attrs["slices"] == 2
    assert attrs["node_selector"] == shape.node_selector
    for p in found:
        i = p.inputs
        assert p.parent == "tpu"
        assert i["nodeLocations"] == [zone]
        assert i["nodeConfig"]["machineType"] == shape.machine_type
        assert "autoscaling" not in i and "initialNodeCount" not in i
        assert "ignoreChanges" not in p.options
    if multi:
        # One pool per slice, each exactly one slice big, COMPACT + topology.
        assert [p.inputs["name"] for p in found] == ["tpu-0", "tpu-1"]
        assert attrs["node_pool_names"] == ["tpu-0", "tpu-1"]
        for p in found:
            assert p.inputs["nodeCount"] == hosts
            assert p.inputs["placementPolicy"] == {"type": "COMPACT", "tpuTopology": topology}
    else:
        # Single-host: one pool, one node per slice, no topology/placement at all.
        assert [p.inputs["name"] for p in found] == ["tpu"]
        assert found[0].inputs["nodeCount"] == 2
        assert "placementPolicy" not in found[0].inputs


def test_documented_node_counts() -> None:
    assert slice_shape("v4-16").hosts == 2
    assert slice_shape("v5litepod-16").hosts == 4
    v6e_8 = slice_shape("v6e-8")
    v6e_8_4t = slice_shape("v6e-8", machine_type="ct6e-standard-4t")
    assert (v6e_8.machine_type, v6e_8.hosts) == ("ct6e-standard-8t", 1)
    assert (v6e_8_4t.machine_type, v6e_8_4t.hosts) == ("ct6e-standard-4t", 2)


def test_elastic_multi_host_pools_autoscale_per_zone_all_or_nothing() -> None:
    shape = slice_shape("v5litepod-16")
    plan, attrs = plan_pools(shape, slices=2, autoscaling=SliceAutoscaling(1, 4))
    found = pools(plan)
    assert [p.inputs["name"] for p in found] == ["tpu-0", "tpu-1", "tpu-2", "tpu-3"]
    assert attrs["slices"] == 4
    for idx, p in enumerate(found):
        i = p.inputs
        # Per-zone fields only: total_max_node_count leaves the per-zone max at 0 and GKE
        # rejects the slice (vllm-project/ci-infra#545).
        assert i["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 4, "locationPolicy": "ANY"}
        assert "totalMaxNodeCount" not in i["autoscaling"]
        assert "totalMinNodeCount" not in i["autoscaling"]
        assert "nodeCount" not in i
        assert i["initialNodeCount"] == (4 if idx < 2 else 0)
        assert p.options["ignoreChanges"] == ["initialNodeCount"]
        assert i["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "4x4"}


def test_elastic_single_host_pool_scales_in_slices() -> None:
    plan, attrs = plan_pools(slice_shape("v5litepod-4"), slices=1,
                             autoscaling=SliceAutoscaling(0, 6))
    (p,) = pools(plan)
    assert p.inputs["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 6,
                                       "locationPolicy": "ANY"}
    assert p.inputs["initialNodeCount"] == 1 and "nodeCount" not in p.inputs
    assert "placementPolicy" not in p.inputs
    assert p.options["ignoreChanges"] == ["initialNodeCount"]
    assert attrs["slices"] == 6 and attrs["hosts_per_slice"] == 1


def test_node_config() -> None:
    plan, _ = plan_pools(slice_shape("v4-16"), zone="us-central2-b", spot=True)
    (p,) = pools(plan)
    i = p.inputs
    nc = i["nodeConfig"]
    assert i["maxPodsPerNode"] == 15
    assert i["management"] == {"autoRepair": True, "autoUpgrade": True}
    assert i["cluster"] == CLUSTER_ID and i["location"] == "us-central2-b"
    assert nc["spot"] is True
    assert nc["gvnic"] == {"enabled": True}
    assert nc["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert nc["serviceAccount"] == SA
    assert nc["tags"] == ["c-node", "c-tpu"]
    assert nc["oauthScopes"] == ["https://www.googleapis.com/auth/cloud-platform"]
    # TPU chips come with the machine type; GKE adds the google.com/tpu taint itself.
    assert "guestAccelerators" not in nc and "taints" not in nc
    assert "reservationAffinity" not in nc


@pytest.mark.parametrize(("tpu", "zone", "profile"), [
    ("v6e-16", "us-east5-b", True),            # multi-host, ct6e-standard-4t
    ("v6e-4", "us-east5-b", True),             # one 4-chip VM: xpk sets it too
    ("v6e-8", "us-east5-b", False),            # ct6e-standard-8t: not in xpk 1.16.0
    ("v5litepod-16", "us-west4-a", False),
])
def test_v6e_pools_get_the_accelerator_network_profile_xpk_sets(
        tpu: str, zone: str, profile: bool) -> None:
    # xpk 1.16.0: --accelerator-network-profile=auto with the node label
    # cloud.google.com/gke-networking-dra-driver=true on every v6e pool it creates.
    plan, _ = plan_pools(slice_shape(tpu), zone=zone, labels={"team": "a"})
    for p in pools(plan):
        i = p.inputs
        if profile:
            assert i["networkConfig"] == {"acceleratorNetworkProfile": "auto"}
            assert i["nodeConfig"]["labels"] == {
                "team": "a", "cloud.google.com/gke-networking-dra-driver": "true"}
        else:
            assert "networkConfig" not in i
            assert i["nodeConfig"]["labels"] == {"team": "a"}
    assert gcp_inputs_problems([(r.type, r.name, r.inputs) for r in plan.resources]) == []


def test_reservation_affinity() -> None:
    plan, _ = plan_pools(slice_shape("v5litepod-16"), reservation="tpu-res")
    (p,) = pools(plan)
    assert p.inputs["nodeConfig"]["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": RESERVATION_KEY,
        "values": ["tpu-res"],
    }
    assert p.inputs["nodeConfig"]["spot"] is False


def test_regional_cluster_pool_stays_in_one_zone() -> None:
    plan, _ = plan_pools(slice_shape("v5litepod-16"), location="us-west4")
    (p,) = pools(plan)
    assert p.inputs["location"] == "us-west4" and p.inputs["nodeLocations"] == [ZONE]


@pytest.mark.parametrize(("kw", "message"), [
    ({"spot": True, "reservation": "r"}, r"spot and reservation exclude each other"),
    ({"slices": 0}, r"slices: 0 must be >= 1"),
    ({"slices": 5, "autoscaling": SliceAutoscaling(0, 4)}, r"outside autoscaling \[0, 4\]"),
    ({"zone": "us-west4"}, r"zone: 'us-west4' is not a GCP zone"),
    ({"location": "europe-west4"}, r"location: 'europe-west4' must be the zone"),
    ({"node_tags": ("UPPER",)}, r"node_tags: 'UPPER'"),
    ({"max_pods_per_node": 4}, r"max_pods_per_node: 4"),
])
def test_bad_args_are_refused(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        pool_args(slice_shape("v5litepod-16"), **kw)


def test_bad_autoscaling_and_shape_are_refused() -> None:
    with pytest.raises(ValueError, match=r"min_slices \(3\) <= max_slices \(2\)"):
        SliceAutoscaling(3, 2)
    with pytest.raises(TypeError, match="SliceShape is required"):
        pool_args("v4-16")  # type: ignore[arg-type]


def test_bad_component_registers_nothing() -> None:
    (error,) = refused_alone(
        lambda: TpuSlicePool("tpu", pool_args(slice_shape("v4-16"), pool_name="x" * 40)))
    assert isinstance(error, ValueError) and "40 characters" in str(error)


def test_readme_example_in_a_foreign_program() -> None:
    """The README's composition example, in a program that owns its cluster and SA."""
    import pulumi
    import pulumi_gcp as gcp

    exported: dict[str, Any] = {}

    def program() -> None:
        my_cluster = gcp.container.Cluster("theirs", location="us-central2-b",
                                           initial_node_count=1)
        node_sa = gcp.serviceaccount.Account("theirs-nodes", account_id="theirs-nodes")
        pool = TpuSlicePool("train", TpuSlicePoolArgs(
            shape=slice_shape("v4-16"),
            cluster=my_cluster.id,
            zone="us-central2-b",
            node_service_account=node_sa.email,
            project="my-project",
            autoscaling=SliceAutoscaling(min_slices=0, max_slices=2),
            spot=True,
        ))
        pulumi.Output.all(pool.node_pool_names, pool.node_selector).apply(
            lambda v: exported.update(names=v[0], selector=v[1]))

    plan = run_alone(program)
    assert exported["names"] == ["train-0", "train-1"]
    assert exported["selector"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v4-podslice",
        "cloud.google.com/gke-tpu-topology": "2x2x2",
        "node.kubernetes.io/instance-type": "ct4p-hightpu-4t",
    }
    made = pools(plan)
    assert [p.parent for p in made] == ["train", "train"]
    assert all(p.inputs["cluster"].endswith("/clusters/theirs") for p in made)
    assert all(p.inputs["nodeConfig"]["serviceAccount"].startswith("theirs-nodes@")
               for p in made)


# -- capacity modes, count 0, Ironwood (issue 44) --------------------------------------------


@pytest.mark.parametrize("tpu", ["v6e-16", "v6e-4"])
def test_flex_start_pools_are_what_gke_and_xpk_create(tpu: str) -> None:
    """xpk 1.16 --flex: --flex-start --enable-autoscaling --location-policy=ANY
    --reservation-affinity=none --no-enable-autorepair --num-nodes=0, never --spot."""
    shape = slice_shape(tpu)
    plan, _ = plan_pools(shape, zone="us-east5-a", slices=2, flex_start=True,
                         max_run_seconds=36 * 3600)
    found = pools(plan)
    assert len(found) == (2 if shape.multi_host else 1)
    for p in found:
        i, nc = p.inputs, p.inputs["nodeConfig"]
        assert nc["flexStart"] is True and nc["maxRunDuration"] == "129600s"
        assert nc["spot"] is False
        assert nc["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
        assert i["management"]["autoRepair"] is False
        assert i["initialNodeCount"] == 0 and "nodeCount" not in i
        assert i["autoscaling"] == {
            "minNodeCount": 0, "maxNodeCount": shape.hosts if shape.multi_host else 2,
            "locationPolicy": "ANY"}


def test_flex_start_run_limit_defaults_to_seven_days() -> None:
    plan, _ = plan_pools(slice_shape("v6e-16"), zone="us-east5-a", flex_start=True)
    assert {p.inputs["nodeConfig"]["maxRunDuration"] for p in pools(plan)} == {"604800s"}


@pytest.mark.parametrize(("kw", "message"), [
    ({"flex_start": True, "spot": True}, r"never Spot and consume no reservation"),
    ({"flex_start": True, "reservation": "r"}, r"never Spot and consume no reservation"),
    ({"flex_start": True, "max_run_seconds": 8 * 86400}, r"max_run_seconds: 691200"),
    ({"max_run_seconds": 3600}, r"max_run_seconds: 3600 needs flex_start"),
])
def test_bad_flex_start_args_are_refused(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        pool_args(slice_shape("v6e-16"), **kw)


def test_count_zero_elastic_pools_start_empty() -> None:
    plan, attrs = plan_pools(slice_shape("v4-16"), zone="us-central2-b", slices=0,
                             autoscaling=SliceAutoscaling(0, 2))
    assert [p.inputs["initialNodeCount"] for p in pools(plan)] == [0, 0]
    assert attrs["slices"] == 2
    plan, _ = plan_pools(slice_shape("v4-8"), zone="us-central2-b", slices=0,
                         autoscaling=SliceAutoscaling(0, 3))
    (p,) = pools(plan)
    assert p.inputs["initialNodeCount"] == 0 and p.inputs["autoscaling"]["maxNodeCount"] == 3


def test_ironwood_multi_host_pools_share_one_workload_policy() -> None:
    plan, _ = plan_pools(slice_shape("tpu7x-32"), zone="us-central1-c", slices=2,
                         workload_policy_name="c-train")
    (policy,) = plan.by_type("gcp:compute/resourcePolicy:ResourcePolicy")
    assert policy.inputs == {
        "name": "c-train", "project": PROJECT, "region": "us-central1",
        "workloadPolicy": {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "2x2x4"}}
    for p in pools(plan):
        # GKE stores policyName + tpuTopology and no type: `type` empty is what it reports,
        # so a second `up` finds nothing to change (vllm-project/ci-infra#547).
        assert p.inputs["placementPolicy"] == {
            "type": "", "policyName": "c-train", "tpuTopology": "2x2x4"}
        assert p.inputs["nodeCount"] == 4
        assert p.inputs["nodeConfig"]["machineType"] == "tpu7x-standard-4t"
    single, _ = plan_pools(slice_shape("tpu7x-8"), zone="us-central1-c")
    assert not single.by_type("gcp:compute/resourcePolicy:ResourcePolicy")
    assert "placementPolicy" not in pools(single)[0].inputs
