"""VPC, subnet, Cloud NAT and the few firewall rules this system needs.

``Network`` creates (or adopts) the VPC a private GKE cluster runs in:

* a custom-mode VPC and one regional subnet with secondary ranges for Pods and Services
  (VPC-native cluster),
* a Cloud Router + Cloud NAT, because private nodes have no external IP and must still
  pull images (Docker Hub's ``rayproject/ray``) and reach PyPI,
* INGRESS firewall rules, each targeting the cluster's nodes by network tag, none open to
  ``0.0.0.0/0``: admission webhooks from the control plane, TPU multislice traffic
  between TPU nodes, optional IAP SSH, optional Ray dashboard/client from allow-listed
  CIDRs.

With ``create=False`` only the firewall rules are created, in the existing network.

The compute resources are declared through the thin bindings of
:mod:`raytpu.components.gcp_resources` (``pulumi_gcp.compute`` alone takes ~1.8 s to
import), so inputs below are written in the provider's camelCase wire format.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

import pulumi
from raytpu.components.gcp_resources import (
    ComputeFirewall,
    ComputeNetwork,
    ComputeRouter,
    ComputeRouterNat,
    ComputeSubnetwork,
)
from raytpu.facts.versions import IAP_SOURCE_RANGE, Ports
from raytpu.spec.network import RAY_ACCESS_PORTS, NetworkArgs, check_name

# ---------------------------------------------------------------------------------------
# Component


class Network(pulumi.ComponentResource):
    """The cluster's VPC (created or adopted) and its firewall rules."""

    network: pulumi.Output[str]
    """Self link of the VPC (or the adopted network's name/self link)."""
    subnetwork: pulumi.Output[str]
    """Self link of the subnet (or the adopted one's name/self link)."""
    pods_range_name: str
    services_range_name: str
    firewall_rules: dict[str, ComputeFirewall]
    """Firewall rules by purpose: webhooks, multislice, iap-ssh, ray-access."""
    vpc: ComputeNetwork | None
    subnet: ComputeSubnetwork | None
    router: ComputeRouter | None
    nat: ComputeRouterNat | None

    def __init__(
        self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        if not isinstance(args, NetworkArgs):
            raise TypeError(f"Network {name!r}: args must be NetworkArgs, not {type(args)!r}")
        # Child names extend `name` by up to 20 characters; GCE names stop at 63.
        check_name(f"Network {name!r}", "name", name, max_len=40)
        super().__init__("raytpu:network:Network", name, None, opts)
        self.args = args
        self._base_name = name
        child = pulumi.ResourceOptions(parent=self)

        self.vpc = self.subnet = None
        self.router = self.nat = None
        if args.create:
            self.vpc = ComputeNetwork(
                name,
                {
                    "name": name,
                    "project": args.project,
                    "autoCreateSubnetworks": False,
                    "routingMode": "REGIONAL",
                    "description": "raytpu: GKE + Cloud TPU slices",
                },
                child,
            )
            self.subnet = ComputeSubnetwork(
                f"{name}-nodes",
                {
                    "name": f"{name}-nodes",
                    "project": args.project,
                    "region": args.region,
                    "network": self.vpc.self_link,
                    "ipCidrRange": args.subnet_cidr,
                    # Private nodes reach Google APIs (GCS, Artifact Registry) without NAT.
                    "privateIpGoogleAccess": True,
                    "secondaryIpRanges": [
                        {"rangeName": f"{name}-pods", "ipCidrRange": args.pods_cidr},
                        {"rangeName": f"{name}-services", "ipCidrRange": args.services_cidr},
                    ],
                },
                child,
            )
            self.router = ComputeRouter(
                f"{name}-router",
                {
                    "name": f"{name}-router",
                    "project": args.project,
                    "region": args.region,
                    "network": self.vpc.self_link,
                },
                child,
            )
            self.nat = ComputeRouterNat(
                f"{name}-nat",
                {
                    "name": f"{name}-nat",
                    "project": args.project,
                    "region": args.region,
                    "router": self.router.gcp_name,
                    "natIpAllocateOption": "AUTO_ONLY",
                    # Only this subnet (nodes and Pods), not every subnet of the VPC.
                    "sourceSubnetworkIpRangesToNat": "LIST_OF_SUBNETWORKS",
                    "subnetworks": [
                        {"name": self.subnet.self_link, "sourceIpRangesToNats": ["ALL_IP_RANGES"]}
                    ],
                    "logConfig": {"enable": args.nat_log_errors, "filter": "ERRORS_ONLY"},
                },
                child,
            )
            self.network = self.vpc.self_link
            self.subnetwork = self.subnet.self_link
            self.pods_range_name = f"{name}-pods"
            self.services_range_name = f"{name}-services"
            network_ref: pulumi.Input[str] = self.vpc.self_link
        else:
            assert args.existing is not None  # checked by NetworkArgs
            self.network = pulumi.Output.from_input(args.existing.network)
            self.subnetwork = pulumi.Output.from_input(args.existing.subnetwork)
            self.pods_range_name = args.existing.pods_range_name
            self.services_range_name = args.existing.services_range_name
            network_ref = args.existing.network

        self.firewall_rules = {}
        if args.master_ipv4_cidr_block:
            # GKE's own `gke-<cluster>-<hash>-master` rule opens only 443 and 10250 from the
            # control plane; webhooks served on other ports time out on private clusters
            # (shared/ref/notes/gke-tpu.md §3.2).
            self._rule(
                "webhooks", network_ref, child,
                description="Admission webhooks: GKE control plane -> nodes",
                ports=args.webhook_ports,
                source_ranges=(args.master_ipv4_cidr_block,),
                target_tags=(args.node_tag,),
            )
        # Pod-to-Pod traffic is already allowed by GKE's `-all` rule; this one keeps
        # multislice working where an org policy adds lower-priority denies, and documents
        # the ports. Only where a job can span slices: an opening nothing uses is none.
        if args.multislice:
            self._rule(
                "multislice", network_ref, child,
                description="TPU multislice (DCN) traffic between TPU slice nodes",
                ports=args.multislice_ports,
                source_tags=(args.tpu_node_tag,),
                target_tags=(args.tpu_node_tag,),
            )
        if args.iap_ssh:
            self._rule(
                "iap-ssh", network_ref, child,
                description="SSH to nodes through IAP TCP forwarding only",
                ports=(Ports.IAP_SSH,),
                source_ranges=(IAP_SOURCE_RANGE,),
                target_tags=(args.node_tag,),
            )
        if args.ray_access_cidrs:
            self._rule(
                "ray-access", network_ref, child,
                description="Ray dashboard and client from allow-listed ranges",
                ports=RAY_ACCESS_PORTS,
                source_ranges=args.ray_access_cidrs,
                target_tags=(args.node_tag,),
            )

        self.register_outputs({
            "network": self.network,
            "subnetwork": self.subnetwork,
            "podsRangeName": self.pods_range_name,
            "servicesRangeName": self.services_range_name,
            "firewallRules": {k: v.gcp_name for k, v in self.firewall_rules.items()},
        })

    def _rule(
        self,
        purpose: str,
        network: pulumi.Input[str],
        opts: pulumi.ResourceOptions,
        *,
        description: str,
        ports: Sequence[int],
        target_tags: Sequence[str],
        source_ranges: Sequence[str] = (),
        source_tags: Sequence[str] = (),
    ) -> None:
        # Last line of defence, whatever the Args said: never world-open, always targeted.
        for cidr in source_ranges:
            if ipaddress.ip_network(cidr).prefixlen == 0:
                raise ValueError(f"firewall rule {purpose!r}: source {cidr} is the whole internet")
        if not target_tags:
            raise ValueError(f"firewall rule {purpose!r}: must target the cluster's nodes by tag")
        if not (source_ranges or source_tags):
            raise ValueError(f"firewall rule {purpose!r}: needs a source range or tag")
        name = f"{self._base_name}-allow-{purpose}"
        self.firewall_rules[purpose] = ComputeFirewall(
            name,
            {
                "name": name,
                "project": self.args.project,
                "network": network,
                "description": description,
                "direction": "INGRESS",
                "priority": 1000,
                "allows": [{"protocol": "tcp", "ports": [str(p) for p in ports]}],
                "sourceRanges": list(source_ranges) or None,
                "sourceTags": list(source_tags) or None,
                "targetTags": list(target_tags),
            },
            opts,
        )
