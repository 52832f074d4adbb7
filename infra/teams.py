"""``raytpu:teams``: research teams sharing the stack's TPU slices through Kueue.

One typed model per team (:class:`TeamConfig`), the names every team object derives from
(:func:`team_namespace`, :func:`cluster_queue_name`, ...) and the checks no field type can
make (:func:`team_problems`, :func:`team_warnings`), which :func:`raytpu.config.parse_stack_config`
runs with the rest of the stack. A stack without ``raytpu:teams`` has no team, no queue
and no quota: one shared RayCluster, as before.

Where quotas come from: ``quota`` counts slices of a ``raytpu:slices`` entry (by its
``name``); Kueue gets them as ``google.com/tpu`` chips of that entry's ResourceFlavor
(slices x chips per slice). ``borrowing`` is how many more slices the team may take from
quota other teams leave idle.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from .config_base import ConfigModel
from .names import DNS_LABEL
from .versions import KUEUE_NAMESPACE

if TYPE_CHECKING:
    from .config import SliceGroupConfig, StackConfig

Priority = Literal["low", "default", "high"]
PRIORITIES: tuple[Priority, ...] = ("low", "default", "high")
BucketAccess = Literal["prefix", "bucket"]

# A team name is a namespace name and a stem of the team's other objects (11b's service
# accounts, whose ids are at most 30 characters), so it is kept short.
TEAM_NAME_MAX_LEN = 30

# Namespaces a team may not take: Kubernetes' and GKE's own, and those this stack's
# components install into (the Ray and KubeRay namespaces come from the stack's config).
RESERVED_NAMESPACES = frozenset({
    "default", "kube-system", "kube-public", "kube-node-lease", KUEUE_NAMESPACE,
    "cert-manager", "ray-system", "config-management-system", "istio-system",
})
RESERVED_NAMESPACE_PREFIXES = ("kube-", "gke-", "gmp-")

# IAM member syntax of who may submit (cloud.google.com/iam/docs/principal-identifiers):
# the three kinds GKE RBAC can bind (a Google Group needs GKE's Google Groups for RBAC;
# user and service-account emails are Kubernetes users).
MEMBER_KINDS = ("user", "group", "serviceAccount")
_EMAIL = re.compile(r"^[A-Za-z0-9._%+'-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")

SliceCount = Annotated[int, Field(ge=0)]


class TeamConfig(ConfigModel):
    """One entry of ``raytpu:teams``: a research team sharing the stack's TPU slices."""

    name: str
    """DNS label of at most 30 characters: the team's namespace, ClusterQueue and
    service accounts derive from it."""
    members: list[str] = Field(min_length=1)
    """Who may submit, in IAM member syntax (``group:ml@example.com``, ``user:...``,
    ``serviceAccount:...``)."""
    quota: dict[str, SliceCount] = Field(min_length=1)
    """Nominal quota: slices per slice group (a ``raytpu:slices`` entry's ``name``)."""
    borrowing: dict[str, SliceCount] = {}
    """How many more slices per slice group the team may borrow from idle quota."""
    priority: Priority = "default"
    """The Kueue WorkloadPriorityClass of the team's jobs."""
    bucket_access: BucketAccess = "prefix"
    """``prefix``: the team's own prefix of the stack's checkpoint bucket; ``bucket``: a
    bucket of its own."""

    @property
    def slice_groups(self) -> list[str]:
        """Slice groups the team may use: nominal quota or borrowing, in declaration order."""
        return list(dict.fromkeys([*self.quota, *self.borrowing]))


def team_namespace(team: str) -> str:
    """The namespace of team ``team``'s RayJobs, LocalQueue, service account and RBAC."""
    return team


def cluster_queue_name(team: str) -> str:
    """The team's Kueue ClusterQueue (cluster-scoped; named after the team)."""
    return team


TEAM_SERVICE_ACCOUNT = "ray-team"
"""The Kubernetes service account a team's Ray pods run as, in the team's namespace (bound
to the team's Google service account through Workload Identity)."""


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


# A LocalQueue named "default" is the one Kueue puts a job in when it has no
# kueue.x-k8s.io/queue-name label (kueue pkg/controller/constants DefaultLocalQueueName,
# jobframework/defaults.go): an unlabelled RayJob in a team namespace is still queued.
LOCAL_QUEUE_NAME = "default"


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
    return problems


def nominal_slices(cfg: StackConfig) -> dict[str, int]:
    """Per slice group: the slices all teams' nominal quotas add up to."""
    out: dict[str, int] = {}
    for team in cfg.teams:
        for group, slices in team.quota.items():
            out[group] = out.get(group, 0) + slices
    return out


def team_warnings(cfg: StackConfig) -> list[str]:
    """Quotas the fleet can hold per team but not all at once (over-subscription)."""
    out: list[str] = []
    for i, s in enumerate(cfg.slices):
        total = nominal_slices(cfg).get(s.name, 0)
        if total and s.min_slices:
            key = "autoscaling.min" if s.autoscaling else "count"
            out.append(
                f"raytpu:teams: the stack's shared RayCluster (raytpu:ray) always holds "
                f"{s.min_slices} slice(s) of {s.name!r} (raytpu:slices[{i}].{key}) outside "
                "Kueue's quotas: team jobs admitted there wait for nodes it keeps; make the "
                "group elastic with autoscaling.min: 0, or keep teams off it")
        if total > s.max_slices:
            owners = ", ".join(f"{t.name} {t.quota[s.name]}" for t in cfg.teams
                               if s.name in t.quota)
            out.append(
                f"raytpu:teams: nominal quotas on slice group {s.name!r} add up to {total} "
                f"slices ({owners}), more than the fleet's {s.max_slices} "
                f"(raytpu:slices[{i}]): Kueue may admit jobs that then wait for nodes")
    return out
