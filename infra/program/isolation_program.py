"""The isolation layer of the stack program: NetworkPolicy for every namespace that runs
Ray pods, and per team a namespace, a Workload Identity account limited to the team's
checkpoints, and RBAC for its members.

See :mod:`raytpu.components.network_policy` for what each network rule allows and why,
:mod:`raytpu.components.team_access` for what a member may do.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
from raytpu.components.gcp_resources import ProjectIamMember
from raytpu.components.monitoring import PodMonitoring, ray_pod_monitoring_spec
from raytpu.components.network_policy import (
    OperatorPeer,
    RayNetworkPolicies,
    RayNetworkPoliciesArgs,
)
from raytpu.components.ray_pod_templates import WORKER_PORTS
from raytpu.components.storage import CheckpointStorage
from raytpu.components.team_access import TeamAccess
from raytpu.config.stack import StackConfig
from raytpu.config.team_rules import team_bucket_name, team_checkpoint_uri
from raytpu.config.teams import TEAM_SERVICE_ACCOUNT, team_namespace
from raytpu.facts import versions
from raytpu.spec.kuberay_operator import WEBHOOK_NAMESPACE
from raytpu.spec.storage import CheckpointStorageArgs
from raytpu.spec.team_access import TeamAccessArgs

# The port name the Ray containers give Ray's metrics port (the PodMonitoring scrapes it).
METRICS_PORT = next(n for n, p in WORKER_PORTS if p == versions.Ports.RAY_METRICS)

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


# -- teams --------------------------------------------------------------------------------

# Lets a member fetch the cluster's credentials (container.clusters.get) and nothing inside
# it: what a member may do in the cluster is the team Role's.
CLUSTER_VIEWER_ROLE = "roles/container.clusterViewer"


def team_gsa_account_id(cfg: StackConfig, team: str) -> str:
    """The team's Google service account id: the team's name and a hash of the cluster's, so
    two stacks of one project never share it (6-30 characters)."""
    digest = hashlib.sha256(f"{cfg.cluster.name}/{team}".encode()).hexdigest()[:8]
    return f"{team[:21]}-{digest}"


def team_object_prefix(team: str) -> str:
    """The team's prefix of the stack's bucket (``bucketAccess: prefix``)."""
    return f"teams/{team}/"


def isolation_problems(cfg: StackConfig) -> list[str]:
    """Team isolation the stack cannot deliver, each naming its key."""
    if not cfg.teams:
        return []
    problems: list[str] = []
    if not cfg.cluster.dataplane_v2:
        problems.append("raytpu:cluster.dataplaneV2: false, but raytpu:teams needs the "
                        "NetworkPolicies between team namespaces enforced; set it true")
    return problems


def build_teams(
    cfg: StackConfig,
    *,
    provider: pulumi.ProviderResource | None,
    cluster: pulumi.Resource,
    stack_bucket: pulumi.Resource | None,
    gcp_options: pulumi.ResourceOptions | None,
    labels: Mapping[str, str],
) -> tuple[list[pulumi.Resource], dict[str, Any]]:
    """Per team: a Workload Identity GSA limited to its prefix of the stack's bucket (or a
    bucket of its own), its namespace, KSA and RBAC, and the namespace's NetworkPolicies.
    Members may fetch the cluster's credentials. Returns the team namespaces (what the
    Kueue LocalQueues wait for) and the ``teams`` stack output."""
    if not cfg.teams:
        return [], {}
    providers = [provider] if provider is not None else None
    namespaces: list[pulumi.Resource] = []
    out: dict[str, Any] = {}
    viewers: dict[str, TeamAccess] = {}  # member -> the first team listing it
    for team in cfg.teams:
        own = team.bucket_access == "bucket"
        ns = team_namespace(team.name)
        identity = CheckpointStorage(f"team-{team.name}", CheckpointStorageArgs(
            project=cfg.project,
            bucket_name=team_bucket_name(cfg, team.name) if own else cfg.bucket_name,
            location=cfg.storage.location or cfg.region,
            namespace=ns,
            ksa_name=TEAM_SERVICE_ACCOUNT,
            gsa_account_id=team_gsa_account_id(cfg, team.name),
            retention_days=cfg.storage.retention_days,
            noncurrent_versions=cfg.storage.noncurrent_versions,
            force_destroy=cfg.storage.force_destroy,
            labels={**labels, "team": team.name},
            create_bucket=own,
            object_prefix=None if own else team_object_prefix(team.name),
            # The cluster creates the <project>.svc.id.goog pool the binding's member lives in.
            workload_identity_depends_on=(cluster,),
        ), pulumi.ResourceOptions.merge(gcp_options, pulumi.ResourceOptions(
            depends_on=[stack_bucket] if stack_bucket is not None and not own else None)))
        access = TeamAccess(f"team-{team.name}", TeamAccessArgs(
            team=team.name, namespace=ns, members=tuple(team.members),
            service_account=TEAM_SERVICE_ACCOUNT, gsa_email=identity.gsa_email,
        ), pulumi.ResourceOptions(providers=providers, depends_on=[cluster]))
        RayNetworkPolicies(
            f"team-{team.name}-netpol",
            ray_namespace_policy_args(cfg, ns, ray_cluster=None, rayjob_submitters=True),
            pulumi.ResourceOptions(providers=providers, depends_on=[access.namespace]))
        if cfg.monitoring.enabled:
            # Team RayJob clusters have generated names: scrape every Ray pod of the
            # namespace (its NetworkPolicy admits the GMP collectors on the metrics port).
            PodMonitoring(
                f"team-{team.name}-podmonitoring",
                metadata={"name": "raytpu-ray", "namespace": ns,
                          "labels": {"app.kubernetes.io/part-of": "raytpu"}},
                spec=ray_pod_monitoring_spec(None, port=METRICS_PORT),
                opts=pulumi.ResourceOptions(parent=access, depends_on=[access.namespace]))
        namespaces.append(access.namespace)
        viewers.update({m: access for m in team.members if m not in viewers})
        out[team.name] = {
            "namespace": ns,
            "serviceAccount": TEAM_SERVICE_ACCOUNT,
            "gsaEmail": identity.gsa_email,
            "checkpointUri": team_checkpoint_uri(cfg, team),
            "members": list(team.members),
        }
    # One grant per member however many teams list it (two resources would fight over it).
    for member, access in sorted(viewers.items()):
        ProjectIamMember(
            f"team-cluster-viewer-{re.sub(r'[^A-Za-z0-9.@_-]', '-', member)}",
            {"project": cfg.project, "role": CLUSTER_VIEWER_ROLE, "member": member},
            pulumi.ResourceOptions.merge(gcp_options, pulumi.ResourceOptions(parent=access)))
    return namespaces, {"teams": out}
