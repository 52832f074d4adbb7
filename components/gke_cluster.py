"""A private, VPC-native GKE Standard cluster ready for TPU slice node pools.

``GkeCluster`` declares:

* a least-privilege node service account (no Editor) and its project roles,
* the cluster: private nodes, master authorized networks, Workload Identity, shielded
  nodes, a release channel, VPC-native secondary ranges, default pool removed, explicit
  deletion protection, optional GKE Ray Operator add-on; never the legacy ``tpu_config``
  (2VM TPU Node integration, end of life 2025-04-25),
* a CPU "system" node pool for kube-system, the operators and the Ray head (GKE needs at
  least one non-TPU pool),
* a GKE version check (``gke_version_policy``): the release channel's default (or the
  pinned minimum master version) must satisfy every minimum in ``min_versions``,
* a Kubernetes provider built from the cluster's outputs (``kubeconfig``: exec auth through
  ``gke-gcloud-auth-plugin``) for the components that deploy into the cluster. With
  ``dns_endpoint`` it reaches the control plane through GKE's DNS-based endpoint
  (``<uid>.<region>.gke.goog``, authorized by IAM, reachable from anywhere Google APIs
  are), so CI runners without a stable egress IP can deploy; otherwise through the IP
  endpoint, which only ``master_authorized_networks`` (and the VPC) may reach.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from raytpu.components.gcp_resources import (
    CLOUD_PLATFORM_SCOPE,
    ContainerCluster,
    ContainerNodePool,
    ProjectIamMember,
    ServiceAccount,
    gke_engine_versions,
)
from raytpu.components.gke_version_policy import check_gke_version
from raytpu.components.kubeconfig import kubernetes_provider, render_kubeconfig
from raytpu.facts.names import SYSTEM_POOL
from raytpu.spec.gke_cluster import (
    AuthorizedNetwork,
    GkeClusterArgs,
    MaintenancePolicyArgs,
    SystemPoolArgs,
)

__all__ = ["AuthorizedNetwork", "GkeCluster", "GkeClusterArgs", "SystemPoolArgs"]

SHIELDED_INSTANCE = {"enableSecureBoot": True, "enableIntegrityMonitoring": True}


class GkeCluster(pulumi.ComponentResource):
    """A private GKE Standard cluster, its node service account and CPU system pool."""

    cluster: ContainerCluster
    cluster_id: pulumi.Output[str]
    """``projects/<p>/locations/<l>/clusters/<name>``: what node pools reference."""
    cluster_name: pulumi.Output[str]
    location: str
    endpoint: pulumi.Output[str]
    """The IP endpoint of the control plane."""
    dns_endpoint: pulumi.Output[str]
    """The DNS-based endpoint (``<uid>.<region>.gke.goog``); outside traffic only with
    ``GkeClusterArgs.dns_endpoint``."""
    api_server: pulumi.Output[str]
    """Host the kubeconfig and the provider use: the DNS endpoint when enabled, else the IP."""
    ca_certificate: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    """Secret: kubeconfig with exec auth through gke-gcloud-auth-plugin."""
    provider: k8s.Provider
    """Kubernetes provider for everything deployed into the cluster."""
    node_service_account: ServiceAccount
    node_service_account_email: pulumi.Output[str]
    node_service_account_member: pulumi.Output[str]
    system_pool: ContainerNodePool
    workload_pool: str
    gke_version: pulumi.Output[str]
    """The version checked against ``min_versions`` (fails the program when too old)."""

    def __init__(
        self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        if not isinstance(args, GkeClusterArgs):
            raise TypeError(f"GkeCluster {name!r}: args must be GkeClusterArgs, not {type(args)!r}")
        super().__init__("raytpu:gke:GkeCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.location = args.location
        self.workload_pool = args.workload_pool

        self.node_service_account = ServiceAccount(
            f"{name}-nodes",
            {
                "accountId": args.account_id,
                "displayName": f"GKE nodes of {args.cluster_name} (least privilege)",
                "project": args.project,
            },
            child,
        )
        self.node_service_account_email = self.node_service_account.email
        self.node_service_account_member = self.node_service_account.member
        self.node_roles = [
            ProjectIamMember(
                f"{name}-nodes-{role.removeprefix('roles/').replace('.', '-').lower()}",
                {"project": args.project, "role": role,
                 "member": self.node_service_account.member},
                child,
            )
            for role in args.node_service_account_roles
        ]

        # The version check gates the cluster: an apply that raises fails the cluster's
        # registration, so nothing is created on a too-old channel.
        engine = gke_engine_versions(
            location=args.location, project=args.project, depends_on=args.api_dependencies
        )
        self.gke_version = engine.apply(
            lambda result: check_gke_version(
                channel_defaults=result.get("releaseChannelDefaultVersion") or {},
                channel=args.release_channel,
                pinned=args.min_master_version,
                required=args.min_versions,
                location=args.location,
            )
        )
        gated_min_master_version = self.gke_version.apply(lambda _: args.min_master_version)

        # The default pool lives a few minutes; still give it our account, not the Compute
        # default one (Editor, and disabled by org policy in many projects).
        default_pool_config = {
            "serviceAccount": self.node_service_account.email,
            "oauthScopes": [CLOUD_PLATFORM_SCOPE],
            "shieldedInstanceConfig": SHIELDED_INSTANCE,
            "workloadMetadataConfig": {"mode": "GKE_METADATA"},
        }
        self.cluster = ContainerCluster(
            name,
            {
                "name": args.cluster_name,
                "project": args.project,
                "location": args.location,
                "network": args.network,
                "subnetwork": args.subnetwork,
                "networkingMode": "VPC_NATIVE",
                "ipAllocationPolicy": {
                    "clusterSecondaryRangeName": args.pods_range_name,
                    "servicesSecondaryRangeName": args.services_range_name,
                },
                # Node pools are managed separately (one per TPU slice); a cluster needs
                # one node to be created, removed right after.
                "removeDefaultNodePool": True,
                "initialNodeCount": 1,
                "nodeConfig": default_pool_config,
                "privateClusterConfig": {
                    "enablePrivateNodes": True,
                    "enablePrivateEndpoint": args.private_endpoint,
                    "masterIpv4CidrBlock": args.master_ipv4_cidr_block,
                },
                # Explicit either way, so that turning it off is a change too.
                "controlPlaneEndpointsConfig": {
                    "dnsEndpointConfig": {"allowExternalTraffic": args.dns_endpoint},
                },
                "masterAuthorizedNetworksConfig": {
                    "cidrBlocks": [
                        {"cidrBlock": n.cidr_block, "displayName": n.display_name}
                        for n in args.master_authorized_networks
                    ],
                },
                "workloadIdentityConfig": {"workloadPool": args.workload_pool},
                "enableShieldedNodes": True,
                "releaseChannel": {"channel": args.release_channel},
                "minMasterVersion": gated_min_master_version,
                # Explicit either way: both values are meaningful and the add-on flag must
                # be able to turn it off again.
                "addonsConfig": {"rayOperatorConfigs": [{"enabled": args.ray_operator_addon}]},
                "deletionProtection": args.deletion_protection,
                "resourceLabels": dict(args.resource_labels) or None,
                "monitoringConfig": {
                    "enableComponents": list(args.monitoring_components),
                    "managedPrometheus": {"enabled": args.managed_prometheus},
                },
                "costManagementConfig": {"enabled": args.cost_allocation},
                # NetworkPolicy enforcement; unset (legacy) when off, so a cluster created
                # without it is not replaced.
                "datapathProvider": "ADVANCED_DATAPATH" if args.dataplane_v2 else None,
                "authenticatorGroupsConfig": ({"securityGroup": args.security_group}
                                              if args.security_group else None),
                "maintenancePolicy": (maintenance_policy(args.maintenance)
                                      if args.maintenance else None),
            },
            pulumi.ResourceOptions(
                parent=self,
                depends_on=self.node_roles,
                # The default pool's config is only read at creation; once the pool is
                # removed the provider reports a different one, which would force replacement.
                ignore_changes=["nodeConfig"],
            ),
        )
        self.cluster_id = self.cluster.id
        self.cluster_name = self.cluster.gcp_name
        self.endpoint = self.cluster.endpoint
        self.dns_endpoint = self.cluster.dns_endpoint
        self.api_server = self.dns_endpoint if args.dns_endpoint else self.endpoint
        self.ca_certificate = self.cluster.cluster_ca_certificate

        pool = args.system_pool
        self.system_pool = ContainerNodePool(
            f"{name}-system",
            {
                "name": SYSTEM_POOL,
                "project": args.project,
                "cluster": self.cluster.id,
                "location": args.location,
                "initialNodeCount": pool.min_nodes,
                "autoscaling": {"minNodeCount": pool.min_nodes, "maxNodeCount": pool.max_nodes},
                "management": {"autoRepair": True, "autoUpgrade": True},
                "nodeConfig": {
                    "machineType": pool.machine_type,
                    "diskSizeGb": pool.disk_size_gb,
                    "diskType": "pd-balanced",
                    "serviceAccount": self.node_service_account.email,
                    "oauthScopes": [CLOUD_PLATFORM_SCOPE],
                    "tags": list(args.node_tags),
                    "labels": {"raytpu.dev/pool": SYSTEM_POOL},
                    "shieldedInstanceConfig": SHIELDED_INSTANCE,
                    "workloadMetadataConfig": {"mode": "GKE_METADATA"},
                    "resourceLabels": dict(args.resource_labels) or None,
                },
            },
            # initial_node_count forces replacement when changed; the autoscaler owns the size.
            pulumi.ResourceOptions(parent=self, ignore_changes=["initialNodeCount"]),
        )

        context = f"gke_{args.project}_{args.location}_{args.cluster_name}"
        # Output.all on the lifted fields: Output.all(cluster.master_auth) would hand the
        # lambda a plain dict, not the output type (shared/ref/notes/pulumi.md gotcha 10).
        use_dns = args.dns_endpoint
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(self.api_server, self.ca_certificate).apply(
                lambda v: render_kubeconfig(context, str(v[0]), None if use_dns else str(v[1]))
            )
        )
        # Operators and the Ray head schedule on the system pool: wait for it.
        self.provider = kubernetes_provider(
            f"{name}-k8s", self.kubeconfig,
            pulumi.ResourceOptions(parent=self, depends_on=[self.system_pool]),
        )

        outputs: dict[str, Any] = {
            "name": self.cluster_name,
            "location": self.location,
            "endpoint": self.endpoint,
            "dnsEndpoint": self.dns_endpoint,
            "kubeconfig": self.kubeconfig,
            "nodeServiceAccountEmail": self.node_service_account_email,
            "workloadPool": self.workload_pool,
            "gkeVersion": self.gke_version,
        }
        self.register_outputs(outputs)


def maintenance_policy(policy: MaintenancePolicyArgs) -> dict[str, Any]:
    """The Cluster's ``maintenancePolicy``: an exclusion without an end lasts until the
    minor version's end of support, which GKE takes instead of an end time."""
    out: dict[str, Any] = {}
    if policy.window is not None:
        out["recurringWindow"] = {"startTime": policy.window.start_time,
                                  "endTime": policy.window.end_time,
                                  "recurrence": policy.window.recurrence}
    if policy.exclusions:
        out["maintenanceExclusions"] = [
            {"exclusionName": e.name, "startTime": e.start_time, "endTime": e.end_time,
             "exclusionOptions": {"scope": e.scope, "endTimeBehavior": (
                 "UNTIL_END_OF_SUPPORT" if e.end_time is None else None)}}
            for e in policy.exclusions
        ]
    return out
