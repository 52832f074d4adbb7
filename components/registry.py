"""The Artifact Registry Docker repository for the trainer image, and the image itself.

``ImageRegistry`` creates (or adopts, ``create=False``) a Docker repository and grants
``roles/artifactregistry.reader`` on that repository only to the given members (the GKE
node service account, so kubelet can pull the image). Output: the image base URL
``<location>-docker.pkg.dev/<project>/<repository>``. ``TrainerImage`` builds
``workloads/Dockerfile`` with BuildKit and pushes it there, named by digest.
"""

from __future__ import annotations

import os
from typing import Any

import pulumi
from raytpu.components.gcp_resources import (
    ArtifactRegistryRepository,
    ArtifactRegistryRepositoryIamMember,
)
from raytpu.spec.registry import ImageRegistryArgs, TrainerImageArgs

READER_ROLE = "roles/artifactregistry.reader"




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


# -- the trainer image, built and pushed by the stack -----------------------------------

CLIENT_CONFIG_TOKEN = "gcp:organizations/getClientConfig:getClientConfig"
# Artifact Registry takes an OAuth access token as the password of this user
# (cloud.google.com/artifact-registry/docs/docker/authentication#token).
TOKEN_USER = "oauth2accesstoken"




def _project_path(path: str) -> str:
    """``path`` relative to the Pulumi project directory (where Pulumi.yaml is), whatever
    directory the program runs in (``main: deploy/``); unchanged where the engine names no
    project directory (the offline plan)."""
    root = pulumi.get_root_directory() if not os.path.isabs(path) else None
    return os.path.normpath(os.path.join(root, path)) if root else path


class TrainerImage(pulumi.ComponentResource):
    """The trainer image (workloads/Dockerfile) built with BuildKit (pulumi-docker-build) and
    pushed to the stack's Artifact Registry repository.

    :attr:`ref` names it by digest (``<repository>/<name>@sha256:...``), so every host of a
    slice, and every slice, runs the same bits whatever the tag later points to."""

    image: Any
    """The ``docker-build:index:Image`` resource."""
    ref: pulumi.Output[str]
    """``<repository url>/<name>@<digest>``."""

    def __init__(
        self, name: str, args: TrainerImageArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        import pulumi_docker_build as docker_build
        from pulumi_gcp import _utilities

        super().__init__("raytpu:registry:TrainerImage", name, None, opts)
        url = pulumi.Output.from_input(args.repository_url)
        token = pulumi.runtime.invoke_output(
            CLIENT_CONFIG_TOKEN, {},
            opts=pulumi.InvokeOutputOptions.merge(_utilities.get_invoke_opts_defaults(), None),
        ).apply(lambda r: r["accessToken"])
        self.image = docker_build.Image(
            f"{name}-build",
            docker_build.ImageArgs(
                push=True,
                tags=[url.apply(lambda u: f"{u}/{args.name}:{args.tag}")],
                context=docker_build.BuildContextArgs(location=_project_path(args.context)),
                dockerfile=docker_build.DockerfileArgs(location=_project_path(args.dockerfile)),
                platforms=[docker_build.Platform(args.platform)],
                registries=[docker_build.RegistryArgs(
                    address=url.apply(lambda u: u.split("/", 1)[0]),
                    username=TOKEN_USER,
                    password=pulumi.Output.secret(token),
                )],
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.ref = pulumi.Output.all(url, self.image.digest).apply(
            lambda v: f"{v[0]}/{args.name}@{v[1]}")
        self.register_outputs({"ref": self.ref})
