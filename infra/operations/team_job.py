"""``raytpu submit --team T``: a Kueue-queued RayJob in team T's namespace, for the bundled
trainer or a user's own command alike, built by the one RayJob builder
(:func:`raytpu.components.ray_job.build_rayjob`) from the stack's RayCluster Args.

The RayJob brings its own RayCluster (head + the chosen slices, one worker group), which
Kueue admits as one gang (head, all slices and the submitter, or nothing) against the
team's ClusterQueue, through the ``default`` LocalQueue of the team's namespace:

* labels ``kueue.x-k8s.io/queue-name`` and ``kueue.x-k8s.io/priority-class`` (the team's
  ``priority``);
* ``suspend: true``: nothing starts before Kueue admits it; KubeRay allows suspending only
  with ``shutdownAfterJobFinishes: true``, which Kueue requires anyway (the cluster must give
  its quota back);
* ``activeDeadlineSeconds``: the team's ``jobDeadlineSeconds`` (default one day), counted
  by KubeRay from admission, so a stuck job cannot hold the quota forever;
* the image by digest, the one the stack's RayCluster runs: ``--image``, a digest-pinned
  ``raytpu:ray.image``, else the stack output ``image`` (what ``pulumi up`` pushed).

``--dry-run`` prints the object and contacts nothing (not even the Pulumi backend: an image
the stack builds then shows as a placeholder); otherwise it is created through the
official ``kubernetes`` client (imported lazily).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from raytpu.facts.names import IMAGE_DIGEST as DIGEST
from raytpu.spec.train_options import BadFlags

RAY_GROUP, RAY_VERSION, RAYJOB_PLURAL = "ray.io", "v1", "rayjobs"
TEAM_LABEL = "raytpu.io/team"


class ApplyError(RuntimeError):
    """The Kubernetes API refused the RayJob, or it or the stack's outputs are unreachable."""


@dataclasses.dataclass(frozen=True)
class TeamJob:
    team: str
    namespace: str
    name: str
    manifest: dict[str, Any]
    queue: dict[str, str]
    """Where Kueue queues it (the dry-run's ``queue``)."""


def max_worker_groups(submission_mode: str = "K8sJobMode") -> int:
    """Worker groups one Kueue-managed RayJob may have: Kueue v0.19 admits 18 PodSets
    (:data:`raytpu.facts.versions.KUEUE_MAX_POD_SETS`), less the head and, in K8sJobMode, the
    submitter Job (Kueue's own webhook counts only the head, so a K8sJobMode RayJob with 17
    groups would pass it and then fail the Workload's podSets maxItems). The one builder
    makes one group per job, well within it."""
    from raytpu.facts.versions import KUEUE_MAX_POD_SETS

    return KUEUE_MAX_POD_SETS - 1 - (1 if submission_mode == "K8sJobMode" else 0)


def job_name(run_name: str) -> str:
    """A RayJob name from the run name: a DNS label of at most the KubeRay limit."""
    from raytpu.facts.names import RAYJOB_NAME_MAX_LEN

    name = re.sub(r"[^a-z0-9-]+", "-", run_name.lower()).strip("-")[:RAYJOB_NAME_MAX_LEN]
    name = name.rstrip("-")
    if not name or not name[0].isalpha():
        raise BadFlags([f"--run-name: {run_name!r} does not give a RayJob name (a DNS label "
                        "starting with a letter)"])
    return name


def find_team(cfg: Any, name: str) -> Any:
    """The ``raytpu:teams`` entry ``name``; BadFlags naming ``--team`` otherwise."""
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
    t = find_team(cfg, team)
    if slice_group is None:
        usable = [g for g in t.slice_groups if t.quota.get(g) or t.borrowing.get(g)]
        return str((usable or t.slice_groups)[0])
    if slice_group not in t.slice_groups:
        raise BadFlags([f"--slice-group: team {team!r} has no quota on {slice_group!r}; its "
                        f"slice groups: {', '.join(t.slice_groups)}"])
    return slice_group


def check_fits(team: Any, group: str, slices: int) -> None:
    most = team.quota.get(group, 0) + team.borrowing.get(group, 0)
    if slices > most:
        raise BadFlags([
            f"--slices: {slices} slices of {group!r} can never be admitted for team "
            f"{team.name!r}: its quota {team.quota.get(group, 0)} + borrowing "
            f"{team.borrowing.get(group, 0)} = {most} (raytpu:teams)"])


def queue_of(cfg: Any, team: str) -> dict[str, str]:
    from raytpu.config.teams import LOCAL_QUEUE_NAME, cluster_queue_name, team_namespace

    t = find_team(cfg, team)
    return {"team": t.name, "namespace": team_namespace(t.name),
            "local_queue": LOCAL_QUEUE_NAME, "cluster_queue": cluster_queue_name(t.name),
            "priority": t.priority}


def job_image(cfg: Any, image: str | None, *, offline: bool) -> str:
    """The image a team RayJob runs, by digest: ``image`` (``--image``), a digest-pinned
    ``raytpu:ray.image``, else the stack output ``image``. ``offline`` (``--dry-run``): an
    image only the stack output knows is a placeholder naming where the digest comes from.
    Raises BadFlags for an image not pinned by digest, ApplyError when the output is
    unreadable."""
    if image is not None:
        if DIGEST not in image:
            raise BadFlags([f"--image: {image!r} is not pinned by digest ({DIGEST}...); every "
                            "host of a slice must run the same bits"])
        return image
    if cfg.ray.image and DIGEST in cfg.ray.image:
        return str(cfg.ray.image)
    if cfg.ray.image:
        raise BadFlags([f"--image: the stack's raytpu:ray.image {cfg.ray.image!r} is not pinned "
                        f"by digest; pin it ({DIGEST}...) or pass --image <ref>{DIGEST}..."])
    if offline:
        return str(cfg.built_image_placeholder("read at submit"))
    from raytpu.operations.stack_outputs import stack_output

    found = stack_output(cfg.stack, "image")
    if found is None or DIGEST not in found:
        raise ApplyError(
            f"cannot read the digest of the image of stack {cfg.stack!r} (pulumi stack output "
            f"image --stack {cfg.stack}: {found or 'no output'}); run `pulumi up` first, or pass "
            f"--image <ref>{DIGEST}...")
    return found


def team_rayjob(cfg: Any, team: str, *, group: str, slices: int, run_name: str,
                entrypoint: str, runtime_env: dict[str, Any], job_metadata: dict[str, str],
                image: str) -> TeamJob:
    """The RayJob running ``entrypoint`` for ``team`` on ``slices`` slices of ``group``, its
    cluster shaped as the stack's RayCluster shapes that group. Raises BadFlags."""
    from raytpu.components.kueue_objects import PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL
    from raytpu.components.ray_job import TpuRayJobArgs, build_rayjob
    from raytpu.config.team_rules import team_checkpoint_uri
    from raytpu.config.teams import LOCAL_QUEUE_NAME, TEAM_SERVICE_ACCOUNT, team_namespace
    from raytpu.facts.names import SYSTEM_POOL
    from raytpu.program.ray_cluster_config import cluster_args

    t = find_team(cfg, team)
    check_fits(t, group, slices)
    name = job_name(run_name)
    cluster = dataclasses.replace(
        cluster_args(cfg, gsa_email="", system_pool=SYSTEM_POOL, create_namespace=False,
                     image=image),
        namespace=team_namespace(t.name), service_account=TEAM_SERVICE_ACCOUNT,
        checkpoint_uri=team_checkpoint_uri(cfg, t),
        # The GCS Redis Secret lives in the stack's Ray namespace only.
        gcs_fault_tolerance=None)
    args = TpuRayJobArgs(
        name=name, cluster=cluster, group=group, slices=slices, entrypoint=entrypoint,
        runtime_env=runtime_env, job_metadata={**job_metadata, "team": t.name},
        labels={QUEUE_NAME_LABEL: LOCAL_QUEUE_NAME, PRIORITY_CLASS_LABEL: t.priority,
                TEAM_LABEL: t.name},
        suspend=True, shutdown_after_job_finishes=True,
        active_deadline_seconds=t.job_deadline_seconds)
    try:
        built = build_rayjob(args)
    except ValueError as e:
        raise BadFlags(str(e).splitlines()) from None
    return TeamJob(team=t.name, namespace=cluster.namespace, name=name,
                   manifest=built.manifest(), queue=queue_of(cfg, t.name))


def prepare_team_job(*, stack: str, stacks_dir: Any, team: str, slice_group: str | None,
                     slices: int | None, run_name: str, max_failures: int,
                     trainer: dict[str, Any], image: str | None = None,
                     dry_run: bool = False) -> TeamJob:
    """The bundled trainer as ``team``'s RayJob, the flags validated against the stack and
    its team. Raises BadFlags (ApplyError: the image digest cannot be read). ``slices``
    defaults to 1: the smallest job the queue can admit."""
    from raytpu.config.team_rules import team_checkpoint_uri
    from raytpu.operations.submit import build_submission, load_stack

    cfg = load_stack(stack, stacks_dir)  # BadFlags for a bad stack file or config
    group = team_slice_group(cfg, team, slice_group)
    sub = build_submission(
        stack=stack, stacks_dir=stacks_dir, slice_group=group,
        slices=1 if slices is None else slices, address="", run_name=run_name,
        max_failures=max_failures, trainer=trainer,
        storage_path=team_checkpoint_uri(cfg, find_team(cfg, team)), on_shared_cluster=False)
    n = int(sub.metadata["slices"])
    check_fits(find_team(cfg, team), group, n)  # every flag checked before the image is read
    job_name(run_name)
    return team_rayjob(cfg, team, group=group, slices=n, run_name=run_name,
                       entrypoint=sub.entrypoint, runtime_env=sub.runtime_env,
                       job_metadata=sub.metadata, image=job_image(cfg, image, offline=dry_run))


def prepare_team_command(*, stack: str, stacks_dir: Any, team: str, slice_group: str | None,
                         slices: int | None, run_name: str, max_failures: int, command: Any,
                         image: str | None = None,
                         dry_run: bool = False) -> tuple[TeamJob, dict[str, Any]]:
    """A user's command (:class:`raytpu.operations.own_code.Command`) as ``team``'s RayJob,
    and the submission's ``--dry-run`` view. The RayJob's submitter runs in the cluster, so
    the working directory goes to the team's checkpoint location first (``view
    ["working_dir"]["uri"]``, :func:`raytpu.operations.own_code.upload`). Raises BadFlags
    (ApplyError: the image digest cannot be read)."""
    from raytpu.config.team_rules import team_checkpoint_uri
    from raytpu.operations.own_code import runtime_env
    from raytpu.operations.submit import build_submission, load_stack
    from raytpu.spec.scaling import RUNTIME_ENV_VARS

    cfg = load_stack(stack, stacks_dir)
    group = team_slice_group(cfg, team, slice_group)
    storage = team_checkpoint_uri(cfg, find_team(cfg, team))
    sub = build_submission(
        stack=stack, stacks_dir=stacks_dir, slice_group=group,
        slices=1 if slices is None else slices, address="", run_name=run_name,
        max_failures=max_failures, storage_path=storage, command=command,
        on_shared_cluster=False)
    code = f"{storage}/{run_name}/code/{command.package.name}"
    env = runtime_env(command, base_env=dict(RUNTIME_ENV_VARS), working_dir=code)
    n = int(sub.metadata["slices"])
    check_fits(find_team(cfg, team), group, n)  # every flag checked before the image is read
    job_name(run_name)
    the_image = job_image(cfg, image, offline=dry_run)
    job = team_rayjob(cfg, team, group=group, slices=n,
                      run_name=run_name, entrypoint=sub.entrypoint, runtime_env=env,
                      job_metadata=sub.metadata, image=the_image)
    view = sub.to_dict() | {"address": None, "runtime_env": env, "image": the_image,
                            "queue": job.queue, "rayjob": job.manifest}
    view["working_dir"] = dict(view["working_dir"], uri=code)
    return job, view


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


def create_team_job(job: TeamJob, *, stack: str, kubeconfig: Any, context: str | None) -> str:
    """Create the RayJob in the stack's cluster (credentials as ``raytpu status`` finds
    them). Raises :class:`ApplyError`."""
    from raytpu.operations.status import StatusError, connect

    try:
        api_client, _ = connect(stack, kubeconfig, context)
    except StatusError as e:
        raise ApplyError(str(e)) from None
    return apply_team_job(job, api_client)
