"""``raytpu submit --team T``: the trainer as a Kueue-queued RayJob in team T's namespace.

The RayJob brings its own RayCluster (head + the chosen slices, one worker group), which
Kueue admits as one gang (head, all slices and the submitter, or nothing) against the
team's ClusterQueue, through the ``default`` LocalQueue of the team's namespace:

* labels ``kueue.x-k8s.io/queue-name`` and ``kueue.x-k8s.io/priority-class`` (the team's
  ``priority``);
* ``suspend: true``: nothing starts before Kueue admits it (Kueue unsuspends on admission,
  whatever the value); KubeRay allows suspending only with ``shutdownAfterJobFinishes:
  true``, which Kueue requires anyway (the cluster must give its quota back);
* no autoscaling (Kueue v0.19 refuses ``enableInTreeAutoscaling`` without elastic
  workloads): the worker group is fixed at the requested slices;
* a hardened K8sJobMode submitter whose requests are those Kueue counts for the team's
  CPU/memory quota (:mod:`raytpu.program.kueue_program`).

The cluster spec is rendered by the same component as the stack's RayCluster
(:class:`~raytpu.components.tpu_ray_cluster.TpuRayCluster`), under the offline plan's mocks,
so there is one builder of Ray pods. ``--dry-run`` prints the object; otherwise it is created
through the official ``kubernetes`` client (imported lazily).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import yaml
from raytpu.facts.names import NODEPOOL_LABEL, SYSTEM_POOL
from raytpu.workloads.train_options import BadFlags

# KubeRay 1.7.0 utils.MaxRayJobNameLength: the RayCluster it creates is "<job>-<5 chars>",
# within MaxRayClusterNameLength (53).
MAX_JOB_NAME = 47
RAY_GROUP, RAY_VERSION, RAYJOB_PLURAL = "ray.io", "v1", "rayjobs"
SUBMISSION_MODE = "K8sJobMode"
TEAM_LABEL = "raytpu.io/team"


@dataclasses.dataclass(frozen=True)
class TeamJob:
    team: str
    namespace: str
    name: str
    manifest: dict[str, Any]


def max_worker_groups(submission_mode: str = SUBMISSION_MODE) -> int:
    """Worker groups one Kueue-managed RayJob may have: Kueue v0.19 admits 18 PodSets
    (:data:`raytpu.facts.versions.KUEUE_MAX_POD_SETS`), less the head and, in K8sJobMode, the
    submitter Job (Kueue's own webhook counts only the head, so a K8sJobMode RayJob with 17
    groups would pass it and then fail the Workload's podSets maxItems)."""
    from raytpu.facts.versions import KUEUE_MAX_POD_SETS

    return KUEUE_MAX_POD_SETS - 1 - (1 if submission_mode == "K8sJobMode" else 0)


def job_name(run_name: str) -> str:
    """A RayJob name from the run name: a DNS label of at most :data:`MAX_JOB_NAME`."""
    name = re.sub(r"[^a-z0-9-]+", "-", run_name.lower()).strip("-")[:MAX_JOB_NAME].rstrip("-")
    if not name or not name[0].isalpha():
        raise BadFlags([f"--run-name: {run_name!r} does not give a RayJob name (a DNS label "
                        "starting with a letter)"])
    return name


def _team(cfg: Any, name: str) -> Any:
    teams = {t.name: t for t in cfg.teams}
    if not teams:
        raise BadFlags([f"--team: stack {cfg.stack!r} declares no raytpu:teams; submit to its "
                        "RayCluster without --team"])
    if name not in teams:
        raise BadFlags([f"--team: {name!r} is not a team of stack {cfg.stack!r}; valid: "
                        f"{', '.join(teams)}"])
    return teams[name]


def team_slice_group(cfg: Any, team: str, slice_group: str | None) -> str:
    """The slice group a team job runs on (default: the team's first with quota, else with
    borrowing); BadFlags if the team has no quota or borrowing on it."""
    t = _team(cfg, team)
    if slice_group is None:
        usable = [g for g in t.slice_groups if t.quota.get(g) or t.borrowing.get(g)]
        return str((usable or t.slice_groups)[0])
    if slice_group not in t.slice_groups:
        raise BadFlags([f"--slice-group: team {team!r} has no quota on {slice_group!r}; its "
                        f"slice groups: {', '.join(t.slice_groups)}"])
    return slice_group


def _check_fits(team: Any, group: str, slices: int) -> None:
    most = team.quota.get(group, 0) + team.borrowing.get(group, 0)
    if slices > most:
        raise BadFlags([
            f"--slices: {slices} slices of {group!r} can never be admitted for team "
            f"{team.name!r}: its quota {team.quota.get(group, 0)} + borrowing "
            f"{team.borrowing.get(group, 0)} = {most} (raytpu:teams)"])


def _cluster_spec(stack: str, raw: dict[str, Any], cfg: Any, team: Any, group: Any,
                  slices: int, name: str) -> dict[str, Any]:
    """The RayCluster spec of the job, as :class:`TpuRayCluster` renders it (offline)."""
    from raytpu.components.ray_cluster_validation import args_problems
    from raytpu.components.tpu_ray_cluster import TpuRayCluster, TpuWorkerGroup
    from raytpu.config.team_rules import team_checkpoint_uri
    from raytpu.config.teams import TEAM_SERVICE_ACCOUNT, team_namespace
    from raytpu.plan.engine import run_program
    from raytpu.program.ray_cluster_config import cluster_args

    fixed = TpuWorkerGroup(name=group.name, shape=group.shape, min_slices=slices,
                           max_slices=slices, initial_slices=slices)
    args = dataclasses.replace(
        cluster_args(cfg, gsa_email="team-gsa", system_pool=SYSTEM_POOL, create_namespace=False),
        # KubeRay names the job's cluster "<job>-<5 characters>": its pod names are checked.
        cluster_name=f"{name}-xxxxx", namespace=team_namespace(team.name),
        service_account=TEAM_SERVICE_ACCOUNT, worker_groups=[fixed],
        checkpoint_uri=team_checkpoint_uri(cfg, team), autoscaling=False,
        dashboard_internal_lb=False, pod_monitoring=False)
    problems = [str(p) for p in args_problems(args)]
    if len(args.worker_groups) > max_worker_groups():
        problems.append(f"--slice-group: {len(args.worker_groups)} worker groups, more than "
                        f"the {max_worker_groups()} Kueue admits in one RayJob")
    if problems:
        raise BadFlags(problems)
    def program() -> None:
        TpuRayCluster("job", args)

    result = run_program(stack, raw, program)
    (cluster,) = [r for r in result.resources if r.type == "kubernetes:ray.io/v1:RayCluster"]
    return dict(cluster.inputs["spec"])


def submitter_template(image: str, system_pool: str = SYSTEM_POOL) -> dict[str, Any]:
    """The K8sJobMode submitter pod: KubeRay's default container (it fills in the command),
    hardened for the restricted Pod Security Standard, with KubeRay's default resources
    (what Kueue counts for it)."""
    from raytpu.components.ray_pod_templates import (
        container_security_context,
        pod_security_context,
    )
    from raytpu.program.kueue_program import SUBMITTER_REQUESTS

    return {"spec": {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,  # it only talks to the Ray dashboard
        "nodeSelector": {NODEPOOL_LABEL: system_pool},
        "securityContext": pod_security_context(),
        "containers": [{
            "name": "ray-job-submitter",
            "image": image,
            "resources": {"requests": dict(SUBMITTER_REQUESTS),
                          "limits": {"cpu": "1", "memory": "1Gi"}},
            "securityContext": container_security_context(read_only_root=False),
        }],
    }}


def build_team_job(*, stack: str, raw: dict[str, Any], cfg: Any, team: str,
                   submission: Any) -> TeamJob:
    """The RayJob of ``submission`` (:class:`raytpu.operations.submit.Submission`) for
    ``team``. Raises :class:`BadFlags`."""
    from raytpu.components.kueue_objects import PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL
    from raytpu.config.teams import LOCAL_QUEUE_NAME, team_namespace

    t = _team(cfg, team)
    groups = {s.name: s for s in cfg.slices}
    group = groups[submission.extra["slice_group"]]
    slices = int(submission.metadata["slices"])
    _check_fits(t, group.name, slices)
    name = job_name(submission.metadata["run_name"])
    namespace = team_namespace(t.name)
    spec: dict[str, Any] = {
        "suspend": True,
        "shutdownAfterJobFinishes": True,
        "submissionMode": SUBMISSION_MODE,
        "entrypoint": submission.entrypoint,
        "runtimeEnvYAML": yaml.safe_dump(submission.runtime_env, sort_keys=True),
        "metadata": dict(submission.metadata, team=t.name),
        "submitterPodTemplate": submitter_template(submission.extra["image"]),
        "rayClusterSpec": _cluster_spec(stack, raw, cfg, t, group, slices, name),
    }
    manifest = {
        "apiVersion": f"{RAY_GROUP}/{RAY_VERSION}", "kind": "RayJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {
            QUEUE_NAME_LABEL: LOCAL_QUEUE_NAME, PRIORITY_CLASS_LABEL: t.priority,
            TEAM_LABEL: t.name, "app.kubernetes.io/part-of": "raytpu"}},
        "spec": spec,
    }
    return TeamJob(team=t.name, namespace=namespace, name=name, manifest=manifest)


class ApplyError(RuntimeError):
    """The Kubernetes API refused the RayJob or could not be reached."""


def apply_team_job(job: TeamJob, api_client: Any) -> str:
    """Create the RayJob through the official client; returns ``<namespace>/<name>``."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    api = client.CustomObjectsApi(api_client)
    try:
        api.create_namespaced_custom_object(RAY_GROUP, RAY_VERSION, job.namespace,
                                            RAYJOB_PLURAL, job.manifest, _request_timeout=30)
    except ApiException as e:
        if e.status == 409:
            raise ApplyError(f"RayJob {job.namespace}/{job.name} exists already; pick another "
                             "--run-name or delete it (kubectl -n "
                             f"{job.namespace} delete rayjob {job.name})") from None
        raise ApplyError(f"creating RayJob {job.namespace}/{job.name}: HTTP {e.status} "
                         f"{e.reason}: {_api_message(e)}") from None
    except Exception as e:  # connection refused, auth plugin errors
        raise ApplyError(f"creating RayJob {job.namespace}/{job.name}: {type(e).__name__}: {e}"
                         ) from None
    return f"{job.namespace}/{job.name}"


def _api_message(e: Any) -> str:
    import json

    try:
        return str(json.loads(e.body).get("message", "")).strip()
    except (TypeError, ValueError, AttributeError):
        return str(e.body or "").strip()


def prepare_team_job(*, stack: str, stacks_dir: Any, team: str, slice_group: str | None,
                     slices: int | None, run_name: str, max_failures: int,
                     trainer: dict[str, Any]) -> TeamJob:
    """Validate the flags against the stack and its team, and render the RayJob. Raises
    :class:`BadFlags`. ``slices`` defaults to 1: the smallest job the queue can admit."""
    from raytpu.config.file import load_stack_file
    from raytpu.config.team_rules import team_checkpoint_uri
    from raytpu.operations.submit import build_submission, load_stack

    cfg = load_stack(stack, stacks_dir)  # BadFlags for a bad stack file or config
    group = team_slice_group(cfg, team, slice_group)
    t = _team(cfg, team)
    sub = build_submission(
        stack=stack, stacks_dir=stacks_dir, slice_group=group,
        slices=1 if slices is None else slices, address="", run_name=run_name,
        max_failures=max_failures, trainer=trainer, storage_path=team_checkpoint_uri(cfg, t))
    return build_team_job(stack=stack, raw=load_stack_file(stack, stacks_dir), cfg=cfg,
                          team=team, submission=sub)


def create_team_job(job: TeamJob, *, stack: str, kubeconfig: Any, context: str | None) -> str:
    """Create the RayJob in the stack's cluster (credentials as ``raytpu status`` finds
    them). Raises :class:`ApplyError`."""
    from raytpu.operations.status import StatusError, connect

    try:
        api_client, _ = connect(stack, kubeconfig, context)
    except StatusError as e:
        raise ApplyError(str(e)) from None
    return apply_team_job(job, api_client)
