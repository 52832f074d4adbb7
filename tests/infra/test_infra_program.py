"""The whole stack program (program=None) for every stack file, config -> Args mapping,
and config errors reported against the stack key."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml
from infra_support import (
    CLUSTER,
    FIREWALL,
    NODE_POOL,
    PROJECT_IAM,
    STACKS,
    raw_config,
    run_alone,
)
from raytpu.config.stack import ConfigError
from raytpu.config.validate import parse_stack_config
from raytpu.plan.engine import PlanResult, run_program
from raytpu.program.stack import Infra, build_infra

COMPONENT_TYPES = {
    "raytpu:network:Network", "raytpu:gke:GkeCluster", "raytpu:tpu:TpuSlicePool",
    "raytpu:storage:CheckpointStorage", "raytpu:registry:ImageRegistry",
}
GKE_OUTPUTS = {
    "cluster_name", "cluster_location", "cluster_endpoint", "kubeconfig", "gke_version",
    "node_service_account", "network", "subnetwork", "node_pools", "slices", "bucket_name",
    "bucket_url", "checkpoint_gsa_email", "registry_url", "image",
}


def tpu_pools(plan: PlanResult) -> dict[str, dict[str, Any]]:
    system = f"{plan.config.cluster.name}-system"
    return {r.name: r.inputs for r in plan.by_type(NODE_POOL) if r.name != system}


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_plans(stack: str, stack_plans: dict[str, PlanResult]) -> None:
    plan = stack_plans[stack]
    # The only warnings a committed stack may carry: GKE's add-on operator is not ours to pin
    # (token auth survives only a recent KubeRay; multi-host needs a fixed TPU webhook; Pod
    # Security needs its KubeRay to copy securityContexts; GCS fault tolerance needs its CRD
    # to keep gcsFaultToleranceOptions; where it connects from for RayJob status is
    # undocumented, prod has teams).
    addon = plan.config.kuberay.mode == "gke-addon"
    assert [w.split(":")[1] for w in plan.warnings] == (
        ["ray.auth", "kuberay.mode", "kuberay.mode", "kuberay.mode", "kuberay.mode"]
        if addon else [])
    assert set(plan.outputs) >= GKE_OUTPUTS
    assert {r.type for r in plan.resources if not r.custom} >= COMPONENT_TYPES
    # Every cloud resource belongs to a component; components sit at the top.
    for r in plan.resources:
        assert (r.parent is not None) == (r.custom or not r.type.startswith("raytpu:")), r
    assert len(plan.by_type(CLUSTER)) == 1
    c = plan.by_type(CLUSTER)[0].inputs
    assert "tpuConfig" not in c and "enableTpu" not in c
    assert not [g for g in plan.by_type(PROJECT_IAM)
                if g.inputs["role"] in ("roles/editor", "roles/owner")]
    for fw in plan.by_type(FIREWALL):
        assert all(ipaddress.ip_network(s).prefixlen > 0
                   for s in fw.inputs.get("sourceRanges", []))
        assert fw.inputs.get("targetTags") or fw.inputs.get("targetServiceAccounts")


def test_dev_single_host_spot(stack_plans: dict[str, PlanResult]) -> None:
    plan = stack_plans["dev"]
    pools = tpu_pools(plan)
    assert list(pools) == ["v5e-4"]
    p = pools["v5e-4"]
    assert p["nodeCount"] == 1 and "placementPolicy" not in p
    assert p["nodeConfig"]["spot"] is True
    assert plan.by_type(CLUSTER)[0].inputs["deletionProtection"] is False
    assert plan.by_type(CLUSTER)[0].inputs["addonsConfig"]["rayOperatorConfigs"] == [
        {"enabled": False}]
    assert plan.outputs["node_pools"] == {"v5e-4": ["v5e-4"]}
    assert plan.get("gcp:storage/bucket:Bucket", "checkpoints-bucket").inputs["forceDestroy"]


def test_staging_v4_16_is_two_hosts(stack_plans: dict[str, PlanResult]) -> None:
    plan = stack_plans["staging"]
    pools = tpu_pools(plan)
    assert list(pools) == ["v4-16-0"]
    p = pools["v4-16-0"]
    assert p["nodeCount"] == 2
    assert p["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "2x2x2"}
    assert p["nodeLocations"] == ["us-central2-b"]
    assert p["nodeConfig"]["machineType"] == "ct4p-hightpu-4t"


def test_prod_elastic_v5e(stack_plans: dict[str, PlanResult]) -> None:
    plan = stack_plans["prod"]
    pools = tpu_pools(plan)
    elastic = [pools[f"v5e-16-{i}"] for i in range(4)]
    for i, p in enumerate(elastic):
        assert p["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 4, "locationPolicy": "ANY"}
        assert p["initialNodeCount"] == (4 if i < 1 else 0)  # count: 1 starts provisioned
        assert p["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "4x4"}
    assert pools["v5e-8-eval-0"]["nodeCount"] == 2
    assert pools["v5e-8-eval-0"]["placementPolicy"]["tpuTopology"] == "2x4"
    cluster = plan.by_type(CLUSTER)[0].inputs
    assert cluster["deletionProtection"] is True
    assert cluster["addonsConfig"]["rayOperatorConfigs"] == [{"enabled": True}]
    assert cluster["releaseChannel"] == {"channel": "STABLE"}
    for name in ("v5e-16-0", "v5e-16-5"):
        assert plan.get(NODE_POOL, name).options["ignoreChanges"] == ["initialNodeCount"]
    assert plan.outputs["node_pools"]["v5e-16"] == [f"v5e-16-{i}" for i in range(6)]


@pytest.mark.parametrize("stack", STACKS)
def test_kubeconfig_output(stack: str, stack_plans: dict[str, PlanResult]) -> None:
    plan = stack_plans[stack]
    doc = yaml.safe_load(plan.outputs["kubeconfig"])
    cluster = doc["clusters"][0]["cluster"]
    # The shipped stacks deploy through the DNS-based endpoint (publicly trusted cert).
    assert cluster == {"server": f"https://{plan.outputs['cluster_dns_endpoint']}"}
    assert doc["users"][0]["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"
    assert doc["current-context"].endswith(f"_{plan.outputs['cluster_name']}")


def test_outputs_wire_components(stack_plans: dict[str, PlanResult]) -> None:
    out = stack_plans["staging"].outputs
    assert out["cluster_location"] == "us-central2-b"
    assert out["registry_url"] == "us-central2-docker.pkg.dev/raytpu-staging/raytpu"
    # Built here and named by digest in the stack's repository.
    assert re.fullmatch(re.escape(out["registry_url"]) + r"/raytpu@sha256:[0-9a-f]{64}",
                        out["image"])
    assert out["bucket_url"] == f"gs://{out['bucket_name']}"
    assert out["checkpoint_gsa_email"].startswith("raytpu-staging-ckpt@")
    assert out["slices"]["v4-16"]["hostsPerSlice"] == 2


def test_infra_hands_the_ray_layer_what_it_needs() -> None:
    held: dict[str, Infra] = {}
    raw = raw_config(raytpu_slices=[
        {"name": "big", "tpu": "v5litepod-16", "count": 2},
        {"name": "small", "tpu": "v5litepod-4", "count": 2},
    ])
    run_alone(lambda: held.update(infra=build_infra(parse_stack_config("test", raw))), raw)
    infra = held["infra"]
    assert isinstance(infra.provider, k8s.Provider)
    assert set(infra.tpu_pools) == {"big", "small"}
    assert infra.tpu_pool_labels == {
        "big-0": {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
                  "cloud.google.com/gke-tpu-topology": "4x4",
                  "node.kubernetes.io/instance-type": "ct5lp-hightpu-4t"},
        "big-1": {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
                  "cloud.google.com/gke-tpu-topology": "4x4",
                  "node.kubernetes.io/instance-type": "ct5lp-hightpu-4t"},
        "small": {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
                  "cloud.google.com/gke-tpu-topology": "2x2",
                  "node.kubernetes.io/instance-type": "ct5lp-hightpu-4t"},
    }
    assert len(infra.node_pools) == 3
    assert all(isinstance(r, pulumi.Resource) for r in infra.depends_on)
    assert infra.system_pool_name == "system"
    # The build's digest reference, known once pushed (its value: test_outputs_wire_components).
    assert isinstance(infra.image, pulumi.Output)


def test_regional_cluster_and_existing_network() -> None:
    raw = raw_config(
        raytpu_cluster={"name": "reg", "regional": True, "deletionProtection": False},
        raytpu_network={"create": False, "existing": {
            "network": "shared", "subnetwork": "gke", "podsRangeName": "pods",
            "servicesRangeName": "svc"}},
    )
    plan = run_program("test", raw)
    cluster = plan.by_type(CLUSTER)[0].inputs
    assert cluster["location"] == "us-west4"
    assert cluster["network"] == "shared" and cluster["subnetwork"] == "gke"
    assert cluster["ipAllocationPolicy"] == {"clusterSecondaryRangeName": "pods",
                                             "servicesSecondaryRangeName": "svc"}
    pool = plan.get(NODE_POOL, "v5e-4").inputs
    assert pool["location"] == "us-west4" and pool["nodeLocations"] == ["us-west4-a"]
    custom_types = {r.type for r in plan.resources if r.custom and r.type.startswith("gcp:compute")}
    assert custom_types == {FIREWALL}


@pytest.mark.parametrize(("overrides", "expected"), [
    ({"raytpu_slices": [{"name": "a", "tpu": "v4-16"}, {"name": "b", "tpu": "v4-12"}]},
     "raytpu:slices[1].tpu: 'v4-12' is not a TPU v4 accelerator type"),
    ({"raytpu_slices": [{"name": "a", "tpu": "v5litepod-16", "topology": "2x8"}]},
     "raytpu:slices[0].topology: '2x8'"),
    ({"raytpu_slices": [{"name": "a", "tpu": "v5litepod-4", "spot": True,
                         "reservation": "r"}]},
     "raytpu:slices[0]: spot and reservation exclude each other"),
    ({"raytpu_network": {"podsCidr": "10.0.0.0/14"}},
     "raytpu:network.subnetCidr: 10.0.0.0/20 overlaps raytpu:network.podsCidr"),
    ({"raytpu_network": {"rayAccessCidrs": ["0.0.0.0/0"]}},
     "raytpu:network.rayAccessCidrs[0]: '0.0.0.0/0' opens to the whole internet"),
    ({"raytpu_cluster": {"masterIpv4CidrBlock": "172.16.0.0/24"}},
     "raytpu:cluster.masterIpv4CidrBlock: '172.16.0.0/24' must be a private /28"),
    ({"raytpu_storage": {"bucket": "Not_A_Bucket"}},
     "raytpu:storage.bucket: 'Not_A_Bucket'"),
    ({"raytpu_cluster": {"nmae": "typo"}}, "raytpu:cluster.nmae: unknown key"),
])
def test_bad_config_names_the_key(overrides: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        run_program("test", raw_config(**overrides))
    assert any(expected in p for p in info.value.problems), info.value.problems
    # Stack key paths, never the components' Python field names.
    assert not [p for p in info.value.problems
                if re.search(r"\b(\w+Args|ExistingNetwork)\b|\b[a-z]+_[a-z_]+\b", p)]
