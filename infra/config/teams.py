"""``raytpu:teams``: research teams sharing the stack's TPU slices through Kueue.

One typed model per team (:class:`TeamConfig`) and the names every team object derives
from (:func:`team_namespace`, :func:`cluster_queue_name`, ...); the checks no field type can
make are in :mod:`raytpu.config.team_rules`. A stack without ``raytpu:teams`` has no
team, no queue and no quota: one shared RayCluster, as before.

Where quotas come from: ``quota`` counts slices of a ``raytpu:slices`` entry (by its
``name``); Kueue gets them as ``google.com/tpu`` chips of that entry's ResourceFlavor
(slices x chips per slice). ``borrowing`` is how many more slices the team may take from
quota other teams leave idle.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field
from raytpu.config.base import ConfigModel
from raytpu.facts.versions import KUEUE_NAMESPACE

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

SliceCount = Annotated[int, Field(ge=0)]

# A team RayJob's activeDeadlineSeconds unless its entry sets jobDeadlineSeconds: a stuck job
# (a host that never comes up, a hung collective) gives its Kueue quota back within a day.
# Runs resume from their checkpoints, so a longer run is resubmitted with the same run name.
DEFAULT_JOB_DEADLINE_SECONDS = 24 * 3600


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
    job_deadline_seconds: int = Field(DEFAULT_JOB_DEADLINE_SECONDS, ge=1, le=2**31 - 1)
    """``activeDeadlineSeconds`` of the team's RayJobs: KubeRay fails a job this long after
    Kueue admits it (reason ``DeadlineExceeded``, never retried) and deletes its cluster, so
    the quota it holds (TPU slices included) is released."""

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


# A LocalQueue named "default" is the one Kueue puts a job in when it has no
# kueue.x-k8s.io/queue-name label (kueue pkg/controller/constants DefaultLocalQueueName,
# jobframework/defaults.go): an unlabelled RayJob in a team namespace is still queued.
LOCAL_QUEUE_NAME = "default"
