"""A Memorystore for Redis instance for the Ray GCS (GCS fault tolerance).

``MemorystoreRedis`` declares, in the stack's VPC:

* private service access: a reserved internal range (``purpose: VPC_PEERING``) and the VPC's
  peering with ``servicenetworking.googleapis.com`` (one per VPC: turn
  ``create_private_service_access`` off when the VPC has it already);
* the instance, reached only through that peering (``connectMode:
  PRIVATE_SERVICE_ACCESS``), with AUTH on and in-transit encryption
  (``SERVER_AUTHENTICATION``: TLS on port 6378, the server's certificate signed by a
  per-instance CA). Ray 2.60's GCS speaks TLS to a ``rediss://`` address and verifies the
  server with ``RAY_REDIS_CA_CERT`` (``ray/_private/services.py get_address``), which is what
  :attr:`MemorystoreRedis.address` and :attr:`MemorystoreRedis.ca_cert` are for.

The AUTH string is a secret output (as in pulumi_gcp's class): it reaches the Ray pods only
through a Kubernetes Secret (:class:`~raytpu.components.ray_cluster_args.GcsFaultTolerance`
``password``), never the RayCluster object, the plan or a log.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi
from raytpu.components.gcp_resources import (
    ComputeGlobalAddress,
    RedisInstance,
    ServiceNetworkingConnection,
)
from raytpu.facts.problems import args_error

SERVICE_NETWORKING = "servicenetworking.googleapis.com"
TLS_PORT = 6378  # in-transit encryption's port (6379 without it)
TIERS = ("BASIC", "STANDARD_HA")
INSTANCE_NAME = re.compile(r"^[a-z][-a-z0-9]{0,35}[a-z0-9]$")  # 40 with the "-psa" suffix


@dataclass(frozen=True)
class MemorystoreRedisArgs:
    """Inputs of :class:`MemorystoreRedis`."""

    project: str
    """The project the instance (and the reserved range) is created in."""
    region: str
    """The cluster's region: the GCS talks to Redis on every metadata write."""
    network: pulumi.Input[str]
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


class MemorystoreRedis(pulumi.ComponentResource):
    """Private service access + a Memorystore for Redis instance with AUTH and TLS."""

    address: pulumi.Output[str]
    """``rediss://<host>:<port>``: what ``gcsFaultToleranceOptions.redisAddress`` takes."""
    auth_string: pulumi.Output[str]
    """The AUTH password (secret)."""
    ca_cert: pulumi.Output[str]
    """PEM of the instance's server CA."""

    def __init__(self, name: str, args: MemorystoreRedisArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        if not INSTANCE_NAME.match(name):
            raise args_error("MemorystoreRedis", "name", f"{name!r} must be 2-37 lowercase "
                             "letters, digits and '-', starting with a letter")
        super().__init__("raytpu:redis:MemorystoreRedis", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        reserved: pulumi.Input[str] | None = None
        depends: list[pulumi.Resource] = []
        if args.create_private_service_access:
            self.psa_range: ComputeGlobalAddress | None = ComputeGlobalAddress(f"{name}-psa", {
                "name": f"{name}-psa", "project": args.project, "purpose": "VPC_PEERING",
                "addressType": "INTERNAL", "prefixLength": args.private_service_access_prefix,
                "network": args.network,
            }, child)
            self.psa_connection: ServiceNetworkingConnection | None = (
                ServiceNetworkingConnection(f"{name}-psa", {
                    "network": args.network, "service": SERVICE_NETWORKING,
                    "reservedPeeringRanges": [self.psa_range.gcp_name],
                }, child))
            reserved = self.psa_range.gcp_name
            depends = [self.psa_connection]
        else:
            self.psa_range, self.psa_connection = None, None
        self.instance = RedisInstance(name, {
            "name": name, "project": args.project, "region": args.region,
            "tier": args.tier, "memorySizeGb": args.memory_size_gb,
            "redisVersion": args.redis_version, "authorizedNetwork": args.network,
            "connectMode": "PRIVATE_SERVICE_ACCESS", "reservedIpRange": reserved,
            "authEnabled": True, "transitEncryptionMode": "SERVER_AUTHENTICATION",
            "labels": dict(args.labels) or None,
        }, pulumi.ResourceOptions(parent=self, depends_on=depends))
        i = self.instance
        # The port comes over Pulumi's wire as a number, a float in Python (6378.0): Ray
        # reads the address's port as an integer.
        self.address = pulumi.Output.concat(
            "rediss://", i.output("host"), ":", i.output("port").apply(lambda p: str(int(p))))
        self.auth_string = pulumi.Output.secret(i.output("authString"))
        self.ca_cert = i.output("serverCaCerts").apply(_first_cert)
        self.register_outputs({"address": self.address, "caCert": self.ca_cert})


def _first_cert(certs: Any) -> str:
    """The PEM of the instance's (first) server CA; empty before the instance exists."""
    for c in certs or []:
        if isinstance(c, Mapping) and c.get("cert"):
            return str(c["cert"])
    return ""
