"""The checkpoint bucket and the identity Ray pods use to write it.

``CheckpointStorage`` declares a private GCS bucket (uniform bucket-level access, public
access prevention enforced, object versioning) and a Google service account that the
Kubernetes service account of the Ray pods impersonates through Workload Identity.

Lifecycle: a live object is never deleted by age, because the latest checkpoint of a
paused run may be months old and an age rule would delete it. Old checkpoints become
noncurrent versions when Ray Train removes them (``num_to_keep``) or overwrites them; those
are deleted ``retention_days`` after that, and at most ``noncurrent_versions`` of them are
kept per object. The account gets ``roles/storage.objectUser`` on that bucket only: nothing
project-wide. The Kubernetes service account itself belongs to the Ray layer; annotate it
with :attr:`CheckpointStorage.ksa_annotations`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
from raytpu.components._options import depends_on_of
from raytpu.components.gcp_resources import (
    ServiceAccount,
    ServiceAccountIamMember,
    StorageBucket,
    StorageBucketIamMember,
)
from raytpu.facts.names import ACCOUNT_ID, K8S_NAME
from raytpu.facts.problems import args_error

_BUCKET = re.compile(r"^[a-z0-9][-a-z0-9_.]{1,61}[a-z0-9]$")
# Object prefixes the IAM condition quotes: no quote or backslash can end the CEL string.
_PREFIX = re.compile(r"^[a-z0-9][-a-z0-9_/]*/$")

BUCKET_ROLE = "roles/storage.objectUser"
WORKLOAD_IDENTITY_ROLE = "roles/iam.workloadIdentityUser"


def prefix_condition(bucket: str, prefix: str) -> dict[str, str]:
    """An IAM condition that limits a bucket-level grant to objects under ``prefix``: object
    operations match on the object's resource name, listing on the request's prefix
    (``storage.googleapis.com/objectListPrefix``; IAM Conditions attribute reference). A list
    without that prefix, and every bucket-level operation, is refused."""
    return {
        "title": f"objects under {prefix}"[:100],
        "description": f"only gs://{bucket}/{prefix}",
        "expression": (
            f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{prefix}") || '
            f'api.getAttribute("storage.googleapis.com/objectListPrefix", "")'
            f'.startsWith("{prefix}")'
        ),
    }


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
    workload_identity_depends_on: Sequence[pulumi.Resource] = ()
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


class CheckpointStorage(pulumi.ComponentResource):
    """A private checkpoint bucket and the Workload Identity GSA that may write it."""

    bucket: StorageBucket | None
    """None when the bucket exists already (``create_bucket=False``)."""
    bucket_name: pulumi.Output[str]
    bucket_url: pulumi.Output[str]
    """``gs://<bucket>``."""
    gsa: ServiceAccount
    gsa_email: pulumi.Output[str]
    ksa_annotations: pulumi.Output[dict[str, str]]
    """Annotation the Ray pods' Kubernetes service account needs
    (``iam.gke.io/gcp-service-account: <gsa email>``)."""

    def __init__(
        self, name: str, args: CheckpointStorageArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        if not isinstance(args, CheckpointStorageArgs):
            raise TypeError(
                f"CheckpointStorage {name!r}: args must be CheckpointStorageArgs, not "
                f"{type(args)!r}"
            )
        super().__init__("raytpu:storage:CheckpointStorage", name, None, opts)
        # Children do not inherit the component's dependsOn (the shared bucket's creator).
        child = pulumi.ResourceOptions(parent=self, depends_on=depends_on_of(opts))

        self.bucket = None
        if args.create_bucket:
            self.bucket = self._bucket(name, args, child)
            self.bucket_name = self.bucket.gcp_name
            self.bucket_url = self.bucket.url
        else:
            self.bucket_name = pulumi.Output.from_input(args.bucket_name)
            self.bucket_url = pulumi.Output.from_input(f"gs://{args.bucket_name}")

        self.gsa = ServiceAccount(
            f"{name}-gsa",
            {
                "accountId": args.gsa_account_id,
                "displayName": f"Ray checkpoints in gs://{args.bucket_name}"
                               + (f"/{args.object_prefix}" if args.object_prefix else ""),
                "project": args.project,
            },
            child,
        )
        self.gsa_email = self.gsa.email
        # Only the one KSA may act as this GSA.
        self.workload_identity = ServiceAccountIamMember(
            f"{name}-wi",
            {
                "serviceAccountId": self.gsa.gcp_name,
                "role": WORKLOAD_IDENTITY_ROLE,
                "member": args.workload_identity_member,
            },
            pulumi.ResourceOptions(
                parent=self, depends_on=list(args.workload_identity_depends_on) or None
            ),
        )
        # Read/write/list objects of this bucket; no bucket admin, nothing project-wide.
        self.bucket_access = StorageBucketIamMember(
            f"{name}-objects",
            {"bucket": self.bucket_name, "role": BUCKET_ROLE, "member": self.gsa.member,
             "condition": (prefix_condition(args.bucket_name, args.object_prefix)
                           if args.object_prefix else None)},
            child,
        )
        self.ksa_annotations = self.gsa.email.apply(
            lambda email: {"iam.gke.io/gcp-service-account": email}
        )
        self.register_outputs({
            "bucketName": self.bucket_name,
            "bucketUrl": self.bucket_url,
            "gsaEmail": self.gsa_email,
        })

    @staticmethod
    def _bucket(name: str, args: CheckpointStorageArgs,
                child: pulumi.ResourceOptions) -> StorageBucket:
        rules: list[dict[str, Any]] = []
        if args.versioning:
            # Conditions of one rule are ANDed, rules are ORed; both rules only ever match
            # noncurrent versions (withState ARCHIVED), never a live object.
            rules = [
                {"action": {"type": "Delete"}, "condition": {
                    "daysSinceNoncurrentTime": args.retention_days, "withState": "ARCHIVED",
                }},
                # numNewerVersions counts the live version too.
                {"action": {"type": "Delete"}, "condition": {
                    "numNewerVersions": args.noncurrent_versions + 1, "withState": "ARCHIVED",
                }},
            ]
        return StorageBucket(
            f"{name}-bucket",
            {
                "name": args.bucket_name,
                "project": args.project,
                "location": args.location,
                "uniformBucketLevelAccess": True,
                "publicAccessPrevention": "enforced",
                "versioning": {"enabled": args.versioning},
                "lifecycleRules": rules or None,
                "forceDestroy": args.force_destroy,
                "labels": dict(args.labels) or None,
            },
            child,
        )
