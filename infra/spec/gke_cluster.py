"""Inputs of :class:`~raytpu.components.GkeCluster` and their validation.

Every check raises :class:`~raytpu.facts.problems.ArgsError` (a ``ValueError``) naming the
Args field (``GkeClusterArgs.location: ...``); the stack program renders the same problem in
stack key paths (``raytpu.config.key_paths.Keys``).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from raytpu.facts.names import (
    ACCOUNT_ID,
    DNS_LABEL,
    LOCATION,
    cidr_problem,
    cluster_name_problem,
    control_plane_cidr_problem,
)
from raytpu.facts.problems import args_error, ref
from raytpu.facts.versions import version_tuple
from raytpu.spec.inputs import Input, Resource

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
# GKE Google Groups for RBAC: the security group must be named exactly so (pulumi-gcp
# ClusterAuthenticatorGroupsConfig; GKE "Configure Google Groups for RBAC").
SECURITY_GROUP = re.compile(r"^gke-security-groups@[a-z0-9.-]+\.[a-z]{2,}$")

# GKE metric packages sent to Cloud Monitoring (pulumi-gcp 10.2 ClusterMonitoringConfig
# enableComponents). SYSTEM_COMPONENTS carries the GKE system metrics, among them the TPU
# ones (kubernetes.io/{node,container}/accelerator/*, node_pool/multi_host/available); the
# kube-state packages need managed Prometheus. DCGM is NVIDIA-only; TPUs need no package of
# their own, only `containerPort: 8431` on the TPU container (GKE TPU observability docs).
# KUBELET/CADVISOR (>= 1.29.3) and JOBSET (>= 1.32.1) are left out: version-gated.
MONITORING_COMPONENTS: tuple[str, ...] = (
    "SYSTEM_COMPONENTS", "POD", "DEPLOYMENT", "DAEMONSET", "STATEFULSET", "STORAGE", "HPA",
)


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
    """Autoscaling minimum, per zone of the pool; at least 1: kube-system and the operators
    run here."""
    max_nodes: int = 3
    """Autoscaling maximum, per zone of the pool."""
    disk_size_gb: int = 100
    """Boot disk size (Ray images are large); GKE's minimum is 10 GB."""

    def __post_init__(self) -> None:
        if self.min_nodes < 1:
            raise args_error(self, "min_nodes", f"{self.min_nodes} is below 1 (kube-system "
                             "and the operators need a node)")
        if self.max_nodes < self.min_nodes:
            raise args_error(self, "max_nodes", f"{self.max_nodes} is below ", ref("min_nodes"),
                             f" ({self.min_nodes})")
        if self.disk_size_gb < 10:
            raise args_error(self, "disk_size_gb", f"{self.disk_size_gb} is below GKE's "
                             "minimum of 10 GB")


# GKE maintenance policies ("Configure maintenance windows and exclusions"): the one
# recurring window must leave at least 48 hours of maintenance in any 32-day rolling window,
# counting only contiguous stretches of at least 4 hours; weekday recurrences are in UTC.
MIN_WINDOW_HOURS = 4
MIN_HOURS_PER_32_DAYS = 48
WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
# MaintenanceExclusionOptions.Scope (GKE API v1): NO_MINOR_OR_NODE_UPGRADES keeps node pools,
# so multi-host TPU slices, from being upgraded (recreated); only control-plane patches go on.
EXCLUSION_SCOPES = ("NO_UPGRADES", "NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES")
# pulumi-gcp ClusterMaintenancePolicy.maintenanceExclusions: "up to 20 ... at a time".
MAX_EXCLUSIONS = 20
# A NO_UPGRADES exclusion also holds security patches off, so GKE bounds it: "NO_UPGRADES
# exclusions are limited to 30 days" (GKE's Terraform sample terraform-docs-samples
# gke/standard/zonal/no-channel-to-release-channel/no_upgrade/main.tf; GKE "Maintenance
# windows and exclusions", scope of maintenance to exclude). UNTIL_END_OF_SUPPORT is
# documented for the NO_MINOR_* scopes only.
NO_UPGRADES_MAX_DAYS = 30
UNBOUNDED_SCOPES = ("NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES")
# RFC 3339 in UTC ("Zulu"): GKE returns other forms in UTC, a permanent diff (pulumi-gcp).
_UTC_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_DAY = "(" + "|".join(WEEKDAYS) + ")"
_RECURRENCE = re.compile(rf"^FREQ=(DAILY|WEEKLY;BYDAY={_DAY}(,{_DAY})*)$")


def _utc(owner: object, field_name: str, value: str) -> datetime.datetime:
    try:
        return datetime.datetime.strptime(value, _UTC_FORMAT).replace(tzinfo=datetime.UTC)
    except ValueError:
        raise args_error(owner, field_name, f"{value!r} is not an RFC 3339 time in UTC "
                         "(2026-01-03T02:00:00Z)") from None


@dataclass(frozen=True)
class MaintenanceWindow:
    """The cluster's one recurring maintenance window: when GKE may upgrade it, its node
    pools and so its TPU slices (an upgrade recreates a multi-host slice)."""

    start_time: str
    """First occurrence's start, RFC 3339 in UTC (``2026-01-03T02:00:00Z``)."""
    end_time: str
    """First occurrence's end; the difference is every occurrence's length."""
    recurrence: str = "FREQ=WEEKLY;BYDAY=SA,SU"
    """RFC 5545 RRULE: ``FREQ=DAILY`` or ``FREQ=WEEKLY;BYDAY=<days>`` (UTC weekdays), the
    forms whose availability is checked here."""

    @property
    def days(self) -> tuple[str, ...]:
        """The weekdays of a weekly window; empty for a daily one."""
        listed = self.recurrence.partition("BYDAY=")[2]
        return tuple(listed.split(",")) if listed else ()

    @property
    def hours(self) -> float:
        start = _utc(self, "start_time", self.start_time)
        return (_utc(self, "end_time", self.end_time) - start).total_seconds() / 3600

    @property
    def hours_per_32_days(self) -> float:
        """The fewest maintenance hours any 32-day stretch holds: whole occurrences only,
        at least 31 of a daily window and 4 of each weekday's."""
        return self.hours * (4 * len(self.days) if self.days else 31)

    def __post_init__(self) -> None:
        if not _RECURRENCE.match(self.recurrence):
            raise args_error(self, "recurrence", f"{self.recurrence!r} is not FREQ=DAILY or "
                             f"FREQ=WEEKLY;BYDAY=<{','.join(WEEKDAYS)}>")
        if len(set(self.days)) != len(self.days):
            raise args_error(self, "recurrence", f"{self.recurrence!r} names a day twice")
        hours = self.hours
        if not MIN_WINDOW_HOURS <= hours <= 24:
            raise args_error(self, "end_time", f"{self.end_time!r} makes a {hours:g} h window: "
                             f"GKE counts only windows of at least {MIN_WINDOW_HOURS} h, and "
                             "one occurrence lasts at most a day")
        if self.hours_per_32_days < MIN_HOURS_PER_32_DAYS:
            raise args_error(self, "recurrence", f"{self.recurrence!r} with {hours:g} h "
                             f"windows leaves {self.hours_per_32_days:g} h of maintenance in "
                             f"32 days; GKE requires at least {MIN_HOURS_PER_32_DAYS} h: "
                             "lengthen the window or add days")


@dataclass(frozen=True)
class MaintenanceExclusion:
    """A stretch of time in which GKE runs no automatic maintenance of ``scope``."""

    name: str
    """What it is for (``q1-training-run``)."""
    start_time: str
    """RFC 3339 in UTC."""
    end_time: str | None = None
    """RFC 3339 in UTC; ``None``: until the cluster's minor version reaches end of support
    (``endTimeBehavior: UNTIL_END_OF_SUPPORT``), for the ``NO_MINOR_*`` scopes only: a
    ``NO_UPGRADES`` exclusion needs an end at most ``NO_UPGRADES_MAX_DAYS`` after its start."""
    scope: str = "NO_MINOR_OR_NODE_UPGRADES"
    """``NO_UPGRADES``, ``NO_MINOR_UPGRADES`` or ``NO_MINOR_OR_NODE_UPGRADES`` (the default:
    node pools, so TPU slices, are left alone; control-plane patches still apply)."""

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise args_error(self, "name", "required")
        start = _utc(self, "start_time", self.start_time)
        if self.end_time is not None and _utc(self, "end_time", self.end_time) <= start:
            raise args_error(self, "end_time", f"{self.end_time!r} is not after ",
                             ref("start_time"), f" ({self.start_time})")
        if self.scope not in EXCLUSION_SCOPES:
            raise args_error(self, "scope", f"{self.scope!r} is not valid; valid: "
                             f"{', '.join(EXCLUSION_SCOPES)}")
        if self.scope not in UNBOUNDED_SCOPES:
            if self.end_time is None:
                raise args_error(self, "end_time", f"required for scope {self.scope}: GKE "
                                 f"limits it to {NO_UPGRADES_MAX_DAYS} days (only "
                                 f"{' and '.join(UNBOUNDED_SCOPES)} may last until end of "
                                 "support)")
            days = (_utc(self, "end_time", self.end_time) - start).total_seconds() / 86400
            if days > NO_UPGRADES_MAX_DAYS:
                raise args_error(self, "end_time", f"{self.end_time!r} makes a {days:g}-day "
                                 f"{self.scope} exclusion; GKE limits it to "
                                 f"{NO_UPGRADES_MAX_DAYS} days")


@dataclass(frozen=True)
class MaintenancePolicyArgs:
    """When GKE may, and may not, run automatic maintenance on the cluster. Auto-upgrade
    cannot be turned off on a release channel, and upgrading a multi-host TPU pool recreates
    the slice under a running job: a window puts upgrades where training can lose a slice,
    an exclusion holds node upgrades off through a run."""

    window: MaintenanceWindow | None = None
    """The recurring window; ``None``: GKE's (any time), and then no exclusions."""
    exclusions: tuple[MaintenanceExclusion, ...] = ()
    """At most ``MAX_EXCLUSIONS``, each named once; they need a ``window``."""

    def __post_init__(self) -> None:
        if len(self.exclusions) > MAX_EXCLUSIONS:
            raise args_error(self, "exclusions", f"{len(self.exclusions)} exclusions; GKE "
                             f"keeps at most {MAX_EXCLUSIONS}")
        names = [e.name for e in self.exclusions]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise args_error(self, ("exclusions", i, "name"), f"{name!r} is named twice")
        # The provider puts ExactlyOneOf on daily_maintenance_window / recurring_window /
        # recurring_maintenance_window (terraform-provider-google resource_container_cluster
        # .go), so a maintenancePolicy of exclusions alone fails at `pulumi preview`. Refused
        # rather than filled with an any-time window: that choice is the user's to make.
        if self.exclusions and self.window is None:
            raise args_error(self, "window", "required with exclusions (the provider needs "
                             "exactly one window in maintenancePolicy); set one, e.g. "
                             "FREQ=WEEKLY;BYDAY=SA,SU for 6 h")


@dataclass(frozen=True)
class GkeClusterArgs:
    """Inputs of :class:`GkeCluster`."""

    project: str
    """GCP project of the cluster; also names the Workload Identity pool."""
    location: str
    """A zone (zonal cluster) or a region (regional cluster)."""
    cluster_name: str
    """GKE cluster name (DNS label, at most ``names.CLUSTER_NAME_MAX_LEN`` characters)."""
    network: Input[str]
    """VPC name or self link (``Network.network``)."""
    subnetwork: Input[str]
    """Subnet name or self link (``Network.subnetwork``)."""
    pods_range_name: Input[str]
    """Secondary range of the subnet for Pod IPs."""
    services_range_name: Input[str]
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
    api_dependencies: Sequence[Resource] = ()
    """What the GKE version lookup (an invoke, which resource transformations do not reach)
    waits for: the enabled Kubernetes Engine API (``ProjectServices.resources``)."""
    managed_prometheus: bool = True
    """Managed Service for Prometheus collection (installs the PodMonitoring CRDs)."""
    monitoring_components: tuple[str, ...] = MONITORING_COMPONENTS
    """GKE metric packages sent to Cloud Monitoring."""
    cost_allocation: bool = True
    """GKE cost allocation: the billing export split by namespace and label."""
    dataplane_v2: bool = True
    """GKE Dataplane V2 (``datapathProvider: ADVANCED_DATAPATH``), which enforces
    NetworkPolicy. Chosen when the cluster is created: changing it replaces the cluster
    (ForceNew in the provider). False leaves the field unset (legacy datapath)."""
    security_group: str | None = None
    """Google Groups for RBAC: ``gke-security-groups@<domain>``, the group whose nested
    groups RBAC bindings may name (``authenticatorGroupsConfig.securityGroup``)."""
    maintenance: MaintenancePolicyArgs | None = None
    """Maintenance window and exclusions (``maintenancePolicy``); ``None``: GKE's defaults,
    so upgrades, and with them slice recreation, may come at any time."""

    @property
    def account_id(self) -> str:
        return self.node_service_account_id or f"{self.cluster_name}-nodes"[:30].rstrip("-")

    @property
    def workload_pool(self) -> str:
        return f"{self.project}.svc.id.goog"

    def __post_init__(self) -> None:
        if not self.project:
            raise args_error(self, "project", "required")
        if not LOCATION.match(self.location):
            raise args_error(
                self, "location", f"{self.location!r} is neither a zone (us-central2-b) "
                "nor a region (us-central2)"
            )
        problem = cluster_name_problem(self.cluster_name)
        if problem:
            raise args_error(self, "cluster_name", problem)
        if self.release_channel not in RELEASE_CHANNELS:
            raise args_error(
                self, "release_channel", f"{self.release_channel!r} is not valid; valid: "
                f"{', '.join(RELEASE_CHANNELS)}"
            )
        if self.min_master_version is not None and not version_tuple(self.min_master_version):
            raise args_error(self, "min_master_version",
                             f"{self.min_master_version!r} is not a GKE version")
        for k, mv in self.min_versions.items():
            if not version_tuple(mv):
                raise args_error(self, "min_versions", f"{k!r}: {mv!r} is not a GKE version")
        problem = control_plane_cidr_problem(self.master_ipv4_cidr_block)
        if problem:
            raise args_error(self, "master_ipv4_cidr_block", problem)
        for i, an in enumerate(self.master_authorized_networks):
            problem = cidr_problem(an.cidr_block)
            if problem:
                raise args_error(self, ("master_authorized_networks", i), problem)
        if not ACCOUNT_ID.match(self.account_id):
            raise args_error(
                self, "node_service_account_id", f"{self.account_id!r} must be 6-30 "
                "lowercase letters, digits or '-', starting with a letter"
            )
        bad = [r for r in self.node_service_account_roles if r in _FORBIDDEN_ROLES]
        if bad:
            raise args_error(
                self, "node_service_account_roles", f"{', '.join(bad)} is not least "
                "privilege; grant the specific roles the nodes need"
            )
        if self.security_group is not None and not SECURITY_GROUP.match(self.security_group):
            raise args_error(
                self, "security_group", f"{self.security_group!r} must be "
                "gke-security-groups@<your domain> (GKE Google Groups for RBAC)"
            )
        for tag in self.node_tags:
            if not DNS_LABEL.match(tag) or len(tag) > 63:
                raise args_error(self, "node_tags", f"{tag!r} is not a valid network tag")
