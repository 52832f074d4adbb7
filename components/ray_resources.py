"""Typed KubeRay custom resources: ``RayCluster`` and ``RayJob`` (``ray.io/v1`` only).

Hand-written from the KubeRay 1.7.0 CRDs (``helm-chart/kuberay-operator/crds/``), covering the
fields this package and its users set. ``ray.io/v1alpha1`` is deliberately absent: it is
served but frozen at its December 2023 schema and deprecated in 1.7.0 (kuberay #5122).

Why ``@pulumi.input_type`` classes rather than dicts: a plain dict passed as a
``CustomResource`` spec reaches the API server verbatim, so a snake_case key
(``num_of_hosts``) would be silently pruned by the structural schema and the operator would
fall back to the default ``numOfHosts: 1``. Input types carry their wire names
(``@pulumi.getter(name=...)`` via ``pulumi.property``) and the SDK translates them. Pod
templates and metadata are the typed dicts of :mod:`raytpu.components.k8s_objects`,
keyed by the API's own field names, so the type checker guards those the same way
(pulumi_kubernetes ``*Args`` are accepted too). The recorded plan inputs are therefore
the exact camelCase objects, which is what ``raytpu manifests`` renders.

Constructors check the few cross-field rules the CRD schema cannot express, naming the
field at fault, before anything is registered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import pulumi
from pulumi import _types
from pulumi_kubernetes.apiextensions import CustomResource
from raytpu.components.k8s_objects import ObjectMeta, PodTemplateSpec, SecurityContext, VolumeMount
from raytpu.facts.versions import RAY_API_VERSION
from raytpu.spec.pod_resources import ResourceRequirements
from raytpu.spec.ray_cluster import AuthMode

RAYCLUSTER_TYPE = f"kubernetes:{RAY_API_VERSION}:RayCluster"
RAYJOB_TYPE = f"kubernetes:{RAY_API_VERSION}:RayJob"

if TYPE_CHECKING:
    # pulumi_kubernetes' own Args are accepted too (the SDK serializes an input type by its
    # class); named for type checkers only, as importing core/v1 costs ~0.3 s.
    from pulumi_kubernetes.core.v1 import PodTemplateSpecArgs, ResourceRequirementsArgs
    from pulumi_kubernetes.meta.v1 import ObjectMetaArgs

    PodTemplate: TypeAlias = pulumi.Input[PodTemplateSpec] | pulumi.Input[PodTemplateSpecArgs]
    Resources: TypeAlias = (
        pulumi.Input[ResourceRequirements] | pulumi.Input[ResourceRequirementsArgs]
    )
    Metadata: TypeAlias = pulumi.Input[ObjectMeta] | pulumi.Input[ObjectMetaArgs]
else:
    PodTemplate = pulumi.Input[PodTemplateSpec]
    Resources = pulumi.Input[ResourceRequirements]
    Metadata = pulumi.Input[ObjectMeta]

AutoscalerVersion = Literal["v1", "v2"]
UpscalingMode = Literal["Default", "Aggressive", "Conservative"]
SubmissionMode = Literal["K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"]
SUBMISSION_MODES: tuple[str, ...] = ("K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode")
CLUSTER_SELECTOR_KEY = "ray.io/cluster"  # KubeRay utils.RayJobClusterSelectorKey


def wire_value(value: Any) -> Any:
    """``value`` as the API server takes it: input types by their wire names, ``None``
    fields left out. Raises TypeError on a Pulumi output (known only at apply time)."""
    if isinstance(value, pulumi.Output):
        raise TypeError("a Pulumi output has no value before `pulumi up`; pass plain values")
    if _types.is_input_type(type(value)):
        return {k: wire_value(v) for k, v in _types.input_type_to_dict(value).items()}
    if isinstance(value, Mapping):
        return {k: wire_value(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [wire_value(v) for v in value]
    return value


def _set_all(obj: object, values: Mapping[str, Any]) -> None:
    for name, value in values.items():
        if value is not None:
            pulumi.set(obj, name, value)


# rayStartParams KubeRay 1.7 refuses next to a group's ``resources`` (validateRayGroupResources)
# or at all (``labels``: validateRayGroupLabels).
_START_PARAMS_VS_RESOURCES = ("num-cpus", "num-gpus", "memory", "resources")


def _check_group_fields(
    where: str, ray_start_params: Mapping[str, str] | None, resources: Mapping[str, str] | None
) -> None:
    params = ray_start_params or {}
    if "labels" in params:
        raise ValueError(f"{where}.rayStartParams.labels: KubeRay rejects it; use labels")
    both = [p for p in _START_PARAMS_VS_RESOURCES if p in params]
    if resources and both:
        raise ValueError(f"{where}.rayStartParams: {both} next to resources; KubeRay accepts "
                         "only one of the two")


@pulumi.input_type
class HeadGroupSpecArgs:
    """``spec.headGroupSpec``."""

    template: PodTemplate = pulumi.property("template")
    ray_start_params: Mapping[str, str] | None = pulumi.property("rayStartParams", default=None)
    service_type: str | None = pulumi.property("serviceType", default=None)
    resources: Mapping[str, str] | None = pulumi.property("resources", default=None)
    labels: Mapping[str, str] | None = pulumi.property("labels", default=None)

    def __init__(
        self,
        *,
        template: PodTemplate,
        ray_start_params: Mapping[str, str] | None = None,
        service_type: str | None = None,
        resources: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """``resources``: Ray logical resources (``CPU`` -> ``--num-cpus``), ``labels``: Ray
        node labels (KubeRay >= 1.5; also put on the pod)."""
        _check_group_fields("headGroupSpec", ray_start_params, resources)
        _set_all(self, {"template": template, "ray_start_params": ray_start_params,
                        "service_type": service_type, "resources": resources,
                        "labels": labels})


@pulumi.input_type
class WorkerGroupSpecArgs:
    """One entry of ``spec.workerGroupSpecs``.

    ``replicas``/``minReplicas``/``maxReplicas`` count *replicas* (for TPU: slices), each made
    of ``numOfHosts`` pods (KubeRay utils.go ``GetWorkerGroupDesiredReplicas``).
    """

    group_name: str = pulumi.property("groupName")
    template: PodTemplate = pulumi.property("template")
    min_replicas: int = pulumi.property("minReplicas")
    max_replicas: int = pulumi.property("maxReplicas")
    replicas: int | None = pulumi.property("replicas", default=None)
    num_of_hosts: int | None = pulumi.property("numOfHosts", default=None)
    ray_start_params: Mapping[str, str] | None = pulumi.property("rayStartParams", default=None)
    idle_timeout_seconds: int | None = pulumi.property("idleTimeoutSeconds", default=None)
    resources: Mapping[str, str] | None = pulumi.property("resources", default=None)
    labels: Mapping[str, str] | None = pulumi.property("labels", default=None)

    def __init__(
        self,
        *,
        group_name: str,
        template: PodTemplate,
        min_replicas: int,
        max_replicas: int,
        replicas: int | None = None,
        num_of_hosts: int | None = None,
        ray_start_params: Mapping[str, str] | None = None,
        idle_timeout_seconds: int | None = None,
        resources: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        where = f"workerGroupSpecs[{group_name!r}]"
        _check_group_fields(where, ray_start_params, resources)
        if not 0 <= min_replicas <= max_replicas:
            raise ValueError(
                f"{where}.minReplicas/maxReplicas: need 0 <= {min_replicas} <= {max_replicas}"
            )
        if replicas is not None and not min_replicas <= replicas <= max_replicas:
            raise ValueError(
                f"{where}.replicas: {replicas} is outside [{min_replicas}, {max_replicas}]"
            )
        if num_of_hosts is not None and num_of_hosts < 1:
            # numOfHosts 0 deletes every worker (kuberay #2084) and the TPU webhook rejects it.
            raise ValueError(f"{where}.numOfHosts: {num_of_hosts} must be >= 1")
        _set_all(self, {
            "group_name": group_name, "template": template, "min_replicas": min_replicas,
            "max_replicas": max_replicas, "replicas": replicas, "num_of_hosts": num_of_hosts,
            "ray_start_params": ray_start_params, "idle_timeout_seconds": idle_timeout_seconds,
            "resources": resources, "labels": labels,
        })


@pulumi.input_type
class AutoscalerOptionsArgs:
    """``spec.autoscalerOptions`` (the in-tree autoscaler sidecar).

    KubeRay 1.7.0 builds the sidecar itself (``BuildAutoscalerContainer``) and takes its
    ``securityContext`` and extra ``volumeMounts`` only from here
    (``mergeAutoscalerOverrides``): the head template's container settings do not reach it.
    """

    version: str | None = pulumi.property("version", default=None)
    idle_timeout_seconds: int | None = pulumi.property("idleTimeoutSeconds", default=None)
    upscaling_mode: str | None = pulumi.property("upscalingMode", default=None)
    resources: Resources | None = pulumi.property(
        "resources", default=None
    )
    image: str | None = pulumi.property("image", default=None)
    security_context: SecurityContext | None = pulumi.property("securityContext", default=None)
    volume_mounts: Sequence[VolumeMount] | None = pulumi.property("volumeMounts", default=None)

    def __init__(
        self,
        *,
        version: AutoscalerVersion | None = "v2",
        idle_timeout_seconds: int | None = None,
        upscaling_mode: UpscalingMode | None = None,
        resources: Resources | None = None,
        image: str | None = None,
        security_context: SecurityContext | None = None,
        volume_mounts: Sequence[VolumeMount] | None = None,
    ) -> None:
        _set_all(self, {"version": version, "idle_timeout_seconds": idle_timeout_seconds,
                        "upscaling_mode": upscaling_mode, "resources": resources,
                        "image": image, "security_context": security_context,
                        "volume_mounts": list(volume_mounts) if volume_mounts else None})


@pulumi.input_type
class GcsFaultToleranceOptionsArgs:
    """``spec.gcsFaultToleranceOptions`` (its presence turns GCS FT on). ``backend``: redis
    only; 1.7.0's embedded rocksdb needs an alpha gate and a head volume."""

    backend: str | None = pulumi.property("backend", default=None)
    redis_address: str | None = pulumi.property("redisAddress", default=None)
    redis_username: Mapping[str, Any] | None = pulumi.property("redisUsername", default=None)
    redis_password: Mapping[str, Any] | None = pulumi.property("redisPassword", default=None)
    external_storage_namespace: str | None = pulumi.property(
        "externalStorageNamespace", default=None
    )

    def __init__(
        self,
        *,
        redis_address: pulumi.Input[str],
        backend: Literal["redis"] | None = None,
        redis_username: Mapping[str, Any] | None = None,
        redis_password: Mapping[str, Any] | None = None,
        external_storage_namespace: str | None = None,
    ) -> None:
        """``redis_username``/``redis_password``: ``{"value": ...}`` or ``{"valueFrom": ...}``
        (a ``secretKeyRef``: the password never appears in the object)."""
        for name, cred in (("redisUsername", redis_username), ("redisPassword", redis_password)):
            if cred is not None and len([k for k in ("value", "valueFrom") if k in cred]) != 1:
                raise ValueError(f"gcsFaultToleranceOptions.{name}: set exactly one of value "
                                 "and valueFrom")
        _set_all(self, {"backend": backend, "redis_address": redis_address,
                        "redis_username": redis_username, "redis_password": redis_password,
                        "external_storage_namespace": external_storage_namespace})


@pulumi.input_type
class AuthOptionsArgs:
    """``spec.authOptions``: Ray token authentication (KubeRay >= 1.5.1, Ray >= 2.52).

    With ``mode: token`` and no ``secretName`` the operator generates a Secret named after
    the RayCluster (data key ``auth_token``) and sets ``RAY_AUTH_MODE``/``RAY_AUTH_TOKEN``
    in every Ray container, a RayJob's submitter included.
    """

    mode: str | None = pulumi.property("mode", default=None)
    secret_name: str | None = pulumi.property("secretName", default=None)
    enable_k8s_token_auth: bool | None = pulumi.property("enableK8sTokenAuth", default=None)

    def __init__(
        self,
        *,
        mode: AuthMode | None = "token",
        secret_name: str | None = None,
        enable_k8s_token_auth: bool | None = None,
    ) -> None:
        _set_all(self, {"mode": mode, "secret_name": secret_name,
                        "enable_k8s_token_auth": enable_k8s_token_auth})


@pulumi.input_type
class RayClusterSpecArgs:
    """``RayCluster.spec`` (also ``RayJob.spec.rayClusterSpec``)."""

    head_group_spec: HeadGroupSpecArgs = pulumi.property("headGroupSpec")
    worker_group_specs: Sequence[WorkerGroupSpecArgs] | None = pulumi.property(
        "workerGroupSpecs", default=None
    )
    ray_version: str | None = pulumi.property("rayVersion", default=None)
    enable_in_tree_autoscaling: bool | None = pulumi.property(
        "enableInTreeAutoscaling", default=None
    )
    autoscaler_options: AutoscalerOptionsArgs | None = pulumi.property(
        "autoscalerOptions", default=None
    )
    gcs_fault_tolerance_options: GcsFaultToleranceOptionsArgs | None = pulumi.property(
        "gcsFaultToleranceOptions", default=None
    )
    auth_options: AuthOptionsArgs | None = pulumi.property("authOptions", default=None)

    def __init__(
        self,
        *,
        head_group_spec: HeadGroupSpecArgs,
        worker_group_specs: Sequence[WorkerGroupSpecArgs] | None = None,
        ray_version: str | None = None,
        enable_in_tree_autoscaling: bool | None = None,
        autoscaler_options: AutoscalerOptionsArgs | None = None,
        gcs_fault_tolerance_options: GcsFaultToleranceOptionsArgs | None = None,
        auth_options: AuthOptionsArgs | None = None,
    ) -> None:
        names = [w.group_name for w in worker_group_specs or ()]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"workerGroupSpecs.groupName: {dupes} used more than once")
        if autoscaler_options is not None and not enable_in_tree_autoscaling:
            raise ValueError(
                "autoscalerOptions: set only with enableInTreeAutoscaling: true "
                "(the operator ignores it otherwise)"
            )
        v2 = autoscaler_options is not None and autoscaler_options.version == "v2"
        idle = [w.group_name for w in worker_group_specs or ()
                if w.idle_timeout_seconds is not None]
        if idle and not v2:
            # KubeRay validateWorkerGroupIdleTimeout: only the v2 autoscaler honours it.
            raise ValueError(f"workerGroupSpecs{idle}.idleTimeoutSeconds: KubeRay rejects it "
                             "unless autoscalerOptions.version is v2")
        _set_all(self, {
            "head_group_spec": head_group_spec,
            "worker_group_specs": list(worker_group_specs) if worker_group_specs else None,
            "ray_version": ray_version, "enable_in_tree_autoscaling": enable_in_tree_autoscaling,
            "autoscaler_options": autoscaler_options,
            "gcs_fault_tolerance_options": gcs_fault_tolerance_options,
            "auth_options": auth_options,
        })


@pulumi.input_type
class RayJobSpecArgs:
    """``RayJob.spec``: run ``entrypoint`` on a new cluster (``rayClusterSpec``) or an existing
    one (``clusterSelector``)."""

    entrypoint: str | None = pulumi.property("entrypoint", default=None)
    ray_cluster_spec: RayClusterSpecArgs | None = pulumi.property("rayClusterSpec", default=None)
    cluster_selector: Mapping[str, str] | None = pulumi.property("clusterSelector", default=None)
    runtime_env_yaml: str | None = pulumi.property("runtimeEnvYAML", default=None)
    shutdown_after_job_finishes: bool | None = pulumi.property(
        "shutdownAfterJobFinishes", default=None
    )
    ttl_seconds_after_finished: int | None = pulumi.property(
        "ttlSecondsAfterFinished", default=None
    )
    submission_mode: str | None = pulumi.property("submissionMode", default=None)
    backoff_limit: int | None = pulumi.property("backoffLimit", default=None)
    active_deadline_seconds: int | None = pulumi.property("activeDeadlineSeconds", default=None)
    submitter_pod_template: PodTemplate | None = pulumi.property(
        "submitterPodTemplate", default=None
    )
    suspend: bool | None = pulumi.property("suspend", default=None)
    metadata: Mapping[str, str] | None = pulumi.property("metadata", default=None)

    def __init__(
        self,
        *,
        entrypoint: str | None = None,
        ray_cluster_spec: RayClusterSpecArgs | None = None,
        cluster_selector: Mapping[str, str] | None = None,
        runtime_env_yaml: str | None = None,
        shutdown_after_job_finishes: bool | None = None,
        ttl_seconds_after_finished: int | None = None,
        submission_mode: SubmissionMode | None = None,
        backoff_limit: int | None = None,
        active_deadline_seconds: int | None = None,
        submitter_pod_template: PodTemplate | None = None,
        suspend: bool | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        """``metadata``: the Ray job's (``ray job submit --metadata-json``). Checks KubeRay
        1.7.0's RayJob rules (``utils/validation.go ValidateRayJobSpec``) that the CRD schema
        cannot express, naming the field at fault."""
        if (ray_cluster_spec is None) == (cluster_selector is None):
            raise ValueError("rayClusterSpec/clusterSelector: set exactly one of the two")
        if submission_mode is not None and submission_mode not in SUBMISSION_MODES:
            raise ValueError(
                f"submissionMode: {submission_mode!r} is not valid; valid: "
                + ", ".join(SUBMISSION_MODES)
            )
        if submission_mode != "InteractiveMode" and not entrypoint:
            raise ValueError("entrypoint: required unless submissionMode is InteractiveMode")
        if ttl_seconds_after_finished and not shutdown_after_job_finishes:
            # KubeRay's RayJob validation refuses a TTL without shutdownAfterJobFinishes.
            raise ValueError(
                "ttlSecondsAfterFinished: only meaningful with shutdownAfterJobFinishes: true"
            )
        if ttl_seconds_after_finished is not None and ttl_seconds_after_finished < 0:
            raise ValueError(f"ttlSecondsAfterFinished: {ttl_seconds_after_finished} < 0")
        if cluster_selector is not None:
            if not cluster_selector.get(CLUSTER_SELECTOR_KEY):
                raise ValueError(f"clusterSelector: needs a non-empty {CLUSTER_SELECTOR_KEY!r}")
            if submission_mode == "SidecarMode":
                raise ValueError("submissionMode: SidecarMode does not take a clusterSelector")
            if backoff_limit:
                raise ValueError("backoffLimit: incompatible with clusterSelector")
        if submission_mode == "InteractiveMode" and backoff_limit:
            raise ValueError("backoffLimit: incompatible with InteractiveMode")
        if submission_mode == "SidecarMode" and submitter_pod_template is not None:
            raise ValueError("submitterPodTemplate: SidecarMode does not take one")
        if active_deadline_seconds is not None and active_deadline_seconds <= 0:
            raise ValueError(f"activeDeadlineSeconds: {active_deadline_seconds} must be > 0")
        if backoff_limit is not None and backoff_limit < 0:
            raise ValueError(f"backoffLimit: {backoff_limit} must not be negative")
        if suspend and (cluster_selector is not None or not shutdown_after_job_finishes):
            raise ValueError("suspend: only with rayClusterSpec and shutdownAfterJobFinishes")
        _set_all(self, {
            "entrypoint": entrypoint, "ray_cluster_spec": ray_cluster_spec,
            "cluster_selector": cluster_selector, "runtime_env_yaml": runtime_env_yaml,
            "shutdown_after_job_finishes": shutdown_after_job_finishes,
            "ttl_seconds_after_finished": ttl_seconds_after_finished,
            "submission_mode": submission_mode, "backoff_limit": backoff_limit,
            "active_deadline_seconds": active_deadline_seconds,
            "submitter_pod_template": submitter_pod_template, "suspend": suspend,
            "metadata": metadata,
        })


class RayCluster(CustomResource):
    """A ``ray.io/v1`` RayCluster (type token ``kubernetes:ray.io/v1:RayCluster``)."""

    def __init__(
        self,
        resource_name: str,
        *,
        metadata: Metadata,
        spec: RayClusterSpecArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(resource_name, api_version=RAY_API_VERSION, kind="RayCluster",
                         metadata=metadata, spec=spec, opts=opts)


class RayJob(CustomResource):
    """A ``ray.io/v1`` RayJob (type token ``kubernetes:ray.io/v1:RayJob``)."""

    def __init__(
        self,
        resource_name: str,
        *,
        metadata: Metadata,
        spec: RayJobSpecArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(resource_name, api_version=RAY_API_VERSION, kind="RayJob",
                         metadata=metadata, spec=spec, opts=opts)
