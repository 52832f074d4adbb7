"""The Artifact Registry Docker repository for the trainer image.

``ImageRegistry`` creates (or adopts, ``create=False``) a Docker repository and grants
``roles/artifactregistry.reader`` on that repository only to the given members (the GKE
node service account, so kubelet can pull the image). Output: the image base URL
``<location>-docker.pkg.dev/<project>/<repository>``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
from raytpu.components.gcp_resources import (
    ArtifactRegistryRepository,
    ArtifactRegistryRepositoryIamMember,
)
from raytpu.names import DNS_LABEL, REGION

READER_ROLE = "roles/artifactregistry.reader"


@dataclass(frozen=True)
class ImageRegistryArgs:
    """Inputs of :class:`ImageRegistry`."""

    project: str
    """GCP project of the repository."""
    location: str
    """Region of the repository (the cluster's region: pulls stay in-region)."""
    repository_id: str
    """Repository name (lowercase letters, digits, '-')."""
    readers: Sequence[pulumi.Input[str]] = ()
    """IAM members that may pull (``serviceAccount:<email>``), e.g. the node service
    account's ``member``."""
    create: bool = True
    """Create the repository; ``False``: it exists, only the reader grants are declared."""
    description: str = "raytpu trainer images"
    """Repository description."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Repository labels."""

    def __post_init__(self) -> None:
        if not self.project:
            raise ValueError("ImageRegistryArgs.project: required")
        if not REGION.match(self.location):
            raise ValueError(
                f"ImageRegistryArgs.location: {self.location!r} is not a GCP region "
                "(e.g. us-central2)"
            )
        if not DNS_LABEL.match(self.repository_id) or len(self.repository_id) > 63:
            raise ValueError(
                f"ImageRegistryArgs.repository_id: {self.repository_id!r} must be lowercase "
                "letters, digits and '-', starting with a letter (at most 63)"
            )


class ImageRegistry(pulumi.ComponentResource):
    """A Docker repository and its pull grants."""

    repository: ArtifactRegistryRepository | None
    """The repository (``None`` when adopted)."""
    url: pulumi.Output[str]
    """Image base URL: ``<location>-docker.pkg.dev/<project>/<repository>``."""
    reader_grants: list[ArtifactRegistryRepositoryIamMember]

    def __init__(
        self, name: str, args: ImageRegistryArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        if not isinstance(args, ImageRegistryArgs):
            raise TypeError(
                f"ImageRegistry {name!r}: args must be ImageRegistryArgs, not {type(args)!r}"
            )
        super().__init__("raytpu:registry:ImageRegistry", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        base = f"{args.location}-docker.pkg.dev/{args.project}/{args.repository_id}"

        repository_id: pulumi.Input[str]
        if args.create:
            self.repository = ArtifactRegistryRepository(
                f"{name}-repo",
                {
                    "repositoryId": args.repository_id,
                    "project": args.project,
                    "location": args.location,
                    "format": "DOCKER",
                    "description": args.description,
                    "labels": dict(args.labels) or None,
                },
                child,
            )
            repository_id = self.repository.repository_id
            # Ties consumers of the URL (images, pods) to the repository's creation.
            self.url = self.repository.repository_id.apply(lambda _: base)
        else:
            self.repository = None
            repository_id = args.repository_id
            self.url = pulumi.Output.from_input(base)

        self.reader_grants = [
            ArtifactRegistryRepositoryIamMember(
                f"{name}-reader-{i}",
                {
                    "project": args.project,
                    "location": args.location,
                    "repository": repository_id,
                    "role": READER_ROLE,
                    "member": member,
                },
                child,
            )
            for i, member in enumerate(args.readers)
        ]
        self.register_outputs({"url": self.url})

    def image(self, name: str, tag: str = "latest") -> pulumi.Output[str]:
        """Full reference of an image in this repository."""
        return self.url.apply(lambda base: f"{base}/{name}:{tag}")
