"""Inputs of :class:`~raytpu.components.Network` and their validation: the VPC's ranges,
tags and the ports its firewall rules open."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from raytpu.facts.names import DNS_LABEL, REGION, cidr_problem, control_plane_cidr_problem
from raytpu.facts.problems import Path, args_error, ref
from raytpu.facts.versions import Ports

# Ports the slices of a multislice job use between TPU hosts: the megascale coordinator
# (MEGASCALE_PORT 8081, set by the KubeRay TPU webhook) and the TPU runtime's slice
# builder (8471); both appear as container ports in KubeRay's multi-host TPU samples.
MULTISLICE_PORTS: tuple[int, ...] = (Ports.MEGASCALE, 8471)
RAY_ACCESS_PORTS: tuple[int, ...] = (Ports.RAY_DASHBOARD, Ports.RAY_CLIENT)



def check_name(args: object, what: str, value: str, max_len: int = 63) -> None:
    if not DNS_LABEL.match(value) or len(value) > max_len:
        raise args_error(
            args, what, f"{value!r} must be lowercase letters, digits and '-', start with a "
            f"letter, not end with '-', at most {max_len} characters"
        )


def check_cidr(args: object, what: str | Path,
                value: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    problem = cidr_problem(value)
    if problem:
        raise args_error(args, what, problem)
    return ipaddress.ip_network(value)


def check_ports(args: object, what: str, ports: Sequence[int]) -> None:
    if not ports:
        raise args_error(args, what, "at least one port is required")
    for p in ports:
        if not isinstance(p, int) or not 1 <= p <= 65535:
            raise args_error(args, what, f"{p!r} is not a TCP port (1-65535)")


# ---------------------------------------------------------------------------------------
# Args


@dataclass(frozen=True)
class ExistingNetwork:
    """A VPC, subnet and secondary ranges that already exist (``create=False``)."""

    network: str
    """Name or self link of the VPC network; firewall rules are created in it."""
    subnetwork: str
    """Name or self link of the subnet the cluster's nodes use."""
    pods_range_name: str
    """Name of the subnet's secondary range for Pod IPs."""
    services_range_name: str
    """Name of the subnet's secondary range for Service IPs."""

    def __post_init__(self) -> None:
        for what in ("network", "subnetwork", "pods_range_name", "services_range_name"):
            if not getattr(self, what):
                raise args_error(self, what, "required")


@dataclass(frozen=True)
class NetworkArgs:
    """Inputs of :class:`Network`."""

    project: str
    """GCP project the network lives in."""
    region: str
    """Region of the subnet, router and NAT (the cluster's region, e.g. ``us-central2``)."""
    node_tag: str
    """Network tag every cluster node carries; webhook, IAP and Ray rules target it."""
    tpu_node_tag: str
    """Network tag the TPU slice nodes carry; the multislice rule's source and target."""
    master_ipv4_cidr_block: str | None
    """The private control plane's /28. The webhook rule's source; ``None``: no such rule
    (public control plane)."""
    create: bool = True
    """Create the VPC, subnet, router and NAT; ``False``: adopt ``existing``."""
    existing: ExistingNetwork | None = None
    """The network to adopt when ``create`` is false (required then, refused otherwise)."""
    subnet_cidr: str = "10.0.0.0/20"
    """Primary range of the created subnet (node IPs)."""
    pods_cidr: str = "10.16.0.0/14"
    """Secondary range for Pod IPs."""
    services_cidr: str = "10.20.0.0/20"
    """Secondary range for Service IPs."""
    iap_ssh: bool = False
    """Allow SSH (TCP 22) to the nodes from Google's IAP TCP-forwarding range only."""
    ray_access_cidrs: tuple[str, ...] = ()
    """CIDRs allowed to reach the Ray dashboard (8265) and client (10001) on the nodes (an
    internal load balancer or NodePort lands on any node). Empty: no rule."""
    webhook_ports: tuple[int, ...] = Ports.EXTRA_WEBHOOK_PORTS
    """TCP ports the control plane must reach for admission webhooks, beyond the 443/10250
    GKE's own master rule opens (controller-runtime 9443, 8443, Istio 15017)."""
    multislice: bool = True
    """Some slice group can run a job over several slices (DCN traffic between slices):
    declare the multislice rule. ``False``: no group has more than one slice, no rule."""
    multislice_ports: tuple[int, ...] = MULTISLICE_PORTS
    """TCP ports opened between TPU nodes for multislice (DCN) traffic."""
    nat_log_errors: bool = True
    """Log Cloud NAT errors (port exhaustion shows up there first)."""

    def __post_init__(self) -> None:
        if not self.project:
            raise args_error(self, "project", "required")
        if not REGION.match(self.region):
            raise args_error(self, "region", f"{self.region!r} is not a GCP region "
                             "(e.g. us-central2)")
        check_name(self, "node_tag", self.node_tag)
        check_name(self, "tpu_node_tag", self.tpu_node_tag)
        if self.master_ipv4_cidr_block is not None:
            problem = control_plane_cidr_problem(self.master_ipv4_cidr_block)
            if problem:
                raise args_error(self, "master_ipv4_cidr_block", problem)
        if self.create:
            if self.existing is not None:
                raise args_error(self, "existing", "only used with create=False")
            ranges = {
                "subnet_cidr": check_cidr(self, "subnet_cidr", self.subnet_cidr),
                "pods_cidr": check_cidr(self, "pods_cidr", self.pods_cidr),
                "services_cidr": check_cidr(self, "services_cidr", self.services_cidr),
            }
            if self.master_ipv4_cidr_block:
                ranges["master_ipv4_cidr_block"] = ipaddress.ip_network(
                    self.master_ipv4_cidr_block
                )
            items = list(ranges.items())
            for i, (a, na) in enumerate(items):
                for b, nb in items[i + 1:]:
                    if na.version == nb.version and na.overlaps(nb):
                        raise args_error(self, a, f"{na} overlaps ", ref(b), f" {nb}")
        elif self.existing is None:
            raise args_error(
                self, "existing", "required when create=False (network, subnetwork, "
                "pods_range_name, services_range_name)"
            )
        for i, cidr in enumerate(self.ray_access_cidrs):
            check_cidr(self, ("ray_access_cidrs", i), cidr)
        check_ports(self, "webhook_ports", self.webhook_ports)
        check_ports(self, "multislice_ports", self.multislice_ports)
