"""The one builder of RayJobs: a ``ray.io/v1`` RayJob whose RayCluster is one slice group of a
:class:`~raytpu.spec.ray_cluster.TpuRayClusterArgs`, at a fixed slice count, built
from the same pod templates as the stack's RayCluster (:mod:`raytpu.components.ray_groups`).

Used by the stack's ``raytpu:jobs``, by ``raytpu submit --team`` (the bundled trainer and a
user's own command alike) and by anything that submits code as a RayJob later. A pure
function of its Args: no Pulumi engine runs, so the result is both a Pulumi resource
(:meth:`BuiltRayJob.declare`) and a plain manifest (:meth:`BuiltRayJob.manifest`).

* The job's cluster has no autoscaler: it lives as long as the job and needs all of its
  slices from the start (and Kueue 0.19 refuses in-tree autoscaling without elastic
  workloads). KubeRay names it ``<job>-<5 characters>``, so pod names are checked with that.
* The image is the cluster Args' image, by digest: an image by tag alone is refused, whoever
  calls (every host of a slice, and the submitter, must run the same bits).
* The K8sJobMode submitter is KubeRay's default container (KubeRay fills in the command and
  the Ray address) hardened exactly as the Ray pods are (restricted Pod Security profile,
  read-only root with the same writable paths), with KubeRay's default resources, which
  Kueue counts against the team's CPU/memory quota.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import yaml
from raytpu.components.k8s_objects import ObjectMeta, PodTemplateSpec
from raytpu.components.ray_cluster_validation import args_problems
from raytpu.components.ray_groups import ray_cluster_spec
from raytpu.components.ray_pod_templates import pod_template
from raytpu.components.ray_resources import (
    RAY_API_VERSION,
    RayJob,
    RayJobSpecArgs,
    SubmissionMode,
    wire_value,
)
from raytpu.facts.names import DNS_LABEL, IMAGE_DIGEST, NODEPOOL_LABEL, RAYJOB_NAME_MAX_LEN
from raytpu.spec.pod_resources import ResourceRequirements
from raytpu.spec.ray_cluster import TpuRayClusterArgs

JOB_LABEL = "raytpu.io/job"
PART_OF = {"app.kubernetes.io/part-of": "raytpu"}
SUBMITTER_CONTAINER = "ray-job-submitter"  # KubeRay's utils.SubmitterContainerName
SUBMISSION_MODE: SubmissionMode = "K8sJobMode"
# KubeRay's default submitter resources (common/job.go GetDefaultSubmitterContainer); Kueue
# counts the requests (raytpu.program.kueue_program sizes team quotas with them).
SUBMITTER_RESOURCES: ResourceRequirements = {
    "requests": {"cpu": "500m", "memory": "200Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
MAX_JOB_NAME = RAYJOB_NAME_MAX_LEN
_CLUSTER_SUFFIX = "-xxxxx"  # stands for KubeRay's 5 random characters in name checks


@dataclass(frozen=True)
class TpuRayJobArgs:
    """Inputs of :func:`build_rayjob`."""

    name: str
    """RayJob name: a DNS label of at most :data:`MAX_JOB_NAME` characters."""
    cluster: TpuRayClusterArgs
    """The cluster as the job's pods run: namespace, service account, image (by digest),
    checkpoint URI, head; ``group`` is one of its worker groups."""
    group: str
    """The worker group (slice group) the job runs on."""
    slices: int
    """Slices of ``group`` the job's cluster has, fixed."""
    entrypoint: str
    """The command the submitter runs with ``ray job submit``."""
    runtime_env: Mapping[str, Any] = field(default_factory=dict)
    """Ray's runtime environment of the job (``runtimeEnvYAML``)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Extra labels of the RayJob object (e.g. Kueue's ``kueue.x-k8s.io/queue-name``)."""
    job_metadata: Mapping[str, str] = field(default_factory=dict)
    """The Ray job's metadata (``spec.metadata``)."""
    suspend: bool = False
    """Created suspended (Kueue unsuspends a job it admits)."""
    shutdown_after_job_finishes: bool = True
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    """KubeRay fails the job (reason ``DeadlineExceeded``, no retry) this long after it
    starts; the cluster then goes, and with it the quota Kueue admitted it with."""
    backoff_limit: int | None = None


@dataclass(frozen=True)
class BuiltRayJob:
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


def job_cluster_args(args: TpuRayJobArgs) -> TpuRayClusterArgs:
    """The job's own cluster: ``args.group`` alone at ``args.slices``, no autoscaler."""
    group = next(g for g in args.cluster.worker_groups if g.name == args.group)
    n = args.slices
    return dataclasses.replace(
        args.cluster, cluster_name=f"{args.name}{_CLUSTER_SUFFIX}", autoscaling=False,
        worker_groups=[dataclasses.replace(group, min_slices=n, max_slices=n,
                                           initial_slices=n)],
        create_namespace=False, dashboard_internal_lb=False, pod_monitoring=False)


def rayjob_problems(args: TpuRayJobArgs) -> list[str]:
    """Every reason ``args`` cannot make a RayJob KubeRay runs, one sentence each."""
    problems: list[str] = []
    if not DNS_LABEL.match(args.name) or len(args.name) > MAX_JOB_NAME:
        problems.append(f"name: {args.name!r} must be a DNS label of at most {MAX_JOB_NAME} "
                        "characters (KubeRay names the job's cluster '<name>-<5 characters>')")
        return problems
    groups = [g.name for g in args.cluster.worker_groups]
    if args.group not in groups:
        return [f"group: {args.group!r} is not a worker group; valid: {', '.join(groups)}"]
    if args.slices < 1:
        problems.append(f"slices: {args.slices} must be at least 1")
        return problems
    if not args.entrypoint.strip():
        problems.append("entrypoint: empty")
    image = args.cluster.image
    # A Pulumi output is the stack's own build, named by digest (TrainerImage.ref).
    if isinstance(image, str) and IMAGE_DIGEST not in image:
        problems.append(f"image: {image!r} is not pinned by digest ({IMAGE_DIGEST}...): every "
                        "host of the job's slices and its submitter must run the same bits")
    cluster = job_cluster_args(args)
    problems += [str(p).replace(cluster.cluster_name, f"{args.name}-<5 characters>")
                 for p in args_problems(cluster)]
    return problems


def submitter_template(cluster: TpuRayClusterArgs, labels: Mapping[str, str]) -> PodTemplateSpec:
    """KubeRay's default submitter pod hardened like the Ray pods: KubeRay's own default sets
    no securityContext, so a namespace enforcing the restricted profile would refuse it."""
    template = pod_template(
        labels=labels, service_account=cluster.service_account,
        node_selector={NODEPOOL_LABEL: cluster.system_pool} if cluster.system_pool else None,
        container=SUBMITTER_CONTAINER, image=cluster.image, env=[], ports=(),
        resources=SUBMITTER_RESOURCES, read_only_root=cluster.read_only_root_filesystem,
    )
    template["spec"]["restartPolicy"] = "Never"
    return template


def build_rayjob(args: TpuRayJobArgs) -> BuiltRayJob:
    """The RayJob of ``args``. Raises ValueError with every problem, one per line."""
    problems = rayjob_problems(args)
    if problems:
        raise ValueError("\n".join(problems))
    cluster = job_cluster_args(args)
    pod_labels = {**PART_OF, **cluster.labels, JOB_LABEL: args.name}
    spec = RayJobSpecArgs(
        entrypoint=args.entrypoint,
        ray_cluster_spec=ray_cluster_spec(cluster, pod_labels),
        runtime_env_yaml=yaml.safe_dump(dict(args.runtime_env), sort_keys=True),
        shutdown_after_job_finishes=args.shutdown_after_job_finishes,
        ttl_seconds_after_finished=args.ttl_seconds_after_finished,
        active_deadline_seconds=args.active_deadline_seconds,
        backoff_limit=args.backoff_limit,
        submission_mode=SUBMISSION_MODE,
        submitter_pod_template=submitter_template(cluster, pod_labels),
        suspend=True if args.suspend else None,
        metadata=dict(args.job_metadata) or None,
    )
    metadata: ObjectMeta = {"name": args.name, "namespace": cluster.namespace,
                            "labels": {**pod_labels, **args.labels}}
    return BuiltRayJob(metadata=metadata, spec=spec)
