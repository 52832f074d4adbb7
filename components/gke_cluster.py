"""A private, VPC-native GKE Standard cluster ready for TPU slice node pools.

``GkeCluster`` declares:

* a least-privilege node service account (no Editor) and its project roles,
* the cluster: private nodes, master authorized networks, Workload Identity, shielded
  nodes, a release channel, VPC-native secondary ranges, default pool removed, explicit
  deletion protection, optional GKE Ray Operator add-on; never the legacy ``tpu_config``
  (2VM TPU Node integration, end of life 2025-04-25),
* a CPU "system" node pool for kube-system, the operators and the Ray head (GKE needs at
  least one non-TPU pool),
* a GKE version check: the release channel's default (or the pinned minimum master
  version) must satisfy every minimum in ``min_versions`` (TPU generations, the add-on),
* a Kubernetes provider built from the cluster's outputs (exec auth through
  ``gke-gcloud-auth-plugin``) for the components that deploy into the cluster. With
  ``dns_endpoint`` it reaches the control plane through GKE's DNS-based endpoint
  (``<uid>.<region>.gke.goog``, authorized by IAM, reachable from anywhere Google APIs
  are), so CI runners without a stable egress IP can deploy; otherwise through the IP
  endpoint, which only ``master_authorized_networks`` (and the VPC) may reach.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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
from raytpu.names import ACCOUNT_ID, DNS_LABEL, LOCATION, cluster_name_problem
from raytpu.versions import version_tuple

RELEASE_CHANNELS = ("RAPID", "REGULAR", "STABLE")

# Least privilege for GKE nodes (GKE hardening guide): write logs and metrics, read
# metadata. No Editor. Artifact Registry read access is granted on the one repository by
# ImageRegistry, not project-wide.
NODE_SERVICE_ACCOUNT_ROLES: tuple[str, ...] = (
    "roles/logging.logWriter",
    "roles/monitoring.metricWriter",
    "roles/monitoring.viewer",
    "roles/stackdriver.resourceMetadata.writer",
    "roles/autoscaling.metricsWriter",
)
_FORBIDDEN_ROLES = ("roles/editor", "roles/owner")

# GKE metric packages sent to Cloud Monitoring (pulumi-gcp 10.2 ClusterMonitoringConfig
# enableComponents). SYSTEM_COMPONENTS carries the GKE system metrics, among them the TPU
# ones (kubernetes.io/{node,container}/accelerator/*, node_pool/multi_host/available); the
# kube-state packages need managed Prometheus. DCGM is NVIDIA-only; TPUs need no package of
# their own, only `containerPort: 8431` on the TPU container (GKE TPU observability docs).
# KUBELET/CADVISOR (>= 1.29.3) and JOBSET (>= 1.32.1) are left out: version-gated.
MONITORING_COMPONENTS: tuple[str, ...] = (
    "SYSTEM_COMPONENTS", "POD", "DEPLOYMENT", "DAEMONSET", "STATEFULSET", "STORAGE", "HPA",
)

SHIELDED_INSTANCE = {"enableSecureBoot": True, "enableIntegrityMonitoring": True}



class GkeVersionError(ValueError):
    """The cluster's GKE version is older than a TPU generation or add-on needs."""


@dataclass(frozen=True)
class AuthorizedNetwork:
    """One CIDR allowed to reach the cluster's control plane endpoint."""

    cidr_block: str
    """IPv4 range, e.g. an office or CI egress range. Never 0.0.0.0/0."""
    display_name: str = "allowed"
    """Label shown in the console."""


@dataclass(frozen=True)
class SystemPoolArgs:
    """The CPU node pool for kube-system, the operators and the Ray head."""

    machine_type: str = "n2-standard-8"
    """Machine type; the Ray head's CPU/memory requests must fit one node."""
    min_nodes: int = 1
    """Autoscaling minimum, per zone of the pool."""
    max_nodes: int = 3
    """Autoscaling maximum, per zone of the pool."""
    disk_size_gb: int = 100
    """Boot disk size (Ray images are large)."""

    def __post_init__(self) -> None:
        if not 0 <= self.min_nodes <= self.max_nodes or self.max_nodes < 1:
            raise ValueError(
                f"SystemPoolArgs: need 0 <= min_nodes ({self.min_nodes}) <= max_nodes "
                f"({self.max_nodes}) and max_nodes >= 1"
            )
        if self.disk_size_gb < 10:
            raise ValueError(f"SystemPoolArgs.disk_size_gb: {self.disk_size_gb} is below 10 GB")


@dataclass(frozen=True)
class GkeClusterArgs:
    """Inputs of :class:`GkeCluster`."""

    project: str
    """GCP project of the cluster; also names the Workload Identity pool."""
    location: str
    """A zone (zonal cluster) or a region (regional cluster)."""
    cluster_name: str
    """GKE cluster name (DNS label, at most ``names.CLUSTER_NAME_MAX_LEN`` characters)."""
    network: pulumi.Input[str]
    """VPC name or self link (``Network.network``)."""
    subnetwork: pulumi.Input[str]
    """Subnet name or self link (``Network.subnetwork``)."""
    pods_range_name: pulumi.Input[str]
    """Secondary range of the subnet for Pod IPs."""
    services_range_name: pulumi.Input[str]
    """Secondary range of the subnet for Service IPs."""
    node_tags: tuple[str, ...] = ()
    """Network tags of the system pool's nodes (firewall rules target them)."""
    release_channel: str = "REGULAR"
    """RAPID, REGULAR or STABLE. Node auto-upgrade is mandatory on a release channel."""
    min_master_version: str | None = None
    """Minimum control-plane version to create the cluster at; ``None``: channel default."""
    master_ipv4_cidr_block: str = "172.16.0.32/28"
    """The private control plane's /28; must not overlap the VPC's ranges."""
    private_endpoint: bool = False
    """Control plane reachable only from inside the VPC (no public endpoint)."""
    master_authorized_networks: tuple[AuthorizedNetwork, ...] = ()
    """CIDRs allowed to reach the control plane's IP endpoint. Always enforced: empty means
    no outside range at all (only the VPC and Google services)."""
    dns_endpoint: bool = False
    """Allow outside traffic on the DNS-based control-plane endpoint
    (``controlPlaneEndpointsConfig.dnsEndpointConfig.allowExternalTraffic``): every request
    is authorized by IAM (``container.clusters.connect``) before Kubernetes RBAC, from any
    network. The kubeconfig and the Kubernetes provider then use that endpoint."""
    deletion_protection: bool = True
    """Refuse ``pulumi destroy`` and replacements of the cluster (explicit: pulumi-gcp's
    default is on and only the value in state counts)."""
    system_pool: SystemPoolArgs = SystemPoolArgs()
    """The CPU node pool."""
    ray_operator_addon: bool = False
    """Enable the GKE Ray Operator add-on (managed KubeRay + TPU webhook)."""
    min_versions: Mapping[str, str] = field(default_factory=dict)
    """Minimum GKE versions the cluster must meet, by reason (``{"TPU v6e": "1.31.2-gke.
    1115000"}``). Checked against the release channel's default in ``location``."""
    node_service_account_id: str | None = None
    """Account id of the node service account; default ``<cluster_name>-nodes``, cut to 30."""
    node_service_account_roles: tuple[str, ...] = NODE_SERVICE_ACCOUNT_ROLES
    """Project roles of the node service account. Editor/Owner are refused."""
    resource_labels: Mapping[str, str] = field(default_factory=dict)
    """GCE labels on the cluster's resources (cost attribution)."""
    api_dependencies: Sequence[pulumi.Resource] = ()
    """What the GKE version lookup (an invoke, which resource transformations do not reach)
    waits for: the enabled Kubernetes Engine API (``ProjectServices.resources``)."""
    managed_prometheus: bool = True
    """Managed Service for Prometheus collection (installs the PodMonitoring CRDs)."""
    monitoring_components: tuple[str, ...] = MONITORING_COMPONENTS
    """GKE metric packages sent to Cloud Monitoring."""
    cost_allocation: bool = True
    """GKE cost allocation: the billing export split by namespace and label."""

    @property
    def account_id(self) -> str:
        return self.node_service_account_id or f"{self.cluster_name}-nodes"[:30].rstrip("-")

    @property
    def workload_pool(self) -> str:
        return f"{self.project}.svc.id.goog"

    def __post_init__(self) -> None:
        if not self.project:
            raise ValueError("GkeClusterArgs.project: required")
        if not LOCATION.match(self.location):
            raise ValueError(
                f"GkeClusterArgs.location: {self.location!r} is neither a zone (us-central2-b) "
                "nor a region (us-central2)"
            )
        problem = cluster_name_problem(self.cluster_name)
        if problem:
            raise ValueError(f"GkeClusterArgs.cluster_name: {problem}")
        if self.release_channel not in RELEASE_CHANNELS:
            raise ValueError(
                f"GkeClusterArgs.release_channel: {self.release_channel!r} is not valid; valid: "
                f"{', '.join(RELEASE_CHANNELS)}"
            )
        for what, v in [("min_master_version", self.min_master_version), *(
            (f"min_versions[{k!r}]", mv) for k, mv in self.min_versions.items()
        )]:
            if v is not None and not version_tuple(v):
                raise ValueError(f"GkeClusterArgs.{what}: {v!r} is not a GKE version")
        try:
            master = ipaddress.ip_network(self.master_ipv4_cidr_block)
        except ValueError:
            raise ValueError(
                f"GkeClusterArgs.master_ipv4_cidr_block: {self.master_ipv4_cidr_block!r} is not "
                "a CIDR block"
            ) from None
        if master.prefixlen != 28 or not master.is_private:
            raise ValueError(
                f"GkeClusterArgs.master_ipv4_cidr_block: {self.master_ipv4_cidr_block!r} must be "
                "a private /28"
            )
        for i, an in enumerate(self.master_authorized_networks):
            try:
                net = ipaddress.ip_network(an.cidr_block)
            except ValueError:
                raise ValueError(
                    f"GkeClusterArgs.master_authorized_networks[{i}]: {an.cidr_block!r} is not a "
                    "CIDR block"
                ) from None
            if net.prefixlen == 0:
                raise ValueError(
                    f"GkeClusterArgs.master_authorized_networks[{i}]: {an.cidr_block!r} opens the "
                    "control plane to the whole internet"
                )
        if not ACCOUNT_ID.match(self.account_id):
            raise ValueError(
                f"GkeClusterArgs.node_service_account_id: {self.account_id!r} must be 6-30 "
                "lowercase letters, digits or '-', starting with a letter"
            )
        bad = [r for r in self.node_service_account_roles if r in _FORBIDDEN_ROLES]
        if bad:
            raise ValueError(
                f"GkeClusterArgs.node_service_account_roles: {', '.join(bad)} is not least "
                "privilege; grant the specific roles the nodes need"
            )
        for tag in self.node_tags:
            if not DNS_LABEL.match(tag) or len(tag) > 63:
                raise ValueError(f"GkeClusterArgs.node_tags: {tag!r} is not a valid network tag")


def check_gke_version(
    *,
    channel_defaults: Mapping[str, str],
    channel: str,
    pinned: str | None,
    required: Mapping[str, str],
    location: str,
) -> str:
    """The version the cluster is created at; raises :class:`GkeVersionError` if too old."""
    if pinned:
        version, source = pinned, "minMasterVersion"
    else:
        found = channel_defaults.get(channel)
        if not found:
            raise GkeVersionError(
                f"GKE release channel {channel} has no default version in {location} "
                f"(channels offered: {', '.join(sorted(channel_defaults)) or 'none'})"
            )
        version, source = found, f"the {channel} channel's default in {location}"
    too_old = [
        f"{why} needs >= {need}"
        for why, need in sorted(required.items())
        if version_tuple(version) < version_tuple(need)
    ]
    if too_old:
        raise GkeVersionError(
            f"GKE {version} ({source}) is too old: {'; '.join(too_old)}. "
            "Choose a newer release channel or set raytpu:cluster.minMasterVersion."
        )
    return version


def render_kubeconfig(context: str, endpoint: str, ca_certificate: str | None) -> str:
    """A kubeconfig that authenticates through ``gke-gcloud-auth-plugin`` (no static token).

    ``ca_certificate`` ``None``: the DNS-based endpoint, whose certificate is publicly
    trusted (not signed by the cluster CA), as ``gcloud container clusters get-credentials
    --dns-endpoint`` writes it."""
    import yaml

    cluster: dict[str, Any] = {"server": f"https://{endpoint}"}
    if ca_certificate is not None:
        cluster = {"certificate-authority-data": ca_certificate, **cluster}
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": cluster}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "current-context": context,
        "preferences": {},
        "users": [{
            "name": context,
            "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": "gke-gcloud-auth-plugin",
                "installHint": "Install gke-gcloud-auth-plugin: gcloud components install "
                               "gke-gcloud-auth-plugin",
                "provideClusterInfo": True,
            }},
        }],
    }
    return yaml.safe_dump(doc, sort_keys=False)


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
                "name": "system",
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
                    "labels": {"raytpu.dev/pool": "system"},
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
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            # The KubeRay CRDs (RayJob: 1.39 MB) exceed the last-applied annotation limit of
            # client-side apply. Server-side is the v4 default; explicit so no env flips it.
            enable_server_side_apply=True,
            # Operators and the Ray head schedule on the system pool: wait for it.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.system_pool]),
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
