"""The isolation layer of the stack program: NetworkPolicy for every namespace that runs
Ray pods (the stack's RayCluster namespace here; team namespaces with their teams).

The policies are declared after the namespace exists and before anything waits on them;
see :mod:`raytpu.components.network_policy` for what each rule allows and why.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
from raytpu.components.kuberay_operator import WEBHOOK_NAMESPACE
from raytpu.components.network_policy import (
    OperatorPeer,
    RayNetworkPolicies,
    RayNetworkPoliciesArgs,
)

from .config import StackConfig


def operator_peer(cfg: StackConfig) -> OperatorPeer:
    """Where the KubeRay operator calls Ray heads from: its Helm namespace, or (GKE add-on,
    hosted by GKE) the control plane's range."""
    if cfg.kuberay.mode == "gke-addon":
        return OperatorPeer(cidr=cfg.cluster.master_ipv4_cidr_block)
    return OperatorPeer(namespace=cfg.kuberay.namespace)


def ray_namespace_policy_args(
    cfg: StackConfig,
    namespace: str,
    *,
    ray_cluster: str | None,
    rayjob_submitters: bool,
) -> RayNetworkPoliciesArgs:
    """Policies of a Ray namespace: ``ray_cluster`` names the one RayCluster whose pods are
    peers (None: every Ray pod of the namespace, e.g. a team's RayJob clusters)."""
    shared = cfg.kuberay.mode == "helm" and namespace == WEBHOOK_NAMESPACE
    return RayNetworkPoliciesArgs(
        namespace=namespace,
        operator=operator_peer(cfg),
        ray_cluster=ray_cluster,
        access_cidrs=tuple(cfg.network.ray_access_cidrs),
        rayjob_submitters=rayjob_submitters,
        # The TPU webhook's namespace: the API server must keep reaching the webhook.
        deny_all_pods=not shared,
    )


def build_stack_namespace_policies(
    cfg: StackConfig,
    *,
    providers: Sequence[pulumi.ProviderResource] | None,
    depends_on: Sequence[pulumi.Resource],
) -> RayNetworkPolicies | None:
    """The policies of ``raytpu:ray.namespace`` (the stack's RayCluster); none on a cluster
    without Dataplane V2, which would ignore them. ``depends_on``: what creates the
    namespace."""
    if not cfg.cluster.dataplane_v2:
        return None
    return RayNetworkPolicies(
        "ray-netpol",
        ray_namespace_policy_args(cfg, cfg.ray.namespace, ray_cluster=cfg.ray.cluster_name,
                                  rayjob_submitters=False),
        pulumi.ResourceOptions(providers=list(providers) if providers else None,
                               depends_on=list(depends_on)),
    )
