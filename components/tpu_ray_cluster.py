"""The stack's RayCluster on TPU slices: Namespace, Workload Identity ServiceAccount, RayCluster
(one worker group per slice shape) and an optional internal load balancer for the dashboard.

Every rule below comes from a trap recorded in shared/ref/notes:

* One worker-group *replica* is one TPU slice = one GKE node pool; ``numOfHosts`` = VMs of the
  slice, and ``replicas``/``minReplicas``/``maxReplicas`` count slices (kuberay-tpu.md §2.2).
* Every TPU pod requests *all* chips of its VM (``google.com/tpu`` requests = limits = chips per
  VM); a smaller request makes Ray hide chips with ``TPU_VISIBLE_CHIPS`` (ray-torchxla.md §3.2)
  and the TPU webhook derives a wrong host count (ai-on-gke #578).
* The worker nodeSelector is exactly the labels GKE puts on the slice's nodes
  (``SliceShape.node_selector``: accelerator + topology, which Ray's autoscaler needs to name
  the ``TPU-<type>-head`` resource, + machine type, so that one shape on two VM types -- v5e
  2x4 on one 8t or two 4t VMs -- does not share a selector).
* TPU nodes carry ``google.com/tpu=present:NoSchedule``: workers tolerate it, the head does not
  (so it can never land on a TPU VM).
* The TPU webhook only mutates pods labelled ``app.kubernetes.io/name: kuberay``, which KubeRay
  sets unless a template overrides it -- templates here never set that label (ai-on-gke #308).
* Names: the headless service ``<cluster>-headless``, pod host names
  ``<group>-<replica>-<worker>`` and KubeRay pod names ``<cluster>-<group>-worker-xxxxx`` must fit
  63 characters, or KubeRay truncates them and TPU_WORKER_HOSTNAMES breaks (kuberay #2923).

TPU environment: ``TPU_WORKER_ID``/``TPU_WORKER_HOSTNAMES``/``TPU_NAME`` come from the TPU
webhook; ``TPU_ACCELERATOR_TYPE``/``TPU_TOPOLOGY`` are set here from the catalog because Ray
otherwise asks the metadata server for them with no timeout. ``TPU_SKIP_MDS_QUERY`` is *not*
set: torch_xla then reads host bounds from env vars that only GKE's TPU device plugin provides,
and the webhook's rule of replacing ``TPU_WORKER_HOSTNAMES`` only when it is "unset or
localhost" indicates GKE already injects that env-based set. Unverified on a real slice
(kuberay-tpu.md §4.4): if torch_xla queries the metadata server there, add
``TPU_SKIP_MDS_QUERY=true`` through ``TpuRayClusterArgs.env``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

import pulumi
from raytpu import versions
from raytpu.catalog import TPU_RESOURCE, SliceShape
from raytpu.components._options import depends_on_of
from raytpu.components.k8s_objects import (
    EnvVar,
    Namespace,
    PodSecurityContext,
    PodSpec,
    PodTemplateSpec,
    ResourceRequirements,
    SecurityContext,
    Service,
    ServiceAccount,
    Toleration,
    Volume,
    VolumeMount,
    pod_security_labels,
)
from raytpu.components.monitoring import PodMonitoring, ray_pod_monitoring_spec
from raytpu.components.ray_resources import (
    AuthMode,
    AuthOptionsArgs,
    AutoscalerOptionsArgs,
    HeadGroupSpecArgs,
    RayCluster,
    RayClusterSpecArgs,
    WorkerGroupSpecArgs,
)
from raytpu.names import DNS_LABEL
from raytpu.versions import version_tuple

# Share of the VM a Ray worker requests: the rest is left to kubelet/system reservations and
# the node's DaemonSets (TPU device plugin, GKE metadata server, logging).
NODE_FRACTION = 0.8

WEBHOOK_LABEL = "app.kubernetes.io/name"  # the TPU webhook's objectSelector; never override
GSA_ANNOTATION = "iam.gke.io/gcp-service-account"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
ILB_ANNOTATION = "networking.gke.io/load-balancer-type"
CHECKPOINT_ENV = "RAYTPU_CHECKPOINT_URI"

# KubeRay / Ray port names and numbers (container port names are IANA_SVC_NAME, <= 15 chars).
HEAD_PORTS: tuple[tuple[str, int], ...] = (
    ("gcs-server", versions.Ports.RAY_GCS),
    ("dashboard", versions.Ports.RAY_DASHBOARD),
    ("client", versions.Ports.RAY_CLIENT),
    ("metrics", versions.Ports.RAY_METRICS),
)
WORKER_PORTS: tuple[tuple[str, int], ...] = (
    ("metrics", versions.Ports.RAY_METRICS),
    ("megascale", versions.Ports.MEGASCALE),  # multislice coordinator (TPU webhook default)
    ("tpu-metrics", versions.Ports.TPU_RUNTIME_METRICS),  # GKE reads TPU duty cycle/HBM here
)

MAX_NAME = 63  # DNS label: service names, host names, label values
# KubeRay pod names: "<cluster>-<group>-worker-" + 5 random characters.
_WORKER_POD_SUFFIX = len("-worker-") + 5
_HEADLESS_SUFFIX = len("-headless")


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

    @property
    def elastic(self) -> bool:
        return self.min_slices != self.max_slices


@dataclass(frozen=True)
class TpuRayClusterArgs:
    """Inputs of :class:`TpuRayCluster`. Problems are reported by :func:`args_problems`."""

    cluster_name: str
    """RayCluster name (a DNS label; with each group name it must fit pod names)."""
    namespace: str
    """Namespace of the RayCluster (created here with ``create_namespace``)."""
    service_account: str
    """Kubernetes service account of the Ray pods, bound to ``gsa_email``."""
    gsa_email: pulumi.Input[str]
    """Google service account the pods act as (Workload Identity)."""
    image: str
    """Ray image, pinned: its Ray version must equal ``ray_version``."""
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
    """The autoscaler removes a slice idle this long."""
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
    auth: AuthMode = "token"
    """Ray token authentication (``spec.authOptions``): the dashboard, Job Submission API and
    GCS accept only callers holding the token KubeRay keeps in the Secret named after the
    cluster. ``disabled``: anyone who reaches the head can run code on every slice."""
    read_only_root_filesystem: bool = True
    """Ray containers get a read-only root filesystem; Ray's writable paths
    (:data:`WRITABLE_PATHS`, ``/dev/shm``) are emptyDir volumes. Turn it off for an image or
    runtime environment that writes elsewhere."""
    pod_monitoring: bool = False
    """Declare a GMP PodMonitoring scraping Ray's metrics port on the head and workers
    (needs managed Prometheus on the cluster, which installs its CRD)."""

    @property
    def autoscaling_enabled(self) -> bool:
        if self.autoscaling is not None:
            return self.autoscaling
        return any(s.elastic for s in self.worker_groups)


@dataclass(frozen=True)
class ProblemKeys:
    """How problems name the offending input: Args fields by default, config keys from
    :func:`raytpu.ray_program.build_ray`."""

    cluster_name: str = "cluster_name"
    namespace: str = "namespace"
    service_account: str = "service_account"
    image: str = "image"
    auth: str = "auth"
    access_cidrs: str = "access_cidrs"
    labels: str = "labels"
    worker_group: Callable[[int], str] = field(default=lambda i: f"worker_groups[{i}]")


def _digits(n: int) -> int:
    return len(str(max(n, 0)))


def args_problems(args: TpuRayClusterArgs, keys: ProblemKeys | None = None) -> list[str]:
    """Every reason ``args`` cannot make a working RayCluster, one sentence each."""
    k = keys or ProblemKeys()
    problems: list[str] = []
    c = args.cluster_name
    if not DNS_LABEL.match(c):
        problems.append(f"{k.cluster_name}: {c!r} must be a DNS label "
                        "(lowercase letters, digits, '-', starting with a letter)")
    for key, value in ((k.namespace, args.namespace), (k.service_account, args.service_account)):
        if not DNS_LABEL.match(value) or len(value) > MAX_NAME:
            problems.append(f"{key}: {value!r} must be a DNS label of at most {MAX_NAME} "
                            "characters")
    if len(c) + _HEADLESS_SUFFIX > MAX_NAME:
        problems.append(f"{k.cluster_name}: {c!r} ({len(c)} characters) is too long for the "
                        f"headless service '{c}-headless'; at most "
                        f"{MAX_NAME - _HEADLESS_SUFFIX} characters")
    if not args.worker_groups:
        problems.append(f"{k.worker_group(0)}: at least one worker group is required")
    seen: set[str] = set()
    for i, s in enumerate(args.worker_groups):
        key = f"{k.worker_group(i)}.name"
        g = s.name
        if not DNS_LABEL.match(g):
            problems.append(f"{key}: {g!r} must be a DNS label")
        if g in seen or g == "head":
            problems.append(f"{key}: {g!r} is already used; group names must be unique "
                            "(and not 'head')")
        seen.add(g)
        pod_name = len(c) + 1 + len(g) + _WORKER_POD_SUFFIX
        if pod_name > MAX_NAME:
            problems.append(
                f"{key}: {g!r} with {k.cluster_name} {c!r} makes worker pod names of {pod_name} "
                f"characters ('{c}-{g}-worker-xxxxx'); keep len(cluster name) + len(group name) "
                f"<= {MAX_NAME - 1 - _WORKER_POD_SUFFIX}")
        host = len(g) + 2 + _digits(s.max_slices - 1) + _digits(s.shape.hosts - 1)
        if host > MAX_NAME:
            problems.append(f"{key}: {g!r} makes TPU host names of {host} characters "
                            f"('{g}-<replica>-<worker>'); at most {MAX_NAME}")
        if not 0 <= s.min_slices <= s.initial_slices <= s.max_slices or s.max_slices < 1:
            problems.append(f"{k.worker_group(i)}: slices min {s.min_slices} <= initial "
                            f"{s.initial_slices} <= max {s.max_slices} (max >= 1) does not hold")
        if args.tpu_pools is not None:
            selector = s.shape.node_selector
            if not any(all(labels.get(lk) == lv for lk, lv in selector.items())
                       for labels in args.tpu_pools.values()):
                pools = ", ".join(f"{n} {dict(lb)}" for n, lb in args.tpu_pools.items()) or "none"
                problems.append(f"{k.worker_group(i)}: no TPU node pool has the labels {selector} "
                                f"that group {g!r} selects; pools: {pools}")
    if WEBHOOK_LABEL in args.labels:
        problems.append(f"{k.labels}: must not set {WEBHOOK_LABEL!r}: the KubeRay TPU webhook "
                        "only mutates pods whose value KubeRay sets ('kuberay')")
    if args.dashboard_internal_lb and not args.access_cidrs:
        problems.append(f"{k.access_cidrs}: required with the dashboard internal load balancer "
                        "(otherwise every address in the VPC can reach the Ray dashboard and "
                        "client)")
    if args.auth not in get_args(AuthMode):
        problems.append(f"{k.auth}: {args.auth!r} is not an auth mode; "
                        f"valid: {', '.join(get_args(AuthMode))}")
    elif args.auth == "token" and (version_tuple(args.ray_version)
                                   < version_tuple(versions.MIN_RAY_VERSION_FOR_TOKEN_AUTH)):
        problems.append(f"{k.auth}: 'token' needs Ray >= {versions.MIN_RAY_VERSION_FOR_TOKEN_AUTH}"
                        f", rayVersion is {args.ray_version}; upgrade Ray or set 'disabled'")
    tag = image_ray_version(args.image)
    if tag is not None and tag != args.ray_version:
        problems.append(f"{k.image}: {args.image!r} carries Ray {tag} but rayVersion is "
                        f"{args.ray_version}; they must agree")
    return problems


# Upstream Ray images, whose tag starts with the Ray version (rayproject/ray:2.60.0-py311).
# Our own trainer image is tagged with the package version; its Dockerfile pins Ray.
_RAY_IMAGES = ("rayproject/ray", "rayproject/ray-ml")


def image_ray_version(image: str) -> str | None:
    """The Ray version of an upstream Ray image (``rayproject/ray:2.60.0-py311`` -> 2.60.0);
    None for other images or tags without a version."""
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag or "@" in image:
        return None
    if not any(name == r or name.endswith("/" + r) for r in _RAY_IMAGES):
        return None
    m = re.match(r"^(\d+\.\d+\.\d+)(?:[-_.].*)?$", tag)
    return m.group(1) if m else None


def image_is_pinned(image: str) -> bool:
    if "@sha256:" in image:
        return True
    name, _, tag = image.rpartition(":")
    return bool(name) and "/" not in tag and tag not in ("", "latest")


# -- pod security: the "restricted" Pod Security Standard ---------------------------------
# (kubernetes.io/docs/concepts/security/pod-security-standards). TPU chips need no
# privileged container on GKE >= 1.28 ("About TPUs in GKE"; shared/ref/notes/gke-tpu.md
# §1.3), which every stack needs anyway (the KubeRay TPU webhook: 1.28; the add-on: 1.30).

# Where Ray and the trainer write, each an emptyDir so the root filesystem can be
# read-only: Ray's session dirs and logs (the volume name and path are KubeRay's own,
# so KubeRay mounts this same volume into the autoscaler sidecar instead of adding one),
# the rest of /tmp (torch_xla's compile cache, libtpu logs, tempfiles), and the caches
# and ~/.ray token file under HOME (HOME itself holds the image's Python).
WRITABLE_PATHS: tuple[tuple[str, str], ...] = (
    ("ray-logs", "/tmp/ray"),
    ("tmp", "/tmp"),
    ("home-cache", f"{versions.RAY_HOME}/.cache"),
    ("home-ray", f"{versions.RAY_HOME}/.ray"),
)
# Ray's object store lives in /dev/shm: KubeRay's own volume name; memory medium.
SHM_VOLUME = ("shared-mem", "/dev/shm")


def container_security_context(read_only_root: bool = True) -> SecurityContext:
    """The Ray containers' (and the autoscaler sidecar's) ``securityContext``: the
    restricted profile's container fields, set on each container because KubeRay copies a
    Ray container's context into the init containers it injects."""
    return {
        "runAsNonRoot": True,
        "runAsUser": versions.RAY_UID,
        "runAsGroup": versions.RAY_GID,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": read_only_root,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def pod_security_context() -> PodSecurityContext:
    return {
        "runAsNonRoot": True,
        "runAsUser": versions.RAY_UID,
        "runAsGroup": versions.RAY_GID,
        "fsGroup": versions.RAY_GID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def writable_mounts() -> list[VolumeMount]:
    return [{"name": n, "mountPath": path} for n, path in WRITABLE_PATHS]


def pod_template(
    *,
    labels: Mapping[str, str],
    service_account: str,
    node_selector: Mapping[str, str] | None,
    container: str,
    image: str,
    env: Sequence[EnvVar],
    ports: Sequence[tuple[str, int]],
    resources: ResourceRequirements,
    tolerations: Sequence[Toleration] = (),
    automount_token: bool = False,
    read_only_root: bool = True,
) -> PodTemplateSpec:
    """The pod template of a Ray head or worker group: one Ray container, hardened to the
    restricted Pod Security Standard. ``automount_token``: only a pod that calls the
    Kubernetes API (the head with the autoscaler sidecar) gets a service-account token;
    Workload Identity does not need one (the GKE metadata server identifies the pod)."""
    memory = resources.get("limits", {}).get("memory") or resources.get("requests", {}).get(
        "memory")
    shm_name, shm_path = SHM_VOLUME
    # Sized as KubeRay sizes its own: the container's memory. tmpfs pages count against
    # that limit, so it bounds the object store (30% of it by default) without a smaller
    # /dev/shm ever pushing Ray's store onto disk.
    shm: Volume = {"name": shm_name, "emptyDir": {"medium": "Memory"}}
    if memory:
        shm["emptyDir"]["sizeLimit"] = memory
    volumes: list[Volume] = [{"name": n, "emptyDir": {}} for n, _ in WRITABLE_PATHS]
    volumes.append(shm)
    spec: PodSpec = {
        "serviceAccountName": service_account,
        "automountServiceAccountToken": automount_token,
        "securityContext": pod_security_context(),
        "containers": [{
            "name": container,
            "image": image,
            "env": list(env),
            "ports": [{"name": n, "containerPort": p} for n, p in ports],
            "resources": resources,
            "securityContext": container_security_context(read_only_root),
            "volumeMounts": [*writable_mounts(), {"name": shm_name, "mountPath": shm_path}],
        }],
        "volumes": volumes,
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = list(tolerations)
    return {"metadata": {"labels": dict(labels)}, "spec": spec}


def worker_resources(shape: SliceShape) -> ResourceRequirements:
    """Container resources of one TPU host pod: every chip, ~80% of the VM's CPU and memory."""
    vcpu, gb = shape.host_vcpus, shape.host_memory_gb
    cpu = str(math.floor(vcpu * NODE_FRACTION))
    memory = f"{math.floor(gb * NODE_FRACTION)}G"
    chips = str(shape.chips_per_vm)
    # Memory and chips as limits too (no overcommit, guaranteed chips); no CPU limit: one pod
    # per VM, and CFS throttling only hurts the input pipeline.
    return {
        "requests": {"cpu": cpu, "memory": memory, TPU_RESOURCE: chips},
        "limits": {"memory": memory, TPU_RESOURCE: chips},
    }


class TpuRayCluster(pulumi.ComponentResource):
    """Namespace + Workload Identity KSA + RayCluster (+ optional internal LB)."""

    namespace: Namespace | None
    service_account: ServiceAccount
    ray_cluster: RayCluster
    dashboard_lb: Service | None

    def __init__(
        self,
        name: str,
        args: TpuRayClusterArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        problems = args_problems(args)
        if problems:  # before registering anything, the component included
            raise ValueError("\n".join(problems))
        super().__init__("raytpu:ray:TpuRayCluster", name, None, opts)
        self.args = args
        if not image_is_pinned(args.image):
            pulumi.log.warn(f"Ray image {args.image!r} is not pinned to a version tag or "
                            "digest: nodes may run different images", resource=self)
        # Children do not inherit a component's dependsOn: the caller's (the operator charts,
        # so that CRDs and the TPU webhook exist first) are passed down explicitly.
        inherited = depends_on_of(opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=inherited)
        labels = {"app.kubernetes.io/part-of": "raytpu", **args.labels}

        self.namespace = None
        ns_name: pulumi.Input[str] = args.namespace
        if args.create_namespace:
            self.namespace = Namespace(
                f"{name}-ns",
                metadata={"name": args.namespace,
                          "labels": {**labels, **pod_security_labels()}},
                opts=child,
            )
            ns_name = self.namespace.metadata_name

        self.service_account = ServiceAccount(
            f"{name}-ksa",
            metadata={
                "name": args.service_account, "namespace": ns_name, "labels": labels,
                "annotations": {GSA_ANNOTATION: args.gsa_email},
            },
            opts=child,
        )

        spec = self._spec(labels)
        ray_opts = pulumi.ResourceOptions(parent=self,
                                          depends_on=[*inherited, self.service_account])
        if args.autoscaling_enabled:
            # The autoscaler owns replicas once running; re-applying the initial count on
            # every `pulumi up` would fight it.
            ray_opts = pulumi.ResourceOptions.merge(
                ray_opts,
                pulumi.ResourceOptions(ignore_changes=["spec.workerGroupSpecs[*].replicas"]),
            )
        self.ray_cluster = RayCluster(
            f"{name}-raycluster",
            metadata={"name": args.cluster_name, "namespace": ns_name, "labels": labels},
            spec=spec,
            opts=ray_opts,
        )

        self.pod_monitoring: PodMonitoring | None = None
        if args.pod_monitoring:
            self.pod_monitoring = PodMonitoring(
                f"{name}-podmonitoring",
                metadata={"name": f"{args.cluster_name}-ray", "namespace": ns_name,
                          "labels": labels},
                spec=ray_pod_monitoring_spec(
                    args.cluster_name, port=next(n for n, p in HEAD_PORTS
                                                 if p == versions.Ports.RAY_METRICS)),
                opts=pulumi.ResourceOptions(parent=self,
                                            depends_on=[*inherited, self.service_account]),
            )

        self.dashboard_lb = None
        if args.dashboard_internal_lb:
            self.dashboard_lb = Service(
                f"{name}-dashboard-ilb",
                metadata={
                    "name": f"{args.cluster_name}-dashboard-ilb", "namespace": ns_name,
                    "labels": labels, "annotations": {ILB_ANNOTATION: "Internal"},
                },
                spec={
                    "type": "LoadBalancer",
                    "loadBalancerSourceRanges": list(args.access_cidrs),
                    # Client IPs reach the head unchanged, so the NetworkPolicy's
                    # rayAccessCidrs rule can match them (Cluster would SNAT to a node IP).
                    "externalTrafficPolicy": "Local",
                    "selector": {"ray.io/cluster": args.cluster_name, "ray.io/node-type": "head"},
                    "ports": [
                        {"name": n, "port": p, "targetPort": p}
                        for n, p in HEAD_PORTS if n in ("dashboard", "client")
                    ],
                },
                opts=pulumi.ResourceOptions(parent=self,
                                            depends_on=[*inherited, self.ray_cluster]),
            )

        self.outputs: dict[str, Any] = {
            "clusterName": args.cluster_name,
            "namespace": args.namespace,
            "headService": f"{args.cluster_name}-head-svc",
            "dashboardPortForward": dashboard_command(args.cluster_name, args.namespace),
            "authMode": args.auth,
            "authTokenCommand": (auth_token_command(args.cluster_name, args.namespace)
                                 if args.auth == "token" else None),
            "workerGroups": [group_summary(s) for s in args.worker_groups],
        }
        self.register_outputs(self.outputs)

    # -- spec ----------------------------------------------------------------------------

    def _env(self) -> list[EnvVar]:
        env = dict(self.args.env)
        if self.args.checkpoint_uri:
            env.setdefault(CHECKPOINT_ENV, self.args.checkpoint_uri)
        return [{"name": k, "value": v} for k, v in sorted(env.items())]

    def _spec(self, labels: Mapping[str, str]) -> RayClusterSpecArgs:
        a = self.args
        head_selector = {NODEPOOL_LABEL: a.system_pool} if a.system_pool else None
        head = HeadGroupSpecArgs(
            service_type="ClusterIP",  # dashboard/client via kubectl port-forward
            # No Ray tasks on the head: it is small, on the CPU pool, and runs the autoscaler.
            ray_start_params={"num-cpus": "0"},
            template=pod_template(
                labels=dict(labels),
                service_account=a.service_account,
                node_selector=head_selector,
                container="ray-head",
                image=a.image,
                env=self._env(),
                ports=HEAD_PORTS,
                resources={
                    "requests": {"cpu": a.head_cpu, "memory": a.head_memory},
                    "limits": {"cpu": a.head_cpu, "memory": a.head_memory},
                },
                # The autoscaler sidecar reads and patches the RayCluster and its pods.
                automount_token=a.autoscaling_enabled,
                read_only_root=a.read_only_root_filesystem,
            ),
        )
        workers = [self._worker(s, labels) for s in a.worker_groups]
        autoscale = a.autoscaling_enabled
        return RayClusterSpecArgs(
            ray_version=a.ray_version,
            head_group_spec=head,
            worker_group_specs=workers,
            enable_in_tree_autoscaling=True if autoscale else None,
            autoscaler_options=AutoscalerOptionsArgs(
                version="v2", idle_timeout_seconds=a.idle_timeout_seconds,
                upscaling_mode="Default",
                # KubeRay adds the /tmp/ray (ray-logs) mount itself; the sidecar runs the
                # head's image, so the same user and read-only root apply.
                security_context=container_security_context(a.read_only_root_filesystem),
                volume_mounts=[m for m in writable_mounts() if m["mountPath"] != "/tmp/ray"],
            ) if autoscale else None,
            # Unset means disabled: left out then, so older CRDs accept the object too.
            auth_options=AuthOptionsArgs(mode="token") if a.auth == "token" else None,
        )

    def _worker(self, s: TpuWorkerGroup, labels: Mapping[str, str]) -> WorkerGroupSpecArgs:
        shape = s.shape
        res = worker_resources(shape)
        env: list[EnvVar] = [
            *self._env(),
            # Ray reads these four (TPU_NAME/TPU_WORKER_ID come from the webhook) and otherwise
            # queries the GCE metadata server with no timeout (ray-torchxla.md §3.2).
            {"name": "TPU_ACCELERATOR_TYPE", "value": shape.accelerator_type},
            {"name": "TPU_TOPOLOGY", "value": shape.topology},
        ]
        return WorkerGroupSpecArgs(
            group_name=s.name,
            replicas=s.initial_slices,
            min_replicas=s.min_slices,
            max_replicas=s.max_slices,
            num_of_hosts=shape.hosts,
            # KubeRay maps the google.com/tpu limit to the Ray resource TPU itself.
            ray_start_params={"num-cpus": res["requests"]["cpu"]},
            idle_timeout_seconds=self.args.idle_timeout_seconds if s.elastic else None,
            template=pod_template(
                labels={**labels, "raytpu.io/slice-group": s.name},
                service_account=self.args.service_account,
                node_selector=dict(shape.node_selector),
                tolerations=[{"key": TPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
                container="ray-worker",
                image=self.args.image,
                env=env,
                ports=WORKER_PORTS,
                resources=res,
                read_only_root=self.args.read_only_root_filesystem,
            ),
        )



def dashboard_command(cluster_name: str, namespace: str) -> str:
    p = versions.Ports.RAY_DASHBOARD
    return f"kubectl -n {namespace} port-forward svc/{cluster_name}-head-svc {p}:{p}"


def auth_secret_name(cluster_name: str) -> str:
    """The Secret KubeRay generates for ``authOptions.mode: token``: ``utils.CheckName`` of
    the cluster name (its last 50 characters; a leading digit or '-' becomes 'r')."""
    s = cluster_name[-50:]
    return "r" + s[1:] if s[:1].isdigit() or s[:1] == "-" else s


def auth_token_command(cluster_name: str, namespace: str) -> str:
    """Shell that gives a Ray client (``ray job submit``, ``raytpu submit``) the token."""
    return (f"export RAY_AUTH_MODE=token RAY_AUTH_TOKEN=$(kubectl -n {namespace} get secret "
            f"{auth_secret_name(cluster_name)} -o jsonpath='{{.data.auth_token}}' | base64 -d)")


def group_summary(s: TpuWorkerGroup) -> dict[str, Any]:
    return {
        "group": s.name,
        "accelerator": s.shape.accelerator_type,
        "topology": s.shape.topology,
        "hostsPerSlice": s.shape.hosts,
        "chipsPerHost": s.shape.chips_per_vm,
        "minSlices": s.min_slices,
        "initialSlices": s.initial_slices,
        "maxSlices": s.max_slices,
    }
