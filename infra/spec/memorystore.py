"""Inputs of :class:`~raytpu.components.MemorystoreRedis` (the GCS fault tolerance's Redis)
and their validation."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from raytpu.facts.problems import args_error
from raytpu.spec.inputs import Input

TIERS = ("BASIC", "STANDARD_HA")
INSTANCE_NAME = re.compile(r"^[a-z][-a-z0-9]{0,35}[a-z0-9]$")  # 40 with the "-psa" suffix


@dataclass(frozen=True)
class MemorystoreRedisArgs:
    """Inputs of :class:`MemorystoreRedis`."""

    project: str
    """The project the instance (and the reserved range) is created in."""
    region: str
    """The cluster's region: the GCS talks to Redis on every metadata write."""
    network: Input[str]
    """Self link (or id) of the VPC the GKE cluster runs in."""
    tier: Literal["BASIC", "STANDARD_HA"] = "STANDARD_HA"
    """``STANDARD_HA``: a replica in another zone, automatic failover."""
    memory_size_gb: int = 1
    """Capacity (1..300 GB); the GCS's tables of a cluster take megabytes."""
    redis_version: str = "REDIS_7_2"
    """Memorystore's version name (``REDIS_7_2``)."""
    create_private_service_access: bool = True
    """Reserve a range and peer the VPC with Google's services; false when it is peered."""
    private_service_access_prefix: int = 24
    """Prefix length of the reserved range (each instance takes a /29 of it)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Labels of the instance (the stack's cost-allocation labels)."""

    def __post_init__(self) -> None:
        if not self.project:
            raise args_error(self, "project", "required")
        if not re.fullmatch(r"[a-z]+-[a-z]+\d+", self.region):
            raise args_error(self, "region", f"{self.region!r} is not a GCP region")
        if self.tier not in TIERS:
            raise args_error(self, "tier", f"{self.tier!r}; valid: {', '.join(TIERS)}")
        if not 1 <= self.memory_size_gb <= 300:
            raise args_error(self, "memory_size_gb", f"{self.memory_size_gb} is outside "
                             "1..300 GB")
        if not 16 <= self.private_service_access_prefix <= 24:
            raise args_error(self, "private_service_access_prefix",
                             f"/{self.private_service_access_prefix}: use /16 to /24")
