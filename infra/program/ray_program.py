"""The Ray layer of the stack program: StackConfig -> KubeRayOperator + TpuRayCluster.

``raytpu.program.stack.build`` declares the GKE side (network, cluster, TPU node pools, storage) and
then calls :func:`build_ray` with the cluster's Kubernetes provider. Every Ray-side problem in
the config is reported here, as :class:`~raytpu.config.stack.ConfigError` lines naming the config
key, *before* any Ray resource is declared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_kubernetes as k8s
from raytpu.components.kuberay_operator import KubeRayOperator
from raytpu.components.ray_cluster_validation import args_problems
from raytpu.components.tpu_ray_cluster import TpuRayCluster
from raytpu.config.key_paths import Keys
from raytpu.config.schema import shared_fields
from raytpu.config.stack import ConfigError, StackConfig
from raytpu.facts import versions
from raytpu.facts.versions import version_tuple
from raytpu.program.isolation_program import build_stack_namespace_policies
from raytpu.program.ray_cluster_config import cluster_args, ray_keys
from raytpu.program.training_job import training_rayjob
from raytpu.spec.kuberay_operator import WEBHOOK_NAMESPACE, KubeRayOperatorArgs

if TYPE_CHECKING:
    from raytpu.components.memorystore import MemorystoreRedis


def operator_args(cfg: StackConfig) -> KubeRayOperatorArgs:
    k = cfg.kuberay
    # None (unset) keeps the component's default.
    unset = {name for name in ("webhook_image", "multi_host_indexing") if getattr(k, name) is None}
    return KubeRayOperatorArgs(**{
        **{n: v for n, v in shared_fields(KubeRayOperatorArgs, k).items() if n not in unset},
        "kuberay_version": k.version,
        # gke-addon: the CRD wait Job runs python from the public Ray image the trainer image
        # is built on (not the stack's own image: that may not be pushed yet on a first up).
        "addon_wait_image": versions.RAY_IMAGE,
    })


def _checked(
    cfg: StackConfig,
    gsa_email: pulumi.Input[str],
    system_pool: str | None,
    tpu_pools: Mapping[str, Mapping[str, str]] | None,
) -> KubeRayOperatorArgs:
    """The operator Args, once every Ray-side problem is ruled out (else ConfigError)."""
    keys = ray_keys(cfg)
    problems = [keys.line(p) for p in args_problems(
        cluster_args(cfg, gsa_email=gsa_email, system_pool=system_pool, tpu_pools=tpu_pools))]
    k = cfg.kuberay
    need = versions.MIN_KUBERAY_VERSION_FOR_AUTH_OPTIONS
    if (cfg.ray.auth == "token" and k.mode == "helm"
            and version_tuple(k.version) < version_tuple(need)):
        # An older CRD prunes spec.authOptions: the cluster would silently run without auth.
        problems.append(f"raytpu:ray.auth: 'token' needs KubeRay >= {need}, "
                        f"raytpu:kuberay.version is {k.version}; upgrade it or set 'disabled'")
    try:
        op_args = operator_args(cfg)
    except ValueError as e:
        problems += Keys("raytpu:kuberay", {("kuberay_version",): "raytpu:kuberay.version"}
                         ).lines(e)
    if problems:
        raise ConfigError(problems)
    return op_args


def ray_problems(cfg: StackConfig) -> list[str]:
    """Ray-side config problems (name lengths, DNS labels, image/rayVersion, LB ranges,
    operator namespace), for callers that validate before declaring anything."""
    try:
        _checked(cfg, "unused", None, None)
    except ConfigError as e:
        return e.problems
    return []


def build_ray(
    cfg: StackConfig,
    *,
    provider: k8s.Provider | None,
    gsa_email: pulumi.Input[str],
    depends_on: Sequence[pulumi.Resource] = (),
    operator_depends_on: Sequence[pulumi.Resource] | None = None,
    system_pool: str | None = None,
    tpu_pools: Mapping[str, Mapping[str, str]] | None = None,
    image: pulumi.Input[str] | None = None,
    redis: MemorystoreRedis | None = None,
) -> dict[str, Any]:
    """Declare the KubeRay operator (or record the GKE add-on), the stack's RayCluster and
    its ``raytpu:jobs`` RayJobs.

    ``provider``: the GKE cluster's Kubernetes provider (server-side apply on: the KubeRay CRDs
    exceed client-side apply's annotation limit). ``depends_on``: what the RayCluster waits for
    (the cluster, its node pools). ``operator_depends_on``: what the operator layer waits for
    (default ``depends_on``; the stack passes the cluster and system pool only, so a TPU
    stockout does not hold back cert-manager, KubeRay and the webhook). ``system_pool``: the
    CPU node pool's name, to pin the Ray head. ``tpu_pools``: node labels per TPU pool, to
    refuse a group that no pool can host. ``image``: the Ray pods' image (default
    ``cfg.image``; the stack passes the digest of the image it builds). ``redis``: the
    Memorystore instance the GCS is kept in (``raytpu:ray.gcsFaultTolerance.memorystore``).
    Returns the stack outputs of the Ray layer.
    """
    op_args = _checked(cfg, gsa_email, system_pool, tpu_pools)  # before declaring anything
    jobs = [training_rayjob(cfg, job, image=image, system_pool=system_pool,
                            key=f"raytpu:jobs[{i}]", redis=redis)
            for i, job in enumerate(cfg.jobs)]

    providers: list[pulumi.ProviderResource] | None = [provider] if provider is not None else None
    base = pulumi.ResourceOptions(providers=providers, depends_on=list(depends_on))
    operator = KubeRayOperator("kuberay", op_args, opts=pulumi.ResourceOptions(
        providers=providers,
        depends_on=list(depends_on if operator_depends_on is None else operator_depends_on),
    ))

    # A namespace the operator layer already creates (its own, or the webhook chart's
    # ray-system) must not get a second owner.
    create_ns = cfg.ray.namespace not in (*operator.namespaces, "default")
    ns_owner = operator.namespaces.get(cfg.ray.namespace)
    cluster = TpuRayCluster(
        "ray",
        cluster_args(cfg, gsa_email=gsa_email, system_pool=system_pool, tpu_pools=tpu_pools,
                     create_namespace=create_ns, image=image, redis=redis),
        opts=pulumi.ResourceOptions.merge(base, pulumi.ResourceOptions(
            # The CRDs must exist (preview + apply) and the TPU webhook must serve before any
            # KubeRay pod is created, or TPU pods start without TPU_WORKER_* (silently broken).
            depends_on=[*operator.ready, *([ns_owner] if ns_owner is not None else [])],
        )),
    )
    # Each job's RayCluster runs as the stack's KSA in its namespace: after both exist.
    job_opts = pulumi.ResourceOptions.merge(base, pulumi.ResourceOptions(
        depends_on=[*operator.ready, cluster.service_account,
                    *(r for r in (cluster.redis_secret, cluster.redis_ca) if r is not None)]))
    for job in jobs:
        job.declare(f"job-{job.metadata['name']}", job_opts)
    # NetworkPolicy follows the namespace, not the RayCluster: on a first `up` a Ray pod may
    # start a few seconds before it (its image pull alone takes longer).
    ns_creator = cluster.namespace if cluster.namespace is not None else ns_owner
    build_stack_namespace_policies(cfg, providers=providers,
                                   depends_on=[ns_creator] if ns_creator is not None else [])
    if cfg.ray.namespace == WEBHOOK_NAMESPACE and cfg.kuberay.mode == "helm":
        pulumi.log.warn(f"raytpu:ray.namespace {WEBHOOK_NAMESPACE!r} is the TPU webhook's "
                        "namespace; the RayCluster shares it")
    return {
        "ray_cluster_name": cluster.outputs["clusterName"],
        "ray_namespace": cluster.outputs["namespace"],
        "ray_dashboard_command": cluster.outputs["dashboardPortForward"],
        "ray_worker_groups": cluster.outputs["workerGroups"],
        "ray_auth_mode": cluster.outputs["authMode"],
        "ray_auth_token_command": cluster.outputs["authTokenCommand"],
        "ray_workload_identity_member": (
            f"serviceAccount:{cfg.project}.svc.id.goog"
            f"[{cfg.ray.namespace}/{cfg.ray.service_account}]"
        ),
        "kuberay_mode": cfg.kuberay.mode,
        "kuberay_charts": operator.outputs["charts"],
        "ray_jobs": [job.metadata["name"] for job in jobs],
        "ray_gcs_fault_tolerance": cluster.outputs["gcsFaultTolerance"],
    }
