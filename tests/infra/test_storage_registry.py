"""CheckpointStorage and ImageRegistry alone: private bucket, bucket-scoped roles only,
Workload Identity binding to one KSA; Docker repository with a repository-scoped reader."""

from __future__ import annotations

from typing import Any

import pytest
from infra_support import PROJECT, PROJECT_IAM, REGION, refused_alone, run_alone
from raytpu.components import (
    CheckpointStorage,
    CheckpointStorageArgs,
    ImageRegistry,
    ImageRegistryArgs,
)
from raytpu.plan.engine import PlanResult

BUCKET = "gcp:storage/bucket:Bucket"
REPO = "gcp:artifactregistry/repository:Repository"
REPO_IAM = "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"
NODE_MEMBER = f"serviceAccount:c-nodes@{PROJECT}.iam.gserviceaccount.com"


def storage_args(**kw: Any) -> CheckpointStorageArgs:
    base: dict[str, Any] = dict(
        project=PROJECT, bucket_name="acme-ckpt", location=REGION, namespace="ray",
        ksa_name="ray-workload", gsa_account_id="raytpu-ckpt",
    )
    return CheckpointStorageArgs(**{**base, **kw})


def plan_storage(**kw: Any) -> tuple[PlanResult, dict[str, Any]]:
    out: dict[str, Any] = {}

    def program() -> None:
        s = CheckpointStorage("ckpt", storage_args(**kw))
        s.bucket_url.apply(lambda v: out.update(url=v))
        s.ksa_annotations.apply(lambda v: out.update(annotations=v))

    return run_alone(program), out


def test_bucket_is_private_with_retention() -> None:
    plan, out = plan_storage(retention_days=14)
    b = plan.get(BUCKET, "ckpt-bucket")
    assert b.parent == "ckpt"
    i = b.inputs
    assert i["name"] == "acme-ckpt" and i["location"] == REGION
    assert i["uniformBucketLevelAccess"] is True
    assert i["publicAccessPrevention"] == "enforced"
    # Versioned; only noncurrent versions expire (test_first_up checks the rules).
    assert i["versioning"] == {"enabled": True}
    assert all(r["condition"]["withState"] == "ARCHIVED" for r in i["lifecycleRules"])
    assert i["forceDestroy"] is False
    assert out["url"] == "gs://acme-ckpt"


def test_versioning_also_expires_noncurrent_versions() -> None:
    plan, _ = plan_storage(force_destroy=True)
    i = plan.get(BUCKET, "ckpt-bucket").inputs
    assert i["versioning"] == {"enabled": True} and i["forceDestroy"] is True
    assert {"action": {"type": "Delete"},
            "condition": {"daysSinceNoncurrentTime": 30, "withState": "ARCHIVED"}} in (
        i["lifecycleRules"])


def test_gsa_bound_to_one_ksa_with_bucket_scoped_role_only() -> None:
    plan, out = plan_storage()
    gsa_email = f"raytpu-ckpt@{PROJECT}.iam.gserviceaccount.com"
    assert plan.get("gcp:serviceaccount/account:Account", "ckpt-gsa").inputs["accountId"] == (
        "raytpu-ckpt")
    wi = plan.get("gcp:serviceaccount/iAMMember:IAMMember", "ckpt-wi").inputs
    assert wi["role"] == "roles/iam.workloadIdentityUser"
    assert wi["member"] == f"serviceAccount:{PROJECT}.svc.id.goog[ray/ray-workload]"
    access = plan.get("gcp:storage/bucketIAMMember:BucketIAMMember", "ckpt-objects").inputs
    assert access == {"bucket": "acme-ckpt", "role": "roles/storage.objectUser",
                      "member": f"serviceAccount:{gsa_email}"}
    assert plan.by_type(PROJECT_IAM) == []  # nothing project-wide
    assert out["annotations"] == {"iam.gke.io/gcp-service-account": gsa_email}


@pytest.mark.parametrize(("kw", "message"), [
    ({"bucket_name": "Bad Bucket"}, r"bucket_name: 'Bad Bucket'"),
    ({"bucket_name": "google-ckpt"}, r"not starting with 'goog'"),
    ({"namespace": "Ray_NS"}, r"namespace: 'Ray_NS' is not a Kubernetes name"),
    ({"gsa_account_id": "ab"}, r"gsa_account_id: 'ab'"),
    ({"retention_days": 0}, r"retention_days: 0 must be >= 1"),
])
def test_bad_storage_args_are_refused(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        storage_args(**kw)


def registry_args(**kw: Any) -> ImageRegistryArgs:
    base: dict[str, Any] = dict(project=PROJECT, location=REGION, repository_id="raytpu",
                                readers=(NODE_MEMBER,))
    return ImageRegistryArgs(**{**base, **kw})


def plan_registry(**kw: Any) -> tuple[PlanResult, dict[str, Any]]:
    out: dict[str, Any] = {}

    def program() -> None:
        r = ImageRegistry("registry", registry_args(**kw))
        r.url.apply(lambda v: out.update(url=v))
        r.image("trainer", "v1").apply(lambda v: out.update(image=v))

    return run_alone(program), out


def test_registry_repository_and_reader() -> None:
    plan, out = plan_registry()
    repo = plan.get(REPO, "registry-repo")
    assert repo.parent == "registry"
    assert repo.inputs["format"] == "DOCKER"
    assert repo.inputs["repositoryId"] == "raytpu" and repo.inputs["location"] == REGION
    (grant,) = plan.by_type(REPO_IAM)
    assert grant.inputs == {"project": PROJECT, "location": REGION, "repository": "raytpu",
                            "role": "roles/artifactregistry.reader", "member": NODE_MEMBER}
    assert plan.by_type(PROJECT_IAM) == []
    base = f"{REGION}-docker.pkg.dev/{PROJECT}/raytpu"
    assert out == {"url": base, "image": f"{base}/trainer:v1"}


def test_existing_registry_only_grants() -> None:
    plan, out = plan_registry(create=False)
    assert plan.by_type(REPO) == []
    assert len(plan.by_type(REPO_IAM)) == 1
    assert out["url"] == f"{REGION}-docker.pkg.dev/{PROJECT}/raytpu"


@pytest.mark.parametrize(("kw", "message"), [
    ({"location": "us-west4-a"}, r"location: 'us-west4-a' is not a GCP region"),
    ({"repository_id": "Raytpu"}, r"repository_id: 'Raytpu'"),
])
def test_bad_registry_args_are_refused(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        registry_args(**kw)


def test_bad_components_register_nothing() -> None:
    errors: list[Exception] = []

    errors = refused_alone(
        lambda: CheckpointStorage("s", storage_args(bucket_name="x")),
        lambda: ImageRegistry("r", registry_args(repository_id="-x")),
    )
    assert all(isinstance(e, ValueError) for e in errors)
