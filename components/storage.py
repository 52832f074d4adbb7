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

from typing import Any

import pulumi
from raytpu.components._options import depends_on_of
from raytpu.components.gcp_resources import (
    ServiceAccount,
    ServiceAccountIamMember,
    StorageBucket,
    StorageBucketIamMember,
)
from raytpu.spec.storage import CheckpointStorageArgs

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
