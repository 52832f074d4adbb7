"""The security rules (mandatory): no way in from the internet, hardened clusters and nodes,
Ray behind token auth, NetworkPolicies on a cluster that enforces them."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs, StackValidationArgs
from pulumi_policy.proxy import UnknownValueError
from raytpu.facts.versions import IAP_SOURCE_RANGE
from raytpu.policy.props import (
    CLUSTER,
    FIREWALL,
    NETWORK_POLICY,
    NODE_POOL,
    SERVICE,
    prop,
    ray_specs,
    seq,
)

# Annotations that make GKE provision an internal passthrough load balancer.
ILB_ANNOTATIONS = {
    "networking.gke.io/load-balancer-type": "Internal",
    "cloud.google.com/load-balancer-type": "Internal",  # the older spelling GKE still honours
}
RAY_SELECTOR_KEYS = ("ray.io/cluster", "ray.io/node-type", "ray.io/group")
# The Compute Engine default service account (Editor on the project unless an org policy
# stops the grant): <project number>-compute@developer.gserviceaccount.com.
DEFAULT_COMPUTE_SA = re.compile(r"^\d+-compute@developer\.gserviceaccount\.com$")
DATAPLANE_V2 = "ADVANCED_DATAPATH"


def _world_open(cidr: str) -> bool:
    try:
        return ipaddress.ip_network(cidr, strict=False).prefixlen == 0
    except ValueError:
        return False


def firewall(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != FIREWALL:
        return
    p = args.props
    if (prop(p, "direction") or "INGRESS") != "INGRESS" or prop(p, "disabled"):
        return
    if not seq(prop(p, "allows")):
        return  # a deny rule open to the world only narrows access
    ranges = [str(r) for r in seq(prop(p, "sourceRanges"))]
    open_ = [r for r in ranges if _world_open(r)]
    if open_:
        report(f"firewall rule {prop(p, 'name') or args.name!r} allows ingress from "
               f"{', '.join(open_)}; name the sources (IAP TCP forwarding is "
               f"{IAP_SOURCE_RANGE})", None)
    elif not (ranges or seq(prop(p, "sourceTags"))
              or seq(prop(p, "sourceServiceAccounts"))):
        # GCE defaults an ingress rule without any source to 0.0.0.0/0.
        report(f"firewall rule {prop(p, 'name') or args.name!r} has no source ranges, tags "
               "or service accounts, so GCE applies it to 0.0.0.0/0", None)


def _gke_node_pool(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """A pool can undo the cluster's settings for its own nodes."""
    p = args.props
    if prop(p, "networkConfig", "enablePrivateNodes") is False:
        report("networkConfig.enablePrivateNodes: false gives this pool's nodes public IPs",
               None)
    if prop(p, "nodeConfig", "workloadMetadataConfig", "mode") == "GCE_METADATA":
        report("nodeConfig.workloadMetadataConfig.mode GCE_METADATA turns Workload Identity "
               "off on this pool: its pods get the node's service account", None)


def gke_cluster(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == NODE_POOL:
        _gke_node_pool(args, report)
        return
    if args.resource_type != CLUSTER or prop(args.props, "enableAutopilot"):
        return  # Autopilot manages nodes, identity and shielding itself
    p = args.props
    if prop(p, "privateClusterConfig", "enablePrivateNodes") is not True:
        report("private nodes are off (privateClusterConfig.enablePrivateNodes): every node "
               "gets a public IP", None)
    if not prop(p, "workloadIdentityConfig", "workloadPool"):
        report("Workload Identity is off (workloadIdentityConfig.workloadPool): pods act as "
               "the node's service account", None)
    if prop(p, "enableShieldedNodes") is False:
        report("shielded nodes are off (enableShieldedNodes: false)", None)


def _ray_selector(selector: Any) -> bool:
    return isinstance(selector, Mapping) and any(k in selector for k in RAY_SELECTOR_KEYS)


def _internal(annotations: Any) -> bool:
    return isinstance(annotations, Mapping) and any(
        str(annotations.get(k, "")).lower() == v.lower() for k, v in ILB_ANNOTATIONS.items())


def public_lb(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == SERVICE:
        p = args.props
        if (prop(p, "spec", "type") == "LoadBalancer" and _ray_selector(prop(p, "spec", "selector"))
                and not _internal(prop(p, "metadata", "annotations"))):
            report(f"Service {prop(p, 'metadata', 'name') or args.name!r} is an external "
                   "LoadBalancer in front of Ray pods (anyone who reaches it can run code); "
                   "annotate it networking.gke.io/load-balancer-type: Internal", None)
        return
    for where, spec in ray_specs(args):
        head = prop(spec, "headGroupSpec")
        if (prop(head, "serviceType") == "LoadBalancer"
                and not _internal(prop(head, "headService", "metadata", "annotations"))):
            report(f"{where}.headGroupSpec.serviceType LoadBalancer makes KubeRay create an "
                   "external load balancer for the Ray head; use ClusterIP or an internal "
                   "headService", None)


def ray_auth(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for where, spec in ray_specs(args):
        mode = prop(spec, "authOptions", "mode")
        if mode != "token":
            report(f"{where}.authOptions.mode is {mode or 'unset'!r}: without Ray token "
                   "authentication anyone who reaches the head's dashboard, Job API or GCS "
                   "port runs code on every slice; set mode: token", None)


def node_service_account(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == NODE_POOL:
        configs = [("nodeConfig", prop(args.props, "nodeConfig"))]
    elif args.resource_type == CLUSTER:
        if prop(args.props, "enableAutopilot"):
            return
        configs = [("nodeConfig", prop(args.props, "nodeConfig"))]
        configs += [(f"nodePools[{i}].nodeConfig", prop(np, "nodeConfig"))
                    for i, np in enumerate(seq(prop(args.props, "nodePools")))]
        if prop(args.props, "removeDefaultNodePool") and configs[0][1] is None:
            configs = configs[1:]
    else:
        return
    for where, cfg in configs:
        try:
            sa = prop(cfg, "serviceAccount")
        except UnknownValueError:
            continue  # the email of an account created in this update: not the default one
        if not sa or sa == "default" or DEFAULT_COMPUTE_SA.match(str(sa)):
            report(f"{where}.serviceAccount is {sa or 'unset'!r}: the nodes would run as the "
                   "Compute Engine default service account (Editor); give them a "
                   "least-privilege account", None)


def dataplane_v2(args: StackValidationArgs, report: ReportViolation) -> None:
    policies = [r for r in args.resources if r.resource_type == NETWORK_POLICY]
    if not policies:
        return
    for r in args.resources:
        if r.resource_type == CLUSTER and prop(r.props, "datapathProvider") != DATAPLANE_V2:
            report(f"the stack declares {len(policies)} NetworkPolicy object(s) but cluster "
                   f"{prop(r.props, 'name') or r.name!r} does not enforce them: set "
                   f"datapathProvider {DATAPLANE_V2} (GKE Dataplane V2)", r.urn)
