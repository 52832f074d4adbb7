"""``raytpu:ray.gcsFaultTolerance`` -> the Memorystore instance (when the stack creates one)
and the :class:`~raytpu.components.GcsFaultTolerance` the RayCluster and the ``raytpu:jobs``
RayJobs' clusters get.

The stack's RayCluster declares the Secret holding the password (and the CA's ConfigMap) in
the Ray namespace; the jobs' clusters run in the same namespace and name the same objects.
Every cluster keeps its own storage namespace in Redis (KubeRay: the RayCluster's UID), so
one instance serves them all.
"""

from __future__ import annotations

import dataclasses

import pulumi
from raytpu.components.memorystore import TLS_PORT, MemorystoreRedis
from raytpu.config.stack import StackConfig
from raytpu.spec.memorystore import INSTANCE_NAME, MemorystoreRedisArgs
from raytpu.spec.ray_cluster import GcsFaultTolerance

# Before the instance exists (validation, `raytpu plan` of the RayJobs alone): its shape.
PENDING_ADDRESS = f"rediss://memorystore-pending:{TLS_PORT}"


def instance_name(cfg: StackConfig) -> str:
    return f"{cfg.cluster.name}-gcs"


def secret_name(cfg: StackConfig) -> str:
    return f"{cfg.ray.cluster_name}-gcs-redis"


def memorystore_problems(cfg: StackConfig) -> list[str]:
    """The instance's name comes from ``raytpu:cluster.name``: refuse one it cannot carry."""
    ft = cfg.ray.gcs_fault_tolerance
    name = instance_name(cfg)
    if ft is None or ft.memorystore is None or INSTANCE_NAME.match(name):
        return []
    return [f"raytpu:cluster.name: {cfg.cluster.name!r} names the Memorystore instance "
            f"{name!r} (raytpu:ray.gcsFaultTolerance.memorystore), which must be at most 37 "
            "characters; shorten the cluster name"]


def memorystore_args(cfg: StackConfig, network: pulumi.Input[str],
                     labels: dict[str, str]) -> MemorystoreRedisArgs | None:
    ft = cfg.ray.gcs_fault_tolerance
    if ft is None or ft.memorystore is None:
        return None
    m = ft.memorystore
    return MemorystoreRedisArgs(
        project=cfg.project, region=cfg.region, network=network, tier=m.tier,
        memory_size_gb=m.memory_size_gb, redis_version=m.redis_version,
        create_private_service_access=m.create_private_service_access,
        private_service_access_prefix=m.private_service_access_prefix, labels=labels)


def build_memorystore(cfg: StackConfig, network: pulumi.Input[str], labels: dict[str, str],
                      opts: pulumi.ResourceOptions | None) -> MemorystoreRedis | None:
    args = memorystore_args(cfg, network, labels)
    return None if args is None else MemorystoreRedis(instance_name(cfg), args, opts)


def gcs_fault_tolerance(cfg: StackConfig, redis: MemorystoreRedis | None = None
                        ) -> GcsFaultTolerance | None:
    """What the stack's RayCluster gets (it declares the Secret and CA ConfigMap of a
    Memorystore instance); :func:`for_jobs` for the clusters that only name them."""
    ft = cfg.ray.gcs_fault_tolerance
    if ft is None:
        return None
    timeout = ft.worker_reconnect_timeout_seconds
    if ft.existing_redis is not None:
        r = ft.existing_redis
        return GcsFaultTolerance(redis_address=r.address, password_secret=r.password_secret,
                                 password_key=r.password_key, ca_config_map=r.ca_config_map,
                                 worker_reconnect_timeout_s=timeout)
    name = secret_name(cfg)
    return GcsFaultTolerance(
        redis_address=redis.address if redis else PENDING_ADDRESS, password_secret=name,
        password=redis.auth_string if redis else None, ca_config_map=f"{name}-ca",
        ca_cert=redis.ca_cert if redis else None, worker_reconnect_timeout_s=timeout)


def for_jobs(ft: GcsFaultTolerance | None) -> GcsFaultTolerance | None:
    """The same Redis, naming the Secret and ConfigMap the stack's RayCluster declares."""
    return None if ft is None else dataclasses.replace(ft, password=None, ca_cert=None)
