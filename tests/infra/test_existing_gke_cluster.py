"""Bring your own cluster: TPU slice pools, the KubeRay operator and a RayCluster on a GKE
cluster this program does not create, referenced by name and location or through the
outputs of the stack that owns it."""

from __future__ import annotations

import re
from typing import Any

import pulumi
import pytest
import yaml
from infra_support import CLUSTER, NODE_POOL, PROJECT, STACKS, ZONE, refused_alone, run_alone
from raytpu.components import (
    ExistingGkeCluster,
    ExistingGkeClusterArgs,
    GkeCluster,
    KubeRayOperator,
    KubeRayOperatorArgs,
    TpuRayCluster,
    TpuRayClusterArgs,
    TpuSlicePool,
    TpuSlicePoolArgs,
    TpuWorkerGroup,
    slice_shape,
)
from raytpu.plan.engine import PlanResult
from raytpu.plan.mocks import _FAKE_CA, RecordingMocks
from raytpu.spec.existing_gke_cluster import STACK_OUTPUTS
from test_gke_cluster import gke_args

SA = f"tpu-nodes@{PROJECT}.iam.gserviceaccount.com"
THEIRS = f"projects/{PROJECT}/locations/{ZONE}/clusters/theirs"
GET_CLUSTER = "gcp:container/getCluster:getCluster"
K8S_PROVIDER = "pulumi:providers:kubernetes"


def byo_args(**kw: Any) -> ExistingGkeClusterArgs:
    base: dict[str, Any] = dict(project=PROJECT, location=ZONE, cluster_name="theirs",
                                node_service_account=SA)
    return ExistingGkeClusterArgs(**{**base, **kw})


def ray_on(cluster: ExistingGkeCluster) -> None:
    """Two v5e-16 slices (4 hosts each), KubeRay and a RayCluster on ``cluster``."""
    shape = slice_shape("v5litepod-16")
    pool = TpuSlicePool("v5e", TpuSlicePoolArgs(
        shape=shape, cluster=cluster.cluster_id, zone=ZONE, project=PROJECT,
        node_service_account=cluster.node_service_account_email, slices=2))
    k8s = pulumi.ResourceOptions(provider=cluster.provider)
    operator = KubeRayOperator("kuberay", KubeRayOperatorArgs(), k8s)
    TpuRayCluster("ray", TpuRayClusterArgs(
        cluster_name="raytpu", namespace="ray", service_account="ray-workload",
        gsa_email=f"ckpt@{PROJECT}.iam.gserviceaccount.com", image="rayproject/ray:2.60.0-py311",
        worker_groups=[TpuWorkerGroup("v5e", shape, 2, 2, 2)],
        tpu_pools={n: pool.node_selector for n in pool.node_pool_names},
    ), pulumi.ResourceOptions(provider=cluster.provider,
                              depends_on=[*operator.ready, *pool.node_pools]))


def plan_byo(args: ExistingGkeClusterArgs) -> tuple[PlanResult, dict[str, Any]]:
    seen: dict[str, Any] = {}

    def program() -> None:
        cluster = ExistingGkeCluster("byo", args)
        cluster.kubeconfig.apply(lambda k: seen.update(kubeconfig=k))
        cluster.cluster_id.apply(lambda i: seen.update(cluster_id=i))
        ray_on(cluster)

    return run_alone(program), seen


def test_pools_operator_and_raycluster_without_network_or_cluster(
    calls: list[tuple[str, dict[str, Any]]],
) -> None:
    plan, seen = plan_byo(byo_args())
    types = {r.type for r in plan.resources}
    assert CLUSTER not in types
    assert not {t for t in types if t.startswith(("gcp:compute/", "gcp:serviceaccount/",
                                                  "gcp:projects/"))}
    pools = plan.by_type(NODE_POOL)
    assert sorted(p.inputs["name"] for p in pools) == ["v5e-0", "v5e-1"]
    for p in pools:
        assert p.inputs["cluster"] == THEIRS
        assert p.inputs["nodeConfig"]["serviceAccount"] == SA
        assert p.inputs["nodeCount"] == 4  # v5e-16: 16 chips / 4 per VM
    assert seen["cluster_id"] == THEIRS
    # Everything in Kubernetes goes through the one provider built for that cluster.
    (provider,) = plan.by_type(K8S_PROVIDER)
    k8s_objects = [r for r in plan.resources
                   if r.type.startswith("kubernetes:") and r.custom]
    assert k8s_objects and all(r.options.get("provider") == provider.urn for r in k8s_objects)
    (rc,) = [r for r in k8s_objects if r.type == "kubernetes:ray.io/v1:RayCluster"]
    (group,) = rc.inputs["spec"]["workerGroupSpecs"]
    assert (group["numOfHosts"], group["replicas"]) == (4, 2)
    # The kubeconfig comes from the looked-up cluster: its endpoint and CA.
    assert (GET_CLUSTER, {"name": "theirs", "location": ZONE, "project": PROJECT}) in calls
    doc = yaml.safe_load(seen["kubeconfig"])
    assert doc["clusters"][0]["cluster"] == {"certificate-authority-data": _FAKE_CA,
                                             "server": "https://10.0.0.3"}
    assert doc["current-context"] == f"gke_{PROJECT}_{ZONE}_theirs"
    assert doc["users"][0]["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"


def test_dns_endpoint_of_an_existing_cluster(calls: list[tuple[str, dict[str, Any]]]) -> None:
    _, seen = plan_byo(byo_args(dns_endpoint=True))
    cluster = yaml.safe_load(seen["kubeconfig"])["clusters"][0]["cluster"]
    assert cluster == {"server": f"https://gke-fedcba9876543210-{PROJECT}.{ZONE}.gke.goog"}


OWNER_OUTPUTS = {
    "cluster_name": "shared-gke", "cluster_location": "us-west4",
    "kubeconfig": "apiVersion: v1\nkind: Config\n# the owner's\n",
    "node_service_account": SA,
}


def test_from_a_stack_reference(monkeypatch: pytest.MonkeyPatch,
                                calls: list[tuple[str, dict[str, Any]]]) -> None:
    original = RecordingMocks.new_resource

    def new_resource(self: RecordingMocks, args: Any) -> Any:
        if args.typ == "pulumi:pulumi:StackReference":
            return args.name, {"name": args.name, "outputs": OWNER_OUTPUTS,
                               "secretOutputNames": ["kubeconfig"]}
        return original(self, args)

    monkeypatch.setattr(RecordingMocks, "new_resource", new_resource)
    seen: dict[str, Any] = {}

    def program() -> None:
        owner = pulumi.StackReference("acme/platform/prod")
        cluster = ExistingGkeCluster("byo", ExistingGkeClusterArgs.from_stack(owner, PROJECT))
        cluster.kubeconfig.apply(lambda k: seen.update(kubeconfig=k))
        ray_on(cluster)

    plan = run_alone(program)
    assert seen["kubeconfig"] == OWNER_OUTPUTS["kubeconfig"]  # used as given: no lookup
    assert not [c for c in calls if c[0] == GET_CLUSTER]
    for p in plan.by_type(NODE_POOL):
        assert p.inputs["cluster"] == f"projects/{PROJECT}/locations/us-west4/clusters/shared-gke"
        assert p.inputs["nodeConfig"]["serviceAccount"] == SA


@pytest.mark.parametrize("stack", STACKS)
def test_a_raytpu_stack_exports_what_from_stack_reads(
    stack: str, stack_plans: dict[str, PlanResult]
) -> None:
    assert set(STACK_OUTPUTS.values()) <= set(stack_plans[stack].outputs)


@pytest.mark.parametrize(("kw", "message"), [
    ({"project": "Acme"}, r"ExistingGkeClusterArgs.project: 'Acme'"),
    ({"location": "us-west"}, r"ExistingGkeClusterArgs.location: 'us-west' is neither"),
    ({"cluster_name": "Theirs"}, r"ExistingGkeClusterArgs.cluster_name: 'Theirs' must be"),
    ({"node_service_account": "1234-compute@developer.gserviceaccount.com"},
     r"node_service_account: .*\(not the Compute Engine default"),
    ({"node_service_account": "nodes"}, r"node_service_account: 'nodes' must be the email"),
])
def test_bad_values_are_refused_before_anything_is_registered(kw: dict[str, Any],
                                                              message: str) -> None:
    (err,) = refused_alone(lambda: ExistingGkeCluster("byo", byo_args(**kw)))
    assert isinstance(err, ValueError)
    assert re.search(message, str(err)), str(err)


def test_outputs_of_other_resources_are_taken_as_they_come() -> None:
    args = byo_args(cluster_name=pulumi.Output.from_input("Not_Checked_Here"))
    assert isinstance(args.cluster_name, pulumi.Output)


# What the pools, the operator and the RayCluster read from a cluster.
CONSUMED = ("cluster_id", "cluster_name", "location", "kubeconfig", "provider",
            "node_service_account_email", "node_service_account_member", "workload_pool")


def test_an_existing_cluster_offers_what_a_created_one_does(
    calls: list[tuple[str, dict[str, Any]]],
) -> None:
    made: dict[str, Any] = {}

    def program() -> None:
        made["created"] = GkeCluster("gke", gke_args())
        made["existing"] = ExistingGkeCluster("byo", byo_args())

    run_alone(program)
    for attr in CONSUMED:
        assert hasattr(made["created"], attr), attr
        assert hasattr(made["existing"], attr), attr
    assert made["existing"].workload_pool == made["created"].workload_pool
