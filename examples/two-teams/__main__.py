"""Two teams, one set of TPU slice pools: each team gets a namespace, a checkpoint bucket
bound to its own Kubernetes service account, and a RayCluster whose worker group asks for
one of the pools' v5e-16 slices.

The cluster belongs to another stack (a raytpu stack exports ``cluster_name``,
``cluster_location``, ``kubeconfig`` and ``node_service_account``); this program adds the
pools, KubeRay and the RayClusters to it.
"""

import pulumi
from raytpu.components import (
    CheckpointStorage,
    CheckpointStorageArgs,
    ExistingGkeCluster,
    ExistingGkeClusterArgs,
    KubeRayOperator,
    KubeRayOperatorArgs,
    TpuRayCluster,
    TpuRayClusterArgs,
    TpuSlicePool,
    TpuSlicePoolArgs,
    TpuWorkerGroup,
    slice_shape,
)

config = pulumi.Config()
project = pulumi.Config("gcp").require("project")
zone = config.require("zone")
teams: list[str] = config.require_object("teams")

owner = pulumi.StackReference(config.require("clusterStack"))
cluster = ExistingGkeCluster("gke", ExistingGkeClusterArgs.from_stack(owner, project))

# One slice per team, in one pool group: each slice is its own node pool (v5e-0, v5e-1).
v5e = slice_shape("v5litepod-16")
pools = TpuSlicePool("v5e", TpuSlicePoolArgs(
    shape=v5e,
    cluster=cluster.cluster_id,
    zone=zone,
    project=project,
    node_service_account=cluster.node_service_account_email,
    slices=len(teams),
))

in_cluster = pulumi.ResourceOptions(provider=cluster.provider)
operator = KubeRayOperator("kuberay", KubeRayOperatorArgs(), in_cluster)
tpu_pools = {name: pools.node_selector for name in pools.node_pool_names}

for team in teams:
    bucket = f"{project}-{team}-checkpoints"
    storage = CheckpointStorage(f"{team}-checkpoints", CheckpointStorageArgs(
        project=project,
        bucket_name=bucket,
        location=zone.rsplit("-", 1)[0],
        namespace=team,
        ksa_name="ray-workload",
        gsa_account_id=f"{team}-ray"[:30],
    ))
    TpuRayCluster(team, TpuRayClusterArgs(
        cluster_name="ray",
        namespace=team,
        service_account="ray-workload",
        gsa_email=storage.gsa_email,
        image="rayproject/ray:2.60.0-py311",
        worker_groups=[TpuWorkerGroup("v5e", v5e, min_slices=1, max_slices=1,
                                      initial_slices=1)],
        checkpoint_uri=f"gs://{bucket}/runs",
        tpu_pools=tpu_pools,
    ), pulumi.ResourceOptions(provider=cluster.provider,
                              depends_on=[*operator.ready, *pools.node_pools]))
