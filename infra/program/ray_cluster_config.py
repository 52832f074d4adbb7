"""The stack's Ray settings as component Args: ``raytpu:ray`` and ``raytpu:slices`` ->
:class:`~raytpu.spec.ray_cluster.TpuRayClusterArgs`, and the stack keys problems
are reported against. Shared by the RayCluster (:mod:`raytpu.program.ray_program`) and the RayJobs
(:mod:`raytpu.program.training_job`), which shape their clusters the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pulumi
from raytpu.config.key_paths import Keys
from raytpu.config.schema import shared_fields
from raytpu.config.stack import StackConfig
from raytpu.program.gcs_ft_program import for_jobs, gcs_fault_tolerance
from raytpu.spec.ray_cluster import TpuRayClusterArgs, TpuWorkerGroup

if TYPE_CHECKING:
    from raytpu.components.memorystore import MemorystoreRedis


def ray_keys(cfg: StackConfig) -> Keys:
    """Where the RayCluster Args' fields come from in the stack (``raytpu:ray`` but for
    these), for its problems in stack keys."""
    return Keys("raytpu:ray", {
        ("worker_groups", int): "raytpu:slices[{0}]",
        # The default image is this stack's registry with raytpu:ray.imageTag.
        ("image",): "raytpu:ray.image" if cfg.ray.image else "raytpu:ray.imageTag",
        ("ray_version",): "raytpu:ray.version",
        ("access_cidrs",): "raytpu:network.rayAccessCidrs",
        ("checkpoint_uri",): "raytpu:storage.bucket",
    })


def worker_groups(cfg: StackConfig) -> list[TpuWorkerGroup]:
    """The shared RayCluster's groups: each slice group's pools less the slices the teams'
    nominal quotas hold (:func:`raytpu.config.team_rules.shared_max_slices`), so a team job
    Kueue admits always finds pools free."""
    from raytpu.config.team_rules import shared_max_slices

    out = []
    for s in cfg.slices:
        group = TpuWorkerGroup.of(s.group, env=s.env, labels=s.labels,
                                  ray_resources=s.ray_resources)
        if s.autoscaling:  # a fixed group's slices are all the shared cluster's
            # A stack capacity_problems refuses still builds its Args for the other checks.
            shared = max(shared_max_slices(cfg, s), group.initial_slices, 1)
            group = dataclasses.replace(group, max_slices=shared)
        out.append(group)
    return out


def cluster_args(
    cfg: StackConfig,
    *,
    gsa_email: pulumi.Input[str],
    system_pool: str | None = None,
    tpu_pools: Mapping[str, Mapping[str, str]] | None = None,
    create_namespace: bool = True,
    image: pulumi.Input[str] | None = None,
    redis: MemorystoreRedis | None = None,
    job: bool = False,
) -> TpuRayClusterArgs:
    """``image``: the Ray image (default ``cfg.image``; the stack passes its build's digest).
    ``redis``: the stack's Memorystore instance (GCS fault tolerance). ``job``: for a
    RayJob's cluster, which names the GCS Redis Secret the stack's RayCluster declares."""
    ft = gcs_fault_tolerance(cfg, redis)
    # raytpu:ray's keys are the Args fields of the same name; the rest comes from elsewhere
    # (the keys of those, for problems: ray_keys).
    return TpuRayClusterArgs(**{
        **shared_fields(TpuRayClusterArgs, cfg.ray),
        "gsa_email": gsa_email,
        "image": cfg.image if image is None else image,
        "ray_version": cfg.ray.version,
        "worker_groups": worker_groups(cfg),
        "checkpoint_uri": cfg.checkpoint_uri,
        "system_pool": system_pool,
        "tpu_pools": tpu_pools,
        "access_cidrs": cfg.network.ray_access_cidrs,
        "create_namespace": create_namespace,
        "pod_monitoring": cfg.monitoring.enabled,
        "gcs_fault_tolerance": for_jobs(ft) if job else ft,
    })
