"""Stack configuration: the typed models a stack file is parsed into (once, at the edge;
:func:`raytpu.config.validate.parse_stack_config` parses and checks).

Where a stack key is exactly a component's input, its type *is* the component's Args
(``raytpu:cluster.systemPool`` is :class:`~raytpu.spec.gke_cluster.SystemPoolArgs`,
``masterAuthorizedNetworks[]`` :class:`~raytpu.spec.gke_cluster.AuthorizedNetwork`,
``raytpu:network.existing`` :class:`~raytpu.spec.network.ExistingNetwork`): the stack is parsed
in JSON mode, so pydantic builds those dataclasses from the camelCase keys, strictly, and
their own checks run once, as the stack is parsed.

A section whose keys feed one component (``raytpu:cluster`` -> ``GkeClusterArgs``) names that
Args class (``args``): its keys are the Args fields of the same name and default, and the
Args are built from it by name (:mod:`raytpu.config.schema`); ``config_only`` lists the keys
that are the stack's own.

The input is the flat ``config:`` map of a ``stacks/Pulumi.<stack>.yaml`` file
(``{"gcp:project": ..., "raytpu:zone": ..., "raytpu:slices": [...]}``). Every problem
becomes one line naming the key path, the bad value and the valid choices; nothing
downstream ever sees raw config.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import ClassVar, Literal

from pydantic import ConfigDict, Field
from raytpu.config.base import ConfigModel as _Model
from raytpu.config.base import Quantity
from raytpu.config.gcs_ft import GcsFaultToleranceConfig
from raytpu.config.jobs import JobConfig
from raytpu.config.teams import TeamConfig
from raytpu.facts import versions
from raytpu.facts.capacity import FLEX_START_MAX_RUN_SECONDS, Capacity, duration_seconds
from raytpu.facts.catalog import SliceShape, slice_shape
from raytpu.facts.slice_group import SliceGroup
from raytpu.spec.gke_cluster import (
    AuthorizedNetwork,
    GkeClusterArgs,
    MaintenancePolicyArgs,
    SystemPoolArgs,
)
from raytpu.spec.kuberay_operator import KubeRayOperatorArgs
from raytpu.spec.monitoring import FleetMonitoringArgs
from raytpu.spec.network import ExistingNetwork, NetworkArgs
from raytpu.spec.ray_cluster import TpuRayClusterArgs
from raytpu.spec.registry import ImageRegistryArgs, TrainerImageArgs
from raytpu.spec.storage import CheckpointStorageArgs

NAMESPACE = "raytpu"


class ConfigError(Exception):
    """One or more problems in a stack's configuration, each a full sentence."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class Autoscaling(_Model):
    """Elastic slices: how many slices of this shape may exist at once."""

    min: int = Field(0, ge=0)
    """The fewest slices the group keeps (0: it may scale to none)."""
    max: int = Field(ge=1)
    """The most slices: the group's node pools (each pool scales atomically 0 <-> hosts)."""


class SliceGroupConfig(_Model):
    """One entry of ``raytpu:slices``: ``count`` slices of one TPU shape."""

    name: str
    """A DNS label, unique, at most 24 characters: the node pools and the Ray worker group
    are named from it."""
    tpu: str
    """Accelerator type: ``v4-16``, ``v5litepod-16`` (or ``v5e-16``), ``v5p-32``,
    ``v6e-64``, ... (``raytpu catalog`` lists them)."""
    topology: str | None = None
    """Chip topology (``4x4``, ``2x2x4``); unset: the type's default. It must have the type's
    chip count and be one Ray accepts."""
    count: int = Field(1, ge=0)
    """Slices at the first ``up`` (the initial slices when ``autoscaling`` is set); 0
    (elastic groups only): the pools start empty."""
    autoscaling: Autoscaling | None = None
    """Elastic slices ``{min, max}``; unset: exactly ``count`` slices."""
    capacity: Capacity | None = None
    """How the VMs are obtained (``on-demand``, ``spot``, ``reservation``, ``flex-start``;
    see docs/capacity.md); default on-demand, or what the older ``spot`` / ``reservation``
    keys imply."""
    spot: bool | None = None
    """Older spelling of ``capacity: spot`` (still read; a warning names the new key)."""
    reservation: str | None = None
    """The reservation a ``capacity: reservation`` group consumes."""
    max_run_duration: str | None = None
    """Flex-start: how long GKE lets a VM run (``<n>s|m|h|d``, at most 7d; default 7d)."""
    machine_type: str | None = None
    """Where a type has several VM shapes (v5e/v6e 8 chips: ``-8t`` one host or ``-4t`` two
    hosts); unset: the fewest hosts."""
    env: dict[str, str] = {}
    """Extra environment of this group's Ray containers (e.g. TPU runtime flags)."""
    labels: dict[str, str] = {}
    """Ray node labels of this group's hosts (also on their pods)."""
    ray_resources: dict[str, Quantity] = {}
    """Extra Ray logical resources of each host of this group."""

    @cached_property
    def shape(self) -> SliceShape:
        return slice_shape(self.tpu, self.topology, self.machine_type)

    @property
    def elastic(self) -> bool:
        return self.autoscaling is not None

    @property
    def min_slices(self) -> int:
        return self.autoscaling.min if self.autoscaling else self.count

    @property
    def max_slices(self) -> int:
        return self.autoscaling.max if self.autoscaling else self.count

    @property
    def initial_slices(self) -> int:
        """Slices Ray asks for at start: ``count``, clamped into the autoscaling range."""
        return min(max(self.count, self.min_slices), self.max_slices)

    @property
    def capacity_mode(self) -> Capacity:
        """``capacity``, or what the older keys say (``spot: true``, ``reservation:``)."""
        if self.capacity is not None:
            return self.capacity
        if self.spot:
            return "spot"
        return "reservation" if self.reservation else "on-demand"

    @property
    def max_run_seconds(self) -> int | None:
        """Flex-start's run limit in seconds (7 days unless ``maxRunDuration`` says less)."""
        if self.capacity_mode != "flex-start":
            return None
        if self.max_run_duration is None:
            return FLEX_START_MAX_RUN_SECONDS
        return duration_seconds(self.max_run_duration)

    @cached_property
    def group(self) -> SliceGroup:
        """The entry as the one slice-group model everything else derives from (raises
        :class:`~raytpu.facts.catalog.CatalogError` for a shape the catalog refuses)."""
        return SliceGroup(name=self.name, shape=self.shape, min_slices=self.min_slices,
                          max_slices=self.max_slices, initial_slices=self.initial_slices,
                          elastic=self.elastic, capacity=self.capacity_mode,
                          reservation=self.reservation, max_run_seconds=self.max_run_seconds)


class ClusterConfig(_Model):
    args: ClassVar[type] = GkeClusterArgs
    config_only: ClassVar[frozenset[str]] = frozenset({"name", "regional"})

    name: str = "raytpu"
    """GKE cluster name: a DNS label of at most 40 characters (GKE's limit)."""
    release_channel: Literal["RAPID", "REGULAR", "STABLE"] = "REGULAR"
    min_master_version: str | None = None
    regional: bool = False
    """A regional control plane (the zone's region) instead of a zonal one."""
    deletion_protection: bool = True
    master_ipv4_cidr_block: str = "172.16.0.32/28"
    master_authorized_networks: tuple[AuthorizedNetwork, ...] = ()
    private_endpoint: bool = False
    dns_endpoint: bool = False
    """Allow outside traffic on GKE's DNS-based control-plane endpoint (IAM-authorized);
    the kubeconfig and the Kubernetes provider use it."""
    system_pool: SystemPoolArgs = SystemPoolArgs()
    """The CPU node pool of kube-system, the operators and the Ray head."""
    dataplane_v2: bool = True
    """GKE Dataplane V2, which enforces the NetworkPolicies. Set at creation: changing it
    replaces the cluster."""
    security_group: str | None = None
    """``gke-security-groups@<domain>``: lets RBAC bindings name Google Groups."""
    maintenance: MaintenancePolicyArgs | None = None
    """When GKE may upgrade the cluster and its pools (a recurring window) and when not
    (exclusions): an upgrade of a multi-host pool recreates its slice."""


class NetworkConfig(_Model):
    args: ClassVar[type] = NetworkArgs
    config_only: ClassVar[frozenset[str]] = frozenset()

    create: bool = True
    subnet_cidr: str = "10.0.0.0/20"
    pods_cidr: str = "10.16.0.0/14"
    services_cidr: str = "10.20.0.0/20"
    existing: ExistingNetwork | None = None
    iap_ssh: bool = False
    ray_access_cidrs: tuple[str, ...] = ()


class KubeRayConfig(_Model):
    args: ClassVar[type] = KubeRayOperatorArgs
    config_only: ClassVar[frozenset[str]] = frozenset({"version"})

    mode: Literal["helm", "gke-addon"] = "helm"
    version: str = versions.KUBERAY_VERSION
    """KubeRay operator chart version (helm mode)."""
    namespace: str = "kuberay-system"
    webhook_version: str = versions.CHARTS["kuberay-tpu-webhook"].version
    cert_manager_version: str = versions.CHARTS["cert-manager"].version
    webhook_image: str | None = None
    """TPU webhook image (helm mode); default ``versions.TPU_WEBHOOK_IMAGE``."""
    multi_host_indexing: bool | None = None
    """KubeRay's RayMultiHostIndexing gate (helm mode); default: what the webhook image handles."""


class ImageBuildConfig(_Model):
    """``raytpu:ray.imageBuild``: how the stack builds the trainer image (when
    ``raytpu:ray.image`` is not given)."""

    args: ClassVar[type] = TrainerImageArgs
    config_only: ClassVar[frozenset[str]] = frozenset()

    context: str = "."
    """Build context (the repository root), relative to the Pulumi project directory."""
    dockerfile: str = "workloads/Dockerfile"
    """Relative to the Pulumi project directory."""


class RayConfig(_Model):
    args: ClassVar[type] = TpuRayClusterArgs
    config_only: ClassVar[frozenset[str]] = frozenset({"version", "image_build", "image_tag",
                                                       "gcs_fault_tolerance"})

    version: str = versions.RAY_VERSION
    """Ray version of the RayCluster (``rayVersion``); the image must run the same."""
    cluster_name: str = "raytpu"
    namespace: str = "ray"
    service_account: str = "ray-workload"
    image: str | None = None
    """An image built elsewhere (e.g. in CI), by tag or better digest. Unset: the stack
    builds workloads/Dockerfile and pushes it to its Artifact Registry repository, and the
    pods name it by digest."""
    image_build: ImageBuildConfig = ImageBuildConfig()
    """How the stack builds the trainer image when ``image`` is not given."""
    image_tag: str = "latest"
    """The tag the stack's build pushes (pods use the digest)."""
    idle_timeout_seconds: int = Field(600, ge=0)
    head_cpu: Quantity = "4"
    head_memory: Quantity = "16Gi"
    head_env: dict[str, str] = {}
    """Extra environment of the head's Ray container."""
    head_labels: dict[str, str] = {}
    """Ray node labels of the head."""
    head_ray_resources: dict[str, Quantity] = {}
    """Extra Ray logical resources of the head."""
    dashboard_internal_lb: bool = False
    auth: Literal["token", "disabled"] = "token"
    """Ray token authentication for the dashboard, Job Submission API and GCS."""
    gcs_fault_tolerance: GcsFaultToleranceConfig | None = None
    """Keep the Ray GCS in Redis, so that the workers and the run outlive a restart of the
    head (KubeRay's GCS fault tolerance); unset: off."""


class StorageConfig(_Model):
    args: ClassVar[type] = CheckpointStorageArgs
    config_only: ClassVar[frozenset[str]] = frozenset({"bucket"})

    bucket: str | None = None
    """Checkpoint bucket name; default ``<project>-<stack>-raytpu``."""
    location: str | None = None
    retention_days: int = Field(30, ge=1)
    """Days a deleted/overwritten checkpoint object is kept (as a noncurrent version)."""
    noncurrent_versions: int = Field(1, ge=0)
    """Noncurrent versions kept per object at most; live objects are never expired."""
    force_destroy: bool = False


class RegistryConfig(_Model):
    args: ClassVar[type] = ImageRegistryArgs
    config_only: ClassVar[frozenset[str]] = frozenset({"repository"})

    create: bool = True
    repository: str = "raytpu"
    """Artifact Registry repository of the trainer image."""


class ProjectConfig(_Model):
    """``raytpu:project``: what the stack may change on the GCP project itself."""

    enable_apis: bool = True
    """Enable the Google APIs the stack needs (``raytpu.program.apis.STACK_APIS``); false for
    projects whose APIs are managed elsewhere."""


class PriceOverride(_Model):
    """Negotiated prices of one TPU generation, USD per chip-hour (``raytpu:cost.prices``)."""

    on_demand: float | None = Field(None, ge=0)
    spot: float | None = Field(None, ge=0)
    reservation: float | None = Field(None, ge=0)
    flex_start: float | None = Field(None, ge=0)


class CostConfig(_Model):
    """``raytpu:cost``: prices that replace the list prices of :mod:`raytpu.facts.prices`."""

    prices: dict[str, PriceOverride] = {}
    """Per TPU generation (v4, v5e, v5p, v6e, tpu7x)."""
    machines: dict[str, float] = {}
    """USD per VM-hour of CPU machine types (the system pool), e.g. ``n2-standard-8: 0.35``."""
    memorystore: dict[str, float] = {}
    """USD per GB-hour of GCS fault tolerance's Memorystore instance, by tier (``BASIC``,
    ``STANDARD_HA``): no list price is sourced, so unset leaves it unpriced."""


class MonitoringConfig(_Model):
    """``raytpu:monitoring``: the Cloud Monitoring dashboard and the slice alert."""

    args: ClassVar[type] = FleetMonitoringArgs
    config_only: ClassVar[frozenset[str]] = frozenset({"enabled", "alert_after"})

    enabled: bool = True
    """PodMonitoring for the Ray pods, the dashboard and the slice alert."""
    alert_after: str = "10m"
    """How long a slice group may have fewer available slices than it should before the
    alert fires: ``<n>s``, ``<n>m`` or ``<n>h``, a whole number of minutes."""
    notification_channels: tuple[str, ...] = ()
    """``projects/<p>/notificationChannels/<id>`` of the channels the alert notifies."""

    @property
    def alert_after_seconds(self) -> int:
        m = re.fullmatch(r"(\d+)([smh])", self.alert_after)
        if not m:
            raise ValueError(self.alert_after)
        return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)]


class StackConfig(_Model):
    """The whole validated stack: what the program and the CLI work from."""

    stack: str = Field(alias="stack")
    """The stack's name (from the file name, not a key of it)."""
    project: str = Field(alias="gcp:project")
    """GCP project ID: 6-30 lowercase letters, digits and ``-``, starting with a letter."""
    zone: str = Field(alias="raytpu:zone")
    """Zone of the TPU slices (and of the cluster unless regional)."""
    slices: list[SliceGroupConfig] = Field(alias="raytpu:slices", min_length=1)
    """The TPU slice groups: each entry is one shape, its node pools and its Ray worker group."""
    cluster: ClusterConfig = Field(ClusterConfig(), alias="raytpu:cluster")
    """The GKE cluster: its control plane, system pool and maintenance."""
    network: NetworkConfig = Field(NetworkConfig(), alias="raytpu:network")
    """The VPC (created or adopted) and its firewall rules."""
    kuberay: KubeRayConfig = Field(KubeRayConfig(), alias="raytpu:kuberay")
    """The KubeRay operator: Helm charts with the TPU webhook, or GKE's Ray Operator add-on."""
    ray: RayConfig = Field(RayConfig(), alias="raytpu:ray")
    """The shared RayCluster: its head, image, autoscaling and fault tolerance."""
    storage: StorageConfig = Field(StorageConfig(), alias="raytpu:storage")
    """The checkpoint bucket and the Ray pods' Workload Identity access to it."""
    registry: RegistryConfig = Field(RegistryConfig(), alias="raytpu:registry")
    """The Artifact Registry repository of the trainer image."""
    project_settings: ProjectConfig = Field(ProjectConfig(), alias="raytpu:project")
    """What the stack may change on the GCP project itself."""
    teams: list[TeamConfig] = Field([], alias="raytpu:teams")
    """Teams sharing the fleet through Kueue; empty: one RayCluster, no queueing."""
    jobs: list[JobConfig] = Field([], alias="raytpu:jobs")
    """Training jobs emitted as RayJobs (the GitOps path; ``raytpu manifests`` writes them)."""
    cost: CostConfig = Field(CostConfig(), alias="raytpu:cost")
    """Negotiated prices replacing the list prices in `raytpu cost` and the plan."""
    monitoring: MonitoringConfig = Field(MonitoringConfig(), alias="raytpu:monitoring")
    """The Cloud Monitoring dashboard, the slice alert and the Ray pods' scraping."""

    # Keys of other namespaces that a stack file may carry and we ignore (providers').
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, strict=True)

    @property
    def region(self) -> str:
        return self.zone.rsplit("-", 1)[0]

    @property
    def cluster_location(self) -> str:
        return self.region if self.cluster.regional else self.zone

    @property
    def bucket_name(self) -> str:
        return self.storage.bucket or f"{self.project}-{self.stack}-raytpu"

    @property
    def checkpoint_uri(self) -> str:
        """Where Ray Train runs keep checkpoints (Ray pods get it as RAYTPU_CHECKPOINT_URI)."""
        return f"gs://{self.bucket_name}/runs"

    @property
    def builds_image(self) -> bool:
        """The stack builds and pushes the trainer image (no ``raytpu:ray.image`` given)."""
        return self.ray.image is None

    @property
    def image(self) -> str:
        """The image by reference: the user's, or the stack build's tag (pods get the
        build's digest, known once it is pushed)."""
        if self.ray.image:
            return self.ray.image
        return (
            f"{self.region}-docker.pkg.dev/{self.project}/{self.registry.repository}"
            f"/raytpu:{self.ray.image_tag}"
        )

    def built_image_placeholder(self, known: str = "known after up") -> str:
        """The image the stack builds, by digest, where the digest is not known yet
        (``known``: when it is): an explicit placeholder, never a made-up digest."""
        return (f"{self.image.rsplit(':', 1)[0]}@sha256:<digest of stack output 'image' of "
                f"stack {self.stack}, {known}>")
