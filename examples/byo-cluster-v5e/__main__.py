"""Two v5e-16 slices (4 hosts each), KubeRay and a RayCluster on an existing GKE cluster.

Nothing here creates a network or a cluster: ``ExistingGkeCluster`` looks the cluster up by
name and location and gives the TPU pools, the operator and the RayCluster what they need.
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

cluster = ExistingGkeCluster("gke", ExistingGkeClusterArgs(
    project=project,
    location=config.require("location"),
    cluster_name=config.require("clusterName"),
    node_service_account=config.require("nodeServiceAccount"),
))

# One node pool per slice: v5litepod-16 is a 4x4 topology on four ct5lp-hightpu-4t hosts.
v5e = slice_shape("v5litepod-16")
pools = TpuSlicePool("v5e", TpuSlicePoolArgs(
    shape=v5e,
    cluster=cluster.cluster_id,
    zone=zone,
    project=project,
    node_service_account=cluster.node_service_account_email,
    slices=2,
))

bucket = f"{project}-ray-checkpoints"
storage = CheckpointStorage("checkpoints", CheckpointStorageArgs(
    project=project,
    bucket_name=bucket,
    location=zone.rsplit("-", 1)[0],
    namespace="ray",
    ksa_name="ray-workload",
    gsa_account_id="ray-checkpoints",
))

in_cluster = pulumi.ResourceOptions(provider=cluster.provider)
operator = KubeRayOperator("kuberay", KubeRayOperatorArgs(), in_cluster)
ray = TpuRayCluster("ray", TpuRayClusterArgs(
    cluster_name="ray",
    namespace="ray",
    service_account="ray-workload",
    gsa_email=storage.gsa_email,
    image="rayproject/ray:2.60.0-py311",
    worker_groups=[TpuWorkerGroup("v5e", v5e, min_slices=2, max_slices=2, initial_slices=2)],
    checkpoint_uri=f"gs://{bucket}/runs",
    tpu_pools={name: pools.node_selector for name in pools.node_pool_names},
), pulumi.ResourceOptions(provider=cluster.provider,
                          depends_on=[*operator.ready, *pools.node_pools]))

pulumi.export("node_pools", pools.node_pool_names)
pulumi.export("bucket", storage.bucket_url)
