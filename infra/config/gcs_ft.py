"""``raytpu:ray.gcsFaultTolerance``: keep the Ray head's GCS in Redis, so that the TPU workers
outlive a head restart (KubeRay ``spec.gcsFaultToleranceOptions``).

Either the stack creates a Memorystore for Redis instance (``memorystore``: in the stack's
VPC through private service access, AUTH on, TLS in transit) or the cluster uses a Redis
that exists (``existingRedis``: its address and the Secret holding its password). Absent:
no GCS fault tolerance (dev).

What KubeRay 1.7.0 does with the field (``common/pod.go configureGCSFaultTolerance``): the
head gets ``RAY_REDIS_ADDRESS``, ``REDIS_PASSWORD`` (from the Secret), the storage namespace
(the RayCluster's UID) and the ``ray.io/ft-enabled`` annotation; every worker gets
``RAY_gcs_rpc_server_reconnect_timeout_s`` = 600 unless set, so its raylet waits for the
new head instead of exiting after Ray's default 60 s. Ray 2.60 speaks TLS to Redis for a
``rediss://`` address (``ray/_private/services.py get_address``), verifying the server with
the CA file in ``RAY_REDIS_CA_CERT``.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field
from raytpu.config.base import ConfigModel as _Model
from raytpu.facts.gcs_ft_env import KUBERAY_HEAD_ENV, RECONNECT_ENV
from raytpu.facts.names import DNS_LABEL

# A new head pod is scheduled, pulls and starts its GCS in about a minute: a worker giving
# up sooner is restarted anyway.
MIN_RECONNECT_SECONDS = 60
_ADDRESS = re.compile(r"^(rediss?://)?[A-Za-z0-9.-]+:\d{1,5}$")


class MemorystoreConfig(_Model):
    """A Memorystore for Redis instance the stack creates for the GCS."""

    tier: Literal["BASIC", "STANDARD_HA"] = "STANDARD_HA"
    """STANDARD_HA: a replica in another zone takes over (the GCS survives a Redis zone)."""
    memory_size_gb: int = Field(1, ge=1, le=300)
    """The GCS of a few hundred nodes holds megabytes; 1 GB is the smallest instance."""
    redis_version: str = "REDIS_7_2"
    """Memorystore's Redis version (``REDIS_7_2``)."""
    create_private_service_access: bool = True
    """Reserve a range in the VPC and peer it with Google's services (private service
    access); false when the VPC already has that peering (one per VPC)."""
    private_service_access_prefix: int = Field(24, ge=16, le=24)
    """Size of the reserved range: a /24 holds the /29 every instance takes."""


class ExistingRedisConfig(_Model):
    """A Redis the stack does not manage: a single shard, Redis Sentinel, or a one-shard
    cluster (what Ray's GCS accepts)."""

    address: str
    """``host:port``; ``rediss://host:port`` for TLS."""
    password_secret: str
    """Secret in the Ray namespace holding the Redis password."""
    password_key: str = "password"
    """The Secret's data key."""
    ca_config_map: str | None = None
    """ConfigMap in the Ray namespace with the server's CA (key ``ca.crt``), for rediss://."""


class GcsFaultToleranceConfig(_Model):
    memorystore: MemorystoreConfig | None = None
    """A Memorystore for Redis instance the stack creates (give this or ``existingRedis``)."""
    existing_redis: ExistingRedisConfig | None = None
    """A Redis that exists already (give this or ``memorystore``)."""
    worker_reconnect_timeout_seconds: int | None = None
    """How long a worker's raylet waits for a new head; unset: KubeRay's 600."""

    @property
    def tls(self) -> bool:
        if self.memorystore is not None:
            return True
        return bool(self.existing_redis and self.existing_redis.address.startswith("rediss://"))


def _env_problems(where: str, env: dict[str, str], *, head: bool, on: bool) -> list[str]:
    problems: list[str] = []
    if RECONNECT_ENV in env:
        if on:
            problems.append(f"{where}.{RECONNECT_ENV}: set raytpu:ray.gcsFaultTolerance."
                            "workerReconnectTimeoutSeconds instead")
        else:
            # Without GCS FT the new head knows none of the old nodes: a worker that waits
            # longer only delays its restart.
            problems.append(f"{where}.{RECONNECT_ENV}: {env[RECONNECT_ENV]!r} cannot keep a "
                            "worker through a head restart without GCS fault tolerance; set "
                            "raytpu:ray.gcsFaultTolerance or drop it")
    if head:
        for name in KUBERAY_HEAD_ENV:
            if name in env:
                problems.append(f"{where}.{name}: KubeRay sets it from "
                                "gcsFaultToleranceOptions and rejects it set by hand; use "
                                "raytpu:ray.gcsFaultTolerance")
    return problems


def gcs_ft_problems(head_env: dict[str, str], slice_env: list[dict[str, str]],
                    ft: GcsFaultToleranceConfig | None) -> list[str]:
    """Every reason ``raytpu:ray.gcsFaultTolerance`` (or its absence) cannot work, naming the
    key and the value."""
    key = "raytpu:ray.gcsFaultTolerance"
    on = ft is not None
    problems = _env_problems("raytpu:ray.headEnv", head_env, head=True, on=on)
    for i, env in enumerate(slice_env):
        problems += _env_problems(f"raytpu:slices[{i}].env", env, head=False, on=on)
    if ft is None:
        return problems
    if (ft.memorystore is None) == (ft.existing_redis is None):
        problems.append(f"{key}: set exactly one of memorystore (the stack creates the "
                        "instance) and existingRedis (address and password Secret)")
    t = ft.worker_reconnect_timeout_seconds
    if t is not None and t < MIN_RECONNECT_SECONDS:
        problems.append(f"{key}.workerReconnectTimeoutSeconds: {t} is shorter than a head "
                        f"restart takes; at least {MIN_RECONNECT_SECONDS}")
    r = ft.existing_redis
    if r is not None:
        k = f"{key}.existingRedis"
        if not _ADDRESS.match(r.address):
            problems.append(f"{k}.address: {r.address!r} is not host:port, redis://host:port "
                            "or rediss://host:port")
        if not DNS_LABEL.match(r.password_secret):
            problems.append(f"{k}.passwordSecret: {r.password_secret!r} is not a Secret name "
                            "(a DNS label)")
        if r.ca_config_map is not None and not r.address.startswith("rediss://"):
            problems.append(f"{k}.caConfigMap: {r.ca_config_map!r} is only read over TLS; "
                            f"the address {r.address!r} is not rediss://")
        if r.ca_config_map is not None and not DNS_LABEL.match(r.ca_config_map):
            problems.append(f"{k}.caConfigMap: {r.ca_config_map!r} is not a ConfigMap name")
    return problems
