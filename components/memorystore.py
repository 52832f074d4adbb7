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
through a Kubernetes Secret (:class:`~raytpu.spec.ray_cluster.GcsFaultTolerance`
``password``), never the RayCluster object, the plan or a log.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
from raytpu.components.gcp_resources import (
    ComputeGlobalAddress,
    RedisInstance,
    ServiceNetworkingConnection,
)
from raytpu.facts.problems import args_error
from raytpu.spec.memorystore import INSTANCE_NAME, MemorystoreRedisArgs

SERVICE_NETWORKING = "servicenetworking.googleapis.com"
TLS_PORT = 6378  # in-transit encryption's port (6379 without it)




class MemorystoreRedis(pulumi.ComponentResource):
    """Private service access + a Memorystore for Redis instance with AUTH and TLS."""

    address: pulumi.Output[str]
    """``rediss://<host>:<port>``: what ``gcsFaultToleranceOptions.redisAddress`` takes."""
    auth_string: pulumi.Output[str]
    """The AUTH password (secret)."""
    ca_cert: pulumi.Output[str]
    """PEMs of every server CA the instance lists, one after another: Memorystore issues a
    new CA long before the old one expires and clients must trust both through the
    rotation (OpenSSL reads every certificate of a CA file)."""

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
        self.ca_cert = i.output("serverCaCerts").apply(ca_bundle)
        self.register_outputs({"address": self.address, "caCert": self.ca_cert})


def ca_bundle(certs: Any) -> str:
    """Every PEM of ``serverCaCerts``, in the instance's order, a line break between two;
    empty before the instance exists."""
    pems = [str(c["cert"]) for c in certs or [] if isinstance(c, Mapping) and c.get("cert")]
    return "".join(p if p.endswith("\n") or i == len(pems) - 1 else p + "\n"
                   for i, p in enumerate(pems))
