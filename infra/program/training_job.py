"""A training run as a typed ``ray.io/v1`` RayJob: the stack's RayCluster shape for one slice
group (that group only, at the job's slice count), the launcher as entrypoint with the slice's
exact shape, and a submitter pod that passes the namespace's restricted Pod Security profile.

:func:`training_rayjob` is the one builder: the stack's ``raytpu:jobs`` (declared by
:func:`raytpu.program.ray_program.build_ray`, written by ``raytpu manifests``) and ``raytpu submit
--team`` use it. Its result is both a Pulumi resource (:meth:`TrainingRayJob.declare`) and a
plain manifest (:meth:`TrainingRayJob.manifest`).
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import yaml
from raytpu.components.k8s_objects import ObjectMeta, PodTemplateSpec, ResourceRequirements
from raytpu.components.ray_cluster_args import TpuRayClusterArgs, TpuWorkerGroup
from raytpu.components.ray_cluster_validation import args_problems
from raytpu.components.ray_groups import ray_cluster_spec
from raytpu.components.ray_pod_templates import pod_template
from raytpu.components.ray_resources import RAY_API_VERSION, RayJob, RayJobSpecArgs, wire_value
from raytpu.config.job_rules import train_config
from raytpu.config.jobs import JobConfig
from raytpu.config.stack import ConfigError, StackConfig
from raytpu.facts.names import NODEPOOL_LABEL, SYSTEM_POOL
from raytpu.program.ray_cluster_config import cluster_args
from raytpu.workloads.config import to_argv
from raytpu.workloads.scaling import RUNTIME_ENV_VARS
from raytpu.workloads.train_options import BadFlags

JOB_LABEL = "raytpu.io/job"
SUBMITTER_CONTAINER = "ray-job-submitter"  # KubeRay's utils.SubmitterContainerName
# KubeRay's default submitter resources (common/job.go GetDefaultSubmitterContainer).
_SUBMITTER_RESOURCES: ResourceRequirements = {"requests": {"cpu": "500m", "memory": "200Mi"},
                        "limits": {"cpu": "1", "memory": "1Gi"}}
@dataclass(frozen=True)
class TrainingRayJob:
    """A RayJob ready to declare or to write out."""

    metadata: ObjectMeta
    spec: RayJobSpecArgs

    def manifest(self) -> dict[str, Any]:
        """The API object, wire names, as ``kubectl apply`` takes it (the image must be a
        plain string then, not a Pulumi output)."""
        return {"apiVersion": RAY_API_VERSION, "kind": "RayJob",
                "metadata": wire_value(self.metadata), "spec": wire_value(self.spec)}

    def declare(self, resource_name: str, opts: pulumi.ResourceOptions | None = None) -> RayJob:
        return RayJob(resource_name, metadata=self.metadata, spec=self.spec, opts=opts)


def training_rayjob(
    cfg: StackConfig,
    job: JobConfig,
    *,
    image: pulumi.Input[str] | None = None,
    namespace: str | None = None,
    service_account: str | None = None,
    labels: Mapping[str, str] | None = None,
    system_pool: str | None = SYSTEM_POOL,
    key: str | None = None,
) -> TrainingRayJob:
    """The RayJob running ``job`` on its own RayCluster of ``job.slices`` slices of
    ``job.slice_group``, shaped as the stack's RayCluster shapes that group.

    ``image``: the Ray image (default the stack's ``cfg.image``; the stack passes the built
    image's digest). ``namespace``/``service_account``: where the job runs and as whom
    (default the stack's Ray namespace and its Workload Identity KSA). ``labels``: extra
    labels of the RayJob object (e.g. Kueue's ``kueue.x-k8s.io/queue-name``).
    ``system_pool``: the CPU node pool for the head and the submitter. ``key``: how problems
    name the job (default ``job '<name>'``). Raises :class:`~raytpu.config.stack.ConfigError`.
    """
    where = key or f"job {job.name!r}"
    try:
        train, opts = train_config(cfg, job)
    except BadFlags as e:
        raise ConfigError([f"{where}.train: {p}" for p in e.problems]) from None
    except StopIteration:
        raise ConfigError([f"{where}.sliceGroup: {job.slice_group!r} is not a raytpu:slices "
                           "entry"]) from None
    group = next(s for s in cfg.slices if s.name == job.slice_group)
    ns = namespace or cfg.ray.namespace
    ksa = service_account or cfg.ray.service_account
    the_image = image if image is not None else cfg.image
    base = cluster_args(cfg, gsa_email="", system_pool=system_pool)
    # The job's cluster: this group alone, exactly the job's slices, no autoscaler (a
    # RayJob's cluster lives as long as the job and needs all of its slices from the start).
    args = dataclasses.replace(
        base, namespace=ns, service_account=ksa, image=the_image, autoscaling=False,
        # KubeRay names the job's RayCluster "<job>-<5 characters>".
        cluster_name=f"{job.name}-xxxxx",
        worker_groups=[TpuWorkerGroup(
            name=group.name, shape=group.shape, min_slices=train.slices,
            max_slices=train.slices, initial_slices=train.slices, env=group.env,
            labels=group.labels, ray_resources=group.ray_resources,
        )],
    )
    problems = [str(p).replace(args.cluster_name, f"{job.name}-<5 characters>")
                for p in args_problems(args)]
    if problems:
        raise ConfigError([f"{where}: {p}" for p in problems])
    pod_labels = {"app.kubernetes.io/part-of": "raytpu", JOB_LABEL: job.name}
    entrypoint = shlex.join(["python", "-m", "raytpu.workloads.launcher",
                             *to_argv(train, opts)])
    spec = RayJobSpecArgs(
        entrypoint=entrypoint,
        ray_cluster_spec=ray_cluster_spec(args, pod_labels),
        runtime_env_yaml=yaml.safe_dump({"env_vars": dict(RUNTIME_ENV_VARS)}, sort_keys=True),
        shutdown_after_job_finishes=job.shutdown_after_job_finishes,
        ttl_seconds_after_finished=job.ttl_seconds_after_finished,
        active_deadline_seconds=job.active_deadline_seconds,
        backoff_limit=job.backoff_limit,
        submission_mode="K8sJobMode",
        submitter_pod_template=submitter_template(args, pod_labels, system_pool),
    )
    metadata: ObjectMeta = {"name": job.name, "namespace": ns,
                            "labels": {**pod_labels, **(labels or {})}}
    return TrainingRayJob(metadata=metadata, spec=spec)


def submitter_template(
    args: TpuRayClusterArgs, labels: Mapping[str, str], system_pool: str | None
) -> PodTemplateSpec:
    """KubeRay's default submitter pod (``ray job submit`` in the head's image) hardened to
    the restricted Pod Security profile, which the Ray namespaces enforce: KubeRay's own
    default sets no securityContext, so the API server would refuse the submitter Job's pod.
    KubeRay fills in the command and the Ray address itself."""
    template = pod_template(
        labels=labels, service_account=args.service_account,
        node_selector={NODEPOOL_LABEL: system_pool} if system_pool else None,
        container=SUBMITTER_CONTAINER, image=args.image, env=[], ports=(),
        resources=_SUBMITTER_RESOURCES, read_only_root=args.read_only_root_filesystem,
    )
    template["spec"]["restartPolicy"] = "Never"
    return template
