"""What a stack's teams derive from the whole stack (checkpoint locations, buckets, nominal
quotas), how each slice group's pools are split between the teams' quotas, the
``raytpu:jobs`` clusters and the shared RayCluster (:func:`shared_max_slices`), and the
checks no field type can make (:func:`team_problems`, with :func:`capacity_problems`), which
:func:`raytpu.config.validate.parse_stack_config` runs."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from raytpu.config.teams import (
    MEMBER_KINDS,
    RESERVED_NAMESPACE_PREFIXES,
    RESERVED_NAMESPACES,
    TEAM_NAME_MAX_LEN,
    TeamConfig,
)
from raytpu.facts.names import DNS_LABEL

if TYPE_CHECKING:
    from raytpu.config.stack import SliceGroupConfig, StackConfig

_EMAIL = re.compile(r"^[A-Za-z0-9._%+'-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")


def team_checkpoint_uri(cfg: StackConfig, team: TeamConfig) -> str:
    """Where a team's runs keep checkpoints: its prefix of the stack's bucket
    (``bucketAccess: prefix``) or a bucket of its own (``bucket``), which only its identity
    may write."""
    if team.bucket_access == "bucket":
        return f"gs://{team_bucket_name(cfg, team.name)}/runs"
    return f"gs://{cfg.bucket_name}/teams/{team.name}/runs"


def team_bucket_name(cfg: StackConfig, team: str) -> str:
    """The bucket of a team with ``bucketAccess: bucket``: the stack's bucket name plus the
    team's (GCS names are global; at most 63 characters, checked by :func:`team_problems`)."""
    return f"{cfg.bucket_name}-{team}"


def _member_problem(member: str) -> str | None:
    kind, sep, email = member.partition(":")
    if not sep or kind not in MEMBER_KINDS or not _EMAIL.match(email):
        kinds = ", ".join(f"{k}:EMAIL" for k in MEMBER_KINDS)
        return f"{member!r} is not an IAM member; write {kinds} (e.g. group:ml-vision@example.com)"
    return None


def _reserved_namespaces(cfg: StackConfig) -> set[str]:
    return {*RESERVED_NAMESPACES, cfg.ray.namespace, cfg.kuberay.namespace}


def _quota_problems(key: str, quota: dict[str, int],
                    groups: dict[str, tuple[int, SliceGroupConfig]], *, fleet_cap: bool
                    ) -> list[str]:
    problems: list[str] = []
    for group, slices in quota.items():
        if group not in groups:
            problems.append(f"{key}.{group}: unknown slice group; valid: {', '.join(groups)} "
                            "(the names of raytpu:slices)")
            continue
        i, s = groups[group]
        if fleet_cap and slices > s.max_slices:
            limit = "autoscaling.max" if s.autoscaling else "count"
            problems.append(
                f"{key}.{group}: {slices} slices, but the fleet never holds more than "
                f"{s.max_slices} (raytpu:slices[{i}].{limit}): a job needing them would "
                "never be admitted")
    return problems


def team_problems(cfg: StackConfig) -> list[str]:
    """Every ``raytpu:teams`` problem no field type can catch, each naming its key path."""
    problems: list[str] = []
    groups = {s.name: (i, s) for i, s in enumerate(cfg.slices)}
    reserved = _reserved_namespaces(cfg)
    seen: set[str] = set()
    for t, team in enumerate(cfg.teams):
        key = f"raytpu:teams[{t}]"
        name = team.name
        if not DNS_LABEL.match(name) or len(name) > TEAM_NAME_MAX_LEN:
            problems.append(
                f"{key}.name: {name!r} must be a DNS label (lowercase letters, digits, '-', "
                f"starting with a letter) of at most {TEAM_NAME_MAX_LEN} characters")
        elif name in reserved or name.startswith(RESERVED_NAMESPACE_PREFIXES):
            problems.append(
                f"{key}.name: {name!r} is the team's namespace and collides with a system "
                f"namespace (reserved: {', '.join(sorted(reserved))} and "
                f"{', '.join(p + '*' for p in RESERVED_NAMESPACE_PREFIXES)})")
        if name in seen:
            problems.append(f"{key}.name: {name!r} is used by another team; names must be unique")
        seen.add(name)
        for m, member in enumerate(team.members):
            problem = _member_problem(member)
            if problem:
                problems.append(f"{key}.members[{m}]: {problem}")
        if team.bucket_access == "bucket" and len(team_bucket_name(cfg, name)) > 63:
            problems.append(
                f"{key}.bucketAccess: the team's bucket {team_bucket_name(cfg, name)!r} would "
                "be longer than GCS's 63 characters; shorten the team name or "
                "raytpu:storage.bucket, or use bucketAccess: prefix")
        problems += _quota_problems(f"{key}.quota", team.quota, groups, fleet_cap=True)
        problems += _quota_problems(f"{key}.borrowing", team.borrowing, groups, fleet_cap=False)
    return problems + capacity_problems(cfg)


def nominal_slices(cfg: StackConfig) -> dict[str, int]:
    """Per slice group: the slices all teams' nominal quotas add up to."""
    out: dict[str, int] = {}
    for team in cfg.teams:
        for group, slices in team.quota.items():
            out[group] = out.get(group, 0) + slices
    return out


def job_slices(cfg: StackConfig) -> dict[str, int]:
    """Per slice group: the slices the ``raytpu:jobs`` RayJobs' own RayClusters hold, each at
    its slices (they may all run at once)."""
    groups = {s.name: s for s in cfg.slices}
    out: dict[str, int] = {}
    for job in cfg.jobs:
        if job.slice_group in groups:  # else job_problems says so
            n = job.slices or groups[job.slice_group].initial_slices or 1
            out[job.slice_group] = out.get(job.slice_group, 0) + n
    return out


def shared_max_slices(cfg: StackConfig, s: SliceGroupConfig) -> int:
    """Slices of group ``s`` the stack's shared RayCluster may hold: its node pools less what
    the teams' nominal quotas and the ``raytpu:jobs`` clusters hold. Kueue admits by quota
    alone and cannot count the shared cluster's slices (nor the jobs', which are not
    queued), so the pools are split: the teams' nominal slices (borrowing only moves nominal
    quota between them, within the cohort), the jobs' and the shared cluster's rest never
    exceed the pools together (the double booking :func:`capacity_problems` refuses)."""
    return s.max_slices - nominal_slices(cfg).get(s.name, 0) - job_slices(cfg).get(s.name, 0)


def _too_full(s: SliceGroupConfig, reserved: int) -> bool:
    """Whether an elastic group's pools, less ``reserved`` slices held outside the shared
    RayCluster, leave it fewer than it starts with (or none)."""
    left = s.max_slices - reserved
    return s.initial_slices > left or left < 1


def _job_problems(cfg: StackConfig) -> list[str]:
    """``raytpu:jobs`` on a fixed group, or more than an elastic group's pools leave."""
    out: list[str] = []
    index = {s.name: i for i, s in enumerate(cfg.slices)}
    nominal, jobs = nominal_slices(cfg), job_slices(cfg)
    crowded: set[str] = set()  # an elastic group over its pools is said once, at its first job
    for j, job in enumerate(cfg.jobs):
        if job.slice_group not in index or job.slice_group in crowded:
            continue
        i = index[job.slice_group]
        s = cfg.slices[i]
        reserved = nominal.get(s.name, 0) + jobs[s.name]
        if not s.autoscaling:
            out.append(
                f"raytpu:jobs[{j}].sliceGroup: {s.name!r} is a fixed group "
                f"(raytpu:slices[{i}].count: {s.count}, no autoscaling): the shared "
                f"RayCluster (raytpu:ray) always holds all its {s.max_slices} node pool(s), "
                "so the job's own RayCluster would wait for them forever. Make the group "
                f"elastic (raytpu:slices[{i}].autoscaling: {{min: 0, max: "
                f"{reserved + s.count}}})")
        elif _too_full(s, reserved):
            crowded.add(s.name)
            out.append(
                f"raytpu:jobs[{j}].slices: the raytpu:jobs clusters on {s.name!r} hold "
                f"{jobs[s.name]} slice(s) and the teams' nominal quotas "
                f"{nominal.get(s.name, 0)}, with the {s.initial_slices} the shared RayCluster "
                f"starts with more than the group's {s.max_slices} node pools "
                f"(raytpu:slices[{i}].autoscaling.max): a job's cluster could find no pool "
                f"free. Raise autoscaling.max to at least "
                f"{reserved + max(s.initial_slices, 1)}")
    return out


def capacity_problems(cfg: StackConfig) -> list[str]:
    """Slice groups whose pools cannot hold the teams' nominal quotas, the ``raytpu:jobs``
    clusters and what the shared RayCluster holds, each with the key, its value and the
    pools' capacity."""
    out: list[str] = _job_problems(cfg)
    nominal, jobs = nominal_slices(cfg), job_slices(cfg)
    for i, s in enumerate(cfg.slices):
        total = nominal.get(s.name, 0)
        if not total or jobs.get(s.name):
            continue  # with jobs on the group too, _job_problems has the numbers
        owners = ", ".join(f"{t.name} {t.quota[s.name]}" for t in cfg.teams
                           if t.quota.get(s.name))
        head = (f"raytpu:teams: nominal quotas on slice group {s.name!r} add up to {total} "
                f"slice(s) ({owners})")
        if not s.autoscaling:
            # A fixed group's pools are all the shared RayCluster's (replicas = count, it
            # never scales down), so a team job admitted on them can never schedule.
            out.append(
                f"{head}, but the group is fixed (raytpu:slices[{i}].count: {s.count}, no "
                f"autoscaling): the shared RayCluster (raytpu:ray) always holds all its "
                f"{s.max_slices} node pool(s) outside Kueue's quotas, so a team job admitted "
                "there would wait for nodes it keeps. Make the group elastic "
                f"(raytpu:slices[{i}].autoscaling: {{min: 0, max: {total + s.count}}}), or "
                "keep teams' quotas off it")
            continue
        if _too_full(s, total):
            need = total + max(s.initial_slices, 1)
            out.append(
                f"{head} and the shared RayCluster (raytpu:ray) starts with "
                f"{s.initial_slices} (raytpu:slices[{i}].count: {s.count}), but the group has "
                f"{s.max_slices} node pools (raytpu:slices[{i}].autoscaling.max: "
                f"{s.max_slices}): Kueue admits by quota alone, so a team job could be "
                f"admitted with no pool free. Raise autoscaling.max to at least {need}, or "
                "lower the quotas; the shared RayCluster may scale to autoscaling.max less "
                f"the teams' {total}")
    return out
