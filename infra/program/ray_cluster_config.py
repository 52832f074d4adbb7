"""The stack's Ray settings as component Args: ``raytpu:ray`` and ``raytpu:slices`` ->
:class:`~raytpu.components.ray_cluster_args.TpuRayClusterArgs`, and the stack keys problems
are reported against. Shared by the RayCluster (:mod:`raytpu.program.ray_program`) and the RayJobs
(:mod:`raytpu.program.training_job`), which shape their clusters the same way.
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
from raytpu.components.ray_cluster_args import TpuRayClusterArgs, TpuWorkerGroup
from raytpu.components.ray_cluster_validation import ProblemKeys
from raytpu.config.stack import StackConfig


def config_keys(cfg: StackConfig) -> ProblemKeys:
    """Config keys, for problems reported against the stack file."""
    return ProblemKeys(
        cluster_name="raytpu:ray.clusterName",
        namespace="raytpu:ray.namespace",
        service_account="raytpu:ray.serviceAccount",
        # The default image is this stack's registry with raytpu:ray.imageTag.
        image="raytpu:ray.image" if cfg.ray.image else "raytpu:ray.imageTag",
        auth="raytpu:ray.auth",
        access_cidrs="raytpu:network.rayAccessCidrs",
        labels="raytpu:ray.labels",
        head_labels="raytpu:ray.headLabels",
        head_ray_resources="raytpu:ray.headRayResources",
        worker_group=lambda i: f"raytpu:slices[{i}]",
    )


def worker_groups(cfg: StackConfig) -> list[TpuWorkerGroup]:
    return [TpuWorkerGroup.of(s.group, env=s.env, labels=s.labels,
                              ray_resources=s.ray_resources) for s in cfg.slices]


def cluster_args(
    cfg: StackConfig,
    *,
    gsa_email: pulumi.Input[str],
    system_pool: str | None = None,
    tpu_pools: Mapping[str, Mapping[str, str]] | None = None,
    create_namespace: bool = True,
    image: pulumi.Input[str] | None = None,
) -> TpuRayClusterArgs:
    """``image``: the Ray image (default ``cfg.image``; the stack passes its build's digest)."""
    r = cfg.ray
    return TpuRayClusterArgs(
        cluster_name=r.cluster_name,
        namespace=r.namespace,
        service_account=r.service_account,
        gsa_email=gsa_email,
        image=cfg.image if image is None else image,
        ray_version=r.version,
        worker_groups=worker_groups(cfg),
        checkpoint_uri=cfg.checkpoint_uri,
        system_pool=system_pool,
        tpu_pools=tpu_pools,
        head_cpu=r.head_cpu,
        head_memory=r.head_memory,
        head_env=r.head_env,
        head_labels=r.head_labels,
        head_ray_resources=r.head_ray_resources,
        idle_timeout_seconds=r.idle_timeout_seconds,
        dashboard_internal_lb=r.dashboard_internal_lb,
        auth=r.auth,
        access_cidrs=tuple(cfg.network.ray_access_cidrs),
        create_namespace=create_namespace,
        pod_monitoring=cfg.monitoring.enabled,
    )
