"""Inputs of :class:`~raytpu.components.tpu_ray_cluster.TpuRayCluster`: the cluster and one
:class:`TpuWorkerGroup` per slice group. Checked by
:func:`raytpu.components.ray_cluster_validation.args_problems`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from raytpu.facts import versions
from raytpu.facts.catalog import SliceShape
from raytpu.facts.slice_group import SliceGroup
from raytpu.spec.inputs import Input

# RayCluster spec.authOptions.mode (KubeRay >= 1.5): Ray token auth on every Ray port, or off.
AuthMode = Literal["disabled", "token"]


@dataclass(frozen=True)
class TpuWorkerGroup:
    """One KubeRay worker group, serving one slice group: up to ``max_slices`` slices of one
    shape (one node pool per slice), each slice ``shape.hosts`` pods."""

    name: str
    """Worker group name (KubeRay ``groupName``); names the TPU host pods."""
    shape: SliceShape
    """Shape of every slice in the group (``slice_shape("v5litepod-16")``)."""
    min_slices: int
    """Fewest slices (``minReplicas``)."""
    max_slices: int
    """Most slices (``maxReplicas``)."""
    initial_slices: int
    """Slices at creation (``replicas``), within ``[min_slices, max_slices]``."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment of this group's Ray containers (e.g. TPU runtime flags)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Ray node labels of this group's hosts (the group's ``labels``; KubeRay puts them on
    the pods too). Never ``ray.io/...`` (Ray's own) or ``app.kubernetes.io/name``."""
    ray_resources: Mapping[str, str] = field(default_factory=dict)
    """Extra Ray logical resources of each host (the group's ``resources``), as quantities;
    CPU, GPU, TPU and memory are the package's."""

    @property
    def elastic(self) -> bool:
        return self.min_slices != self.max_slices

    @classmethod
    def of(cls, group: SliceGroup, *, env: Mapping[str, str] | None = None,
           labels: Mapping[str, str] | None = None,
           ray_resources: Mapping[str, str] | None = None) -> TpuWorkerGroup:
        """The worker group serving a slice group (named after it, its slice range)."""
        return cls(name=group.name, shape=group.shape, min_slices=group.min_slices,
                   max_slices=group.max_slices, initial_slices=group.initial_slices,
                   env=dict(env or {}), labels=dict(labels or {}),
                   ray_resources=dict(ray_resources or {}))


@dataclass(frozen=True)
class GcsFaultTolerance:
    """The GCS kept in an external Redis (KubeRay ``spec.gcsFaultToleranceOptions``): the
    worker nodes outlive a head restart and rejoin the new head with their ids."""

    redis_address: Input[str]
    """``host:port``, ``redis://host:port``, or ``rediss://host:port`` for TLS (Ray 2.60)."""
    password_secret: str
    """Secret in the cluster's namespace holding the Redis password (never in the spec)."""
    password_key: str = "password"
    """The Secret's data key."""
    password: Input[str] | None = None
    """Declare ``password_secret`` with this value (a secret output, e.g. Memorystore's AUTH
    string); ``None``: the Secret exists already."""
    ca_config_map: str | None = None
    """ConfigMap in the namespace with the server's CA (``ca.crt``), mounted on the head for
    ``rediss://`` (``RAY_REDIS_CA_CERT``)."""
    ca_cert: Input[str] | None = None
    """Declare ``ca_config_map`` with this PEM; ``None``: it exists already."""
    worker_reconnect_timeout_s: int | None = None
    """How long a worker's raylet waits for a new GCS; ``None``: KubeRay's 600 s."""


@dataclass(frozen=True)
class TpuRayClusterArgs:
    """Inputs of :class:`TpuRayCluster`. Problems are reported by
    :func:`~raytpu.components.ray_cluster_validation.args_problems`."""

    cluster_name: str
    """RayCluster name (a DNS label; with each group name it must fit pod names)."""
    namespace: str
    """Namespace of the RayCluster (created here with ``create_namespace``)."""
    service_account: str
    """Kubernetes service account of the Ray pods, bound to ``gsa_email``."""
    gsa_email: Input[str]
    """Google service account the pods act as (Workload Identity)."""
    image: Input[str]
    """Ray image, pinned (a digest: every host of a slice runs the same bits); an upstream
    Ray image's version must equal ``ray_version``."""
    worker_groups: Sequence[TpuWorkerGroup]
    """One TPU worker group per slice group; at least one."""
    ray_version: str = versions.RAY_VERSION
    """``rayVersion`` of the RayCluster."""
    checkpoint_uri: str | None = None
    """``gs://<bucket>/runs``: exported to every Ray container as RAYTPU_CHECKPOINT_URI."""
    system_pool: str | None = None
    """CPU node pool for the head (nodeSelector ``cloud.google.com/gke-nodepool``)."""
    tpu_pools: Mapping[str, Mapping[str, str]] | None = None
    """Node labels of every TPU node pool (pool name -> labels). When given, each group's
    nodeSelector must match at least one pool, else nothing is declared."""
    head_cpu: str = "4"
    """CPU request and limit of the Ray head (it must fit a system pool node)."""
    head_memory: str = "16Gi"
    """Memory request and limit of the Ray head."""
    autoscaling: bool | None = None
    """In-tree autoscaler (v2). None: on when any worker group is elastic."""
    idle_timeout_seconds: int = 600
    """The autoscaler removes a slice idle this long (set only where the autoscaler runs:
    KubeRay rejects a group's ``idleTimeoutSeconds`` without autoscaler v2)."""
    dashboard_internal_lb: bool = False
    """Expose the dashboard and client through an internal load balancer (with
    ``access_cidrs``)."""
    access_cidrs: Sequence[str] = ()
    """``loadBalancerSourceRanges`` of the internal load balancer."""
    create_namespace: bool = True
    """Declare ``namespace``; false when it exists already."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Extra labels for every object and pod template (never ``app.kubernetes.io/name``)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment for every Ray container."""
    head_env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment of the head's Ray container."""
    head_labels: Mapping[str, str] = field(default_factory=dict)
    """Ray node labels of the head (``headGroupSpec.labels``)."""
    head_ray_resources: Mapping[str, str] = field(default_factory=dict)
    """Extra Ray logical resources of the head (``headGroupSpec.resources``)."""
    auth: AuthMode = "token"
    """Ray token authentication (``spec.authOptions``): the dashboard, Job Submission API and
    GCS accept only callers holding the token KubeRay keeps in the Secret named after the
    cluster. ``disabled``: anyone who reaches the head can run code on every slice."""
    read_only_root_filesystem: bool = True
    """Ray containers get a read-only root filesystem; Ray's writable paths
    (:data:`~raytpu.components.ray_pod_templates.WRITABLE_PATHS`, ``/dev/shm``) are emptyDir
    volumes. Turn it off for an image or runtime environment that writes elsewhere."""
    pod_monitoring: bool = False
    """Declare a GMP PodMonitoring scraping Ray's metrics port on the head and workers
    (needs managed Prometheus on the cluster, which installs its CRD)."""
    gcs_fault_tolerance: GcsFaultTolerance | None = None
    """Keep the GCS in Redis so that a head restart keeps the slices; ``None``: a lost head
    takes every worker with it."""

    @property
    def autoscaling_enabled(self) -> bool:
        if self.autoscaling is not None:
            return self.autoscaling
        return any(s.elastic for s in self.worker_groups)
