"""Inputs of :class:`~raytpu.components.CheckpointStorage` and their validation."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from raytpu.facts.names import ACCOUNT_ID, K8S_NAME
from raytpu.facts.problems import args_error
from raytpu.spec.inputs import Resource

_BUCKET = re.compile(r"^[a-z0-9][-a-z0-9_.]{1,61}[a-z0-9]$")
# Object prefixes the IAM condition quotes: no quote or backslash can end the CEL string.
_PREFIX = re.compile(r"^[a-z0-9][-a-z0-9_/]*/$")


@dataclass(frozen=True)
class CheckpointStorageArgs:
    """Inputs of :class:`CheckpointStorage`."""

    project: str
    """GCP project of the bucket and the service account."""
    bucket_name: str
    """Globally unique bucket name."""
    location: str
    """Bucket location: the cluster's region keeps checkpoint traffic in-region."""
    namespace: str
    """Kubernetes namespace of the Ray pods."""
    ksa_name: str
    """Kubernetes service account of the Ray pods (created by the Ray layer)."""
    gsa_account_id: str
    """Account id of the Google service account (6-30 characters)."""
    retention_days: int = 30
    """Noncurrent (deleted or overwritten) versions are deleted this many days after they
    became noncurrent. Live objects are never expired."""
    noncurrent_versions: int = 1
    """At most this many noncurrent versions are kept per object (older ones are deleted
    before ``retention_days``)."""
    versioning: bool = True
    """Keep deleted/overwritten objects as noncurrent versions. Without it a deletion is
    final, so the bucket gets no lifecycle rule at all (only Ray deletes checkpoints)."""
    force_destroy: bool = False
    """Let ``pulumi destroy`` delete a non-empty bucket (dev only)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Bucket labels."""
    object_prefix: str | None = None
    """Grant only on objects under this prefix (``teams/a/``), through an IAM condition on
    the bucket; None: the whole bucket."""
    create_bucket: bool = True
    """False: ``bucket_name`` is an existing bucket (e.g. the stack's, shared by teams with
    ``object_prefix``): only the account and its grant are declared. Pass what creates the
    bucket in ``ResourceOptions.depends_on``."""
    workload_identity_depends_on: Sequence[Resource] = ()
    """What the Workload Identity binding must wait for: the GKE cluster, whose creation
    creates the ``<project>.svc.id.goog`` identity pool (IAM refuses a member of a pool that
    does not exist yet: "Identity Pool does not exist")."""

    @property
    def workload_identity_member(self) -> str:
        return f"serviceAccount:{self.project}.svc.id.goog[{self.namespace}/{self.ksa_name}]"

    def __post_init__(self) -> None:
        if not self.project:
            raise args_error(self, "project", "required")
        if (
            not _BUCKET.match(self.bucket_name)
            or self.bucket_name.startswith("goog")
            or ".." in self.bucket_name
        ):
            raise args_error(
                self, "bucket_name", f"{self.bucket_name!r} is not a valid bucket "
                "name (3-63 lowercase letters, digits, '-', '_', '.'; not starting with 'goog')"
            )
        if not self.location:
            raise args_error(self, "location", "required")
        for what, value in (("namespace", self.namespace), ("ksa_name", self.ksa_name)):
            if not K8S_NAME.match(value) or len(value) > 63:
                raise args_error(
                    self, what, f"{value!r} is not a Kubernetes name"
                )
        if not ACCOUNT_ID.match(self.gsa_account_id):
            raise args_error(
                self, "gsa_account_id", f"{self.gsa_account_id!r} must be 6-30 "
                "lowercase letters, digits or '-', starting with a letter"
            )
        if self.object_prefix is not None and not _PREFIX.match(self.object_prefix):
            raise args_error(
                self, "object_prefix", f"{self.object_prefix!r} must be "
                "lowercase letters, digits, '-', '_', '/' and end with '/'"
            )
        if self.retention_days < 1:
            raise args_error(
                self, "retention_days", f"{self.retention_days} must be >= 1"
            )
        if self.noncurrent_versions < 0:
            raise args_error(
                self, "noncurrent_versions", f"{self.noncurrent_versions} must "
                "be >= 0"
            )
