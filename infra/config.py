"""Stack configuration: parsed once, at the edge, into validated typed models.

The input is the flat ``config:`` map of a ``stacks/Pulumi.<stack>.yaml`` file
(``{"gcp:project": ..., "raytpu:zone": ..., "raytpu:slices": [...]}``). Every problem
becomes one line naming the key path, the bad value and the valid choices; nothing
downstream ever sees raw config.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from functools import cached_property
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import versions
from .catalog import GENERATIONS, CatalogError, SliceShape, slice_shape
from .config_base import ConfigModel as _Model
from .config_base import Quantity
from .fit import fit_problems, fit_warnings
from .jobs_config import JobConfig, job_problems
from .names import DNS_LABEL, K8S_NAME, PROJECT_ID, cidr_problem, cluster_name_problem
from .teams import TeamConfig, team_problems, team_warnings

NAMESPACE = "raytpu"


class ConfigError(Exception):
    """One or more problems in a stack's configuration, each a full sentence."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class Autoscaling(_Model):
    """Elastic slices: how many slices of this shape may exist at once."""

    min: int = Field(0, ge=0)
    max: int = Field(ge=1)


class SliceGroupConfig(_Model):
    """One entry of ``raytpu:slices``: ``count`` slices of one TPU shape."""

    name: str
    tpu: str
    topology: str | None = None
    count: int = Field(1, ge=1)
    autoscaling: Autoscaling | None = None
    spot: bool = False
    reservation: str | None = None
    machine_type: str | None = None
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


class AuthorizedNetwork(_Model):
    cidr_block: str
    display_name: str = "allowed"


class SystemPool(_Model):
    """The CPU node pool for kube-system, the operators and the Ray head."""

    # Ranges are checked once, by raytpu.components.SystemPoolArgs.
    machine_type: str = "n2-standard-8"
    min_nodes: int = 1
    max_nodes: int = 3
    disk_size_gb: int = 100


class ClusterConfig(_Model):
    name: str = "raytpu"
    release_channel: Literal["RAPID", "REGULAR", "STABLE"] = "REGULAR"
    min_master_version: str | None = None
    regional: bool = False
    deletion_protection: bool = True
    master_ipv4_cidr_block: str = "172.16.0.32/28"
    master_authorized_networks: list[AuthorizedNetwork] = []
    private_endpoint: bool = False
    dns_endpoint: bool = False
    """Allow outside traffic on GKE's DNS-based control-plane endpoint (IAM-authorized);
    the kubeconfig and the Kubernetes provider use it."""
    system_pool: SystemPool = SystemPool()
    dataplane_v2: bool = True
    """GKE Dataplane V2, which enforces the NetworkPolicies. Set at creation: changing it
    replaces the cluster."""
    security_group: str | None = None
    """``gke-security-groups@<domain>``: lets RBAC bindings name Google Groups."""


class ExistingNetwork(_Model):
    network: str
    subnetwork: str
    pods_range_name: str
    services_range_name: str


class NetworkConfig(_Model):
    create: bool = True
    subnet_cidr: str = "10.0.0.0/20"
    pods_cidr: str = "10.16.0.0/14"
    services_cidr: str = "10.20.0.0/20"
    existing: ExistingNetwork | None = None
    iap_ssh: bool = False
    ray_access_cidrs: list[str] = []


class KubeRayConfig(_Model):
    mode: Literal["helm", "gke-addon"] = "helm"
    version: str = versions.KUBERAY_VERSION
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

    context: str = "."
    """Build context (the repository root), relative to the Pulumi project directory."""
    dockerfile: str = "workloads/Dockerfile"
    """Relative to the Pulumi project directory."""


class RayConfig(_Model):
    version: str = versions.RAY_VERSION
    cluster_name: str = "raytpu"
    namespace: str = "ray"
    service_account: str = "ray-workload"
    image: str | None = None
    """An image built elsewhere (e.g. in CI), by tag or better digest. Unset: the stack
    builds workloads/Dockerfile and pushes it to its Artifact Registry repository, and the
    pods name it by digest."""
    image_build: ImageBuildConfig = ImageBuildConfig()
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


class StorageConfig(_Model):
    bucket: str | None = None
    """Checkpoint bucket name; default ``<project>-<stack>-raytpu``."""
    location: str | None = None
    retention_days: int = Field(30, ge=1)
    """Days a deleted/overwritten checkpoint object is kept (as a noncurrent version)."""
    noncurrent_versions: int = Field(1, ge=0)
    """Noncurrent versions kept per object at most; live objects are never expired."""
    force_destroy: bool = False


class RegistryConfig(_Model):
    create: bool = True
    repository: str = "raytpu"


class ProjectConfig(_Model):
    """``raytpu:project``: what the stack may change on the GCP project itself."""

    enable_apis: bool = True
    """Enable the Google APIs the stack needs (``raytpu.apis.STACK_APIS``); false for
    projects whose APIs are managed elsewhere."""


class PriceOverride(_Model):
    """Negotiated prices of one TPU generation, USD per chip-hour (``raytpu:cost.prices``)."""

    on_demand: float | None = Field(None, ge=0)
    spot: float | None = Field(None, ge=0)
    reservation: float | None = Field(None, ge=0)


class CostConfig(_Model):
    """``raytpu:cost``: prices that replace the list prices of :mod:`raytpu.prices`."""

    prices: dict[str, PriceOverride] = {}
    """Per TPU generation (v4, v5e, v5p, v6e)."""
    machines: dict[str, float] = {}
    """USD per VM-hour of CPU machine types (the system pool), e.g. ``n2-standard-8: 0.35``."""


class MonitoringConfig(_Model):
    """``raytpu:monitoring``: the Cloud Monitoring dashboard and the slice alert."""

    enabled: bool = True
    alert_after: str = "10m"
    """How long a slice group may have fewer available slices than it should before the
    alert fires: ``<n>s``, ``<n>m`` or ``<n>h``, a whole number of minutes."""
    notification_channels: list[str] = []
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
    project: str = Field(alias="gcp:project")
    zone: str = Field(alias="raytpu:zone")
    slices: list[SliceGroupConfig] = Field(alias="raytpu:slices", min_length=1)
    cluster: ClusterConfig = Field(ClusterConfig(), alias="raytpu:cluster")
    network: NetworkConfig = Field(NetworkConfig(), alias="raytpu:network")
    kuberay: KubeRayConfig = Field(KubeRayConfig(), alias="raytpu:kuberay")
    ray: RayConfig = Field(RayConfig(), alias="raytpu:ray")
    storage: StorageConfig = Field(StorageConfig(), alias="raytpu:storage")
    registry: RegistryConfig = Field(RegistryConfig(), alias="raytpu:registry")
    project_settings: ProjectConfig = Field(ProjectConfig(), alias="raytpu:project")
    teams: list[TeamConfig] = Field([], alias="raytpu:teams")
    jobs: list[JobConfig] = Field([], alias="raytpu:jobs")
    """Training jobs emitted as RayJobs (:mod:`raytpu.jobs_config`)."""
    """Teams sharing the fleet through Kueue; empty: one RayCluster, no queueing."""
    cost: CostConfig = Field(CostConfig(), alias="raytpu:cost")
    monitoring: MonitoringConfig = Field(MonitoringConfig(), alias="raytpu:monitoring")

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

    @property
    def warnings(self) -> list[str]:
        out = []
        for i, s in enumerate(self.slices):
            gen = s.shape.generation
            if self.zone not in gen.zones:
                out.append(
                    f"raytpu:zone: TPU {gen.name} (raytpu:slices[{i}].tpu {s.tpu!r}) is not "
                    f"documented in {self.zone!r}; documented zones: {', '.join(gen.zones)}"
                )
        if self.ray.auth == "token" and self.kuberay.mode == "gke-addon":
            r = self.ray
            out.append(
                "raytpu:ray.auth: 'token' is spec.authOptions, which KubeRay "
                f"{versions.MIN_KUBERAY_VERSION_FOR_AUTH_OPTIONS}+ honours; the GKE add-on's "
                "KubeRay version is GKE's, and an older one drops the field silently. After "
                f"`pulumi up`, `kubectl -n {r.namespace} get raycluster {r.cluster_name} "
                "-o jsonpath='{.spec.authOptions}'` must not be empty"
            )
        if "dataplane_v2" not in self.cluster.model_fields_set:
            out.append(
                "raytpu:cluster.dataplaneV2: unset, so true (GKE Dataplane V2, which enforces "
                "the NetworkPolicies). It is chosen when a cluster is created: a cluster this "
                "stack created without it is REPLACED by the next `pulumi up` (refused while "
                "deletionProtection is on). Set it to true to confirm, or false to keep such "
                "a cluster (its NetworkPolicies would not be enforced)"
            )
        elif not self.cluster.dataplane_v2:
            out.append(
                "raytpu:cluster.dataplaneV2: false: the cluster does not enforce NetworkPolicy, "
                "so Ray namespaces get none; switching it on replaces the cluster"
            )
        if self.cluster.security_group is None:
            out += [f"raytpu:teams[{t}].members[{m}]: {member!r} is a Google Group, and GKE "
                    "matches RBAC Group subjects only with Google Groups for RBAC: set "
                    "raytpu:cluster.securityGroup (gke-security-groups@<domain>, containing "
                    "the group), or the group's members cannot submit"
                    for t, team in enumerate(self.teams)
                    for m, member in enumerate(team.members) if member.startswith("group:")]
        out += fit_warnings(self)
        out += team_warnings(self)
        return out


# ---------------------------------------------------------------------------------------
# Parsing and error reporting


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _model_at(loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class a location points into, to list its valid keys."""
    model: Any = StackConfig
    for part in loc:
        if isinstance(part, int):
            continue
        fields = {(f.alias or n): f for n, f in model.model_fields.items()}
        field = fields.get(str(part))
        if field is None:
            return None
        ann = field.annotation
        while get_origin(ann) is not None:
            ann = next((a for a in get_args(ann) if a is not type(None)), None)
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return None
        model = ann
    return model if isinstance(model, type) else None


def _keys_of(model: type[BaseModel]) -> list[str]:
    return [f.alias or n for n, f in model.model_fields.items() if n != "stack"]


def _format(err: Mapping[str, Any]) -> str:
    loc = tuple(err["loc"])
    path = _path(loc)
    kind = err["type"]
    value = err.get("input")
    if kind == "extra_forbidden":
        parent = _model_at(loc[:-1])
        valid = f"; valid keys: {', '.join(_keys_of(parent))}" if parent else ""
        return f"{path}: unknown key{valid}"
    if kind == "missing":
        return f"{path}: required key is missing"
    if kind == "value_error":  # our own validators: the message names the value
        return f"{path}: {err.get('ctx', {}).get('error', err['msg'])}"
    if kind == "literal_error":
        choices = err.get("ctx", {}).get("expected", "")
        return f"{path}: {value!r} is not valid; valid: {choices.replace(' or ', ', ')}"
    return f"{path}: {value!r} is not valid: {err['msg']}{_type_hint(kind, value)}"


def _yaml_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "a mapping"


def _type_hint(kind: str, value: Any) -> str:
    """What to write instead, for a YAML scalar of the wrong type (the models are strict)."""
    if kind == "string_type" and isinstance(value, bool | int | float):
        return f"; YAML read it as {_yaml_kind(value)}: quote it for a string"
    if kind in ("int_type", "float_type") and isinstance(value, bool | str):
        return f"; YAML read it as {_yaml_kind(value)}: write a number, unquoted"
    if kind == "bool_type" and not isinstance(value, bool):
        return f"; YAML read it as {_yaml_kind(value)}: write true or false"
    return ""


def _slice_problems(i: int, s: SliceGroupConfig) -> list[str]:
    key = f"raytpu:slices[{i}]"
    problems: list[str] = []
    if not DNS_LABEL.match(s.name) or len(s.name) > 24:
        problems.append(
            f"{key}.name: {s.name!r} must be a DNS label (lowercase letters, digits, '-') "
            "of at most 24 characters"
        )
    try:
        s.shape  # noqa: B018 - resolving the shape is the check
    except CatalogError as e:
        problems.append(f"{key}.{e.field}: {e}")
    if s.autoscaling:
        if s.autoscaling.min > s.autoscaling.max:
            problems.append(
                f"{key}.autoscaling: min {s.autoscaling.min} is greater than max "
                f"{s.autoscaling.max}"
            )
        elif "count" in s.model_fields_set and not (
            s.autoscaling.min <= s.count <= s.autoscaling.max
        ):
            problems.append(
                f"{key}.count: {s.count} is outside autoscaling "
                f"[{s.autoscaling.min}, {s.autoscaling.max}]"
            )
    return problems


_VERSION = re.compile(r"^v?\d+(\.\d+)*(-[0-9A-Za-z.-]+)?$")


def _format_problems(cfg: StackConfig) -> list[str]:
    """Strings whose shape is fixed: versions and Kubernetes names."""
    problems: list[str] = []
    for key, value in (
        ("raytpu:cluster.minMasterVersion", cfg.cluster.min_master_version),
        ("raytpu:kuberay.version", cfg.kuberay.version),
        ("raytpu:kuberay.webhookVersion", cfg.kuberay.webhook_version),
        ("raytpu:kuberay.certManagerVersion", cfg.kuberay.cert_manager_version),
        ("raytpu:ray.version", cfg.ray.version),
    ):
        if value is not None and not _VERSION.match(value):
            problems.append(f"{key}: {value!r} is not a version (e.g. 1.7.0, 1.31.2-gke.1115000)")
    ns = cfg.kuberay.namespace
    if not K8S_NAME.match(ns) or len(ns) > 63:
        problems.append(
            f"raytpu:kuberay.namespace: {ns!r} is not a Kubernetes namespace name (lowercase "
            "letters, digits and '-', at most 63 characters)"
        )
    return problems


def _semantic_problems(cfg: StackConfig) -> list[str]:
    problems = _format_problems(cfg)
    if problems:  # version comparisons below would be meaningless
        return problems
    names: set[str] = set()
    for i, s in enumerate(cfg.slices):
        key = f"raytpu:slices[{i}]"
        problems += _slice_problems(i, s)
        if s.name in names:
            problems.append(
                f"{key}.name: {s.name!r} is used by another slice; names must be unique"
            )
        names.add(s.name)
        try:
            shape = s.shape
        except CatalogError:
            continue
        min_gke = shape.generation.min_gke_version
        if min_gke and cfg.cluster.min_master_version and versions.version_tuple(
            cfg.cluster.min_master_version
        ) < versions.version_tuple(min_gke):
            problems.append(
                f"raytpu:cluster.minMasterVersion: {cfg.cluster.min_master_version!r} is too "
                f"old for TPU {shape.generation.name} ({key}.tpu {s.tpu!r}); need >= {min_gke}"
            )

    if cfg.kuberay.mode == "gke-addon" and cfg.cluster.min_master_version and (
        versions.version_tuple(cfg.cluster.min_master_version)
        < versions.version_tuple(versions.MIN_GKE_FOR_RAY_ADDON)
    ):
        problems.append(
            f"raytpu:cluster.minMasterVersion: {cfg.cluster.min_master_version!r} is too old for "
            f"raytpu:kuberay.mode 'gke-addon'; need >= {versions.MIN_GKE_FOR_RAY_ADDON}"
        )
    if versions.version_tuple(cfg.ray.version) < versions.version_tuple(
        versions.MIN_RAY_VERSION_FOR_KUBERAY
    ):
        problems.append(
            f"raytpu:ray.version: {cfg.ray.version!r} is older than KubeRay "
            f"{cfg.kuberay.version} supports; need >= {versions.MIN_RAY_VERSION_FOR_KUBERAY}"
        )
    name_problem = cluster_name_problem(cfg.cluster.name)
    if name_problem:
        problems.append(f"raytpu:cluster.name: {name_problem}")
    if not PROJECT_ID.match(cfg.project):
        problems.append(
            f"gcp:project: {cfg.project!r} is not a GCP project ID (6-30 lowercase letters, "
            "digits and '-', starting with a letter, not ending with '-')"
        )
    if not re.fullmatch(r"[a-z]+-[a-z]+\d+-[a-z]", cfg.zone):
        problems.append(f"raytpu:zone: {cfg.zone!r} is not a GCP zone (e.g. us-central2-b)")
    if not cfg.network.create and cfg.network.existing is None:
        problems.append(
            "raytpu:network.existing: required when raytpu:network.create is false "
            "(network, subnetwork, podsRangeName, servicesRangeName)"
        )
    cidrs = [
        ("raytpu:network.subnetCidr", cfg.network.subnet_cidr),
        ("raytpu:network.podsCidr", cfg.network.pods_cidr),
        ("raytpu:network.servicesCidr", cfg.network.services_cidr),
        ("raytpu:cluster.masterIpv4CidrBlock", cfg.cluster.master_ipv4_cidr_block),
    ]
    cidrs += [(f"raytpu:network.rayAccessCidrs[{i}]", c)
              for i, c in enumerate(cfg.network.ray_access_cidrs)]
    cidrs += [(f"raytpu:cluster.masterAuthorizedNetworks[{i}].cidrBlock", n.cidr_block)
              for i, n in enumerate(cfg.cluster.master_authorized_networks)]
    problems += [f"{key}: {p}" for key, cidr in cidrs if (p := cidr_problem(cidr))]
    problems += fit_problems(cfg)  # head/workers fit their nodes; Ray accepts the topologies
    problems += team_problems(cfg)
    problems += job_problems(cfg)
    return problems


_CHANNEL = re.compile(r"^projects/[^/]+/notificationChannels/[^/]+$")


def _monitoring_cost_problems(cfg: StackConfig) -> list[str]:
    """``raytpu:monitoring`` and ``raytpu:cost`` values no field type can check."""
    problems: list[str] = []
    m = cfg.monitoring
    try:
        seconds = m.alert_after_seconds
    except ValueError:
        problems.append(f"raytpu:monitoring.alertAfter: {m.alert_after!r} is not a duration "
                        "like 10m, 600s or 1h")
    else:
        # Cloud Monitoring: "only values that are a multiple of a minute" (conditions).
        if seconds % 60 or seconds == 0:
            problems.append(f"raytpu:monitoring.alertAfter: {m.alert_after!r} must be a whole, "
                            "non-zero number of minutes (Cloud Monitoring's rule)")
    for i, channel in enumerate(m.notification_channels):
        if not _CHANNEL.match(channel):
            problems.append(f"raytpu:monitoring.notificationChannels[{i}]: {channel!r} is not "
                            "projects/<project>/notificationChannels/<id>")
    for gen in cfg.cost.prices:
        if gen not in GENERATIONS:
            problems.append(f"raytpu:cost.prices.{gen}: unknown TPU generation; valid: "
                            f"{', '.join(GENERATIONS)}")
    for machine, price in cfg.cost.machines.items():
        if price < 0:
            problems.append(f"raytpu:cost.machines.{machine}: {price!r} is negative")
    return problems


def parse_stack_config(stack: str, raw: Mapping[str, Any]) -> StackConfig:
    """Validate a stack's flat config map. Raises :class:`ConfigError` listing every problem.

    Keys outside the ``raytpu`` namespace other than ``gcp:project`` belong to providers
    (``gcp:region``, ``kubernetes:...``) and are left to them.
    """
    ours = {k: v for k, v in raw.items() if k.startswith(f"{NAMESPACE}:") or k == "gcp:project"}
    try:
        cfg = StackConfig.model_validate({"stack": stack, **ours})
    except ValidationError as e:
        problems = [_format(err) for err in e.errors()]
        # Structural errors elsewhere must not hide catalog errors in well-formed slices.
        slices = ours.get(f"{NAMESPACE}:slices")
        for i, item in enumerate(slices if isinstance(slices, list) else []):
            with contextlib.suppress(ValidationError):  # already reported above
                problems += _slice_problems(i, SliceGroupConfig.model_validate(item))
        raise ConfigError(problems) from None
    problems = _semantic_problems(cfg) + _monitoring_cost_problems(cfg)
    if problems:
        raise ConfigError(problems)
    return cfg


def supported_generations() -> list[str]:
    return list(GENERATIONS)
