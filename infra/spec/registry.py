"""Inputs of :class:`~raytpu.components.ImageRegistry` and
:class:`~raytpu.components.TrainerImage` and their validation."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from raytpu.facts.names import DNS_LABEL, REGION
from raytpu.facts.problems import args_error
from raytpu.spec.inputs import Input


@dataclass(frozen=True)
class ImageRegistryArgs:
    """Inputs of :class:`ImageRegistry`."""

    project: str
    """GCP project of the repository."""
    location: str
    """Region of the repository (the cluster's region: pulls stay in-region)."""
    repository_id: str
    """Repository name (lowercase letters, digits, '-')."""
    readers: Sequence[Input[str]] = ()
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
            raise args_error(self, "project", "required")
        if not REGION.match(self.location):
            raise args_error(
                self, "location", f"{self.location!r} is not a GCP region "
                "(e.g. us-central2)"
            )
        if not DNS_LABEL.match(self.repository_id) or len(self.repository_id) > 63:
            raise args_error(
                self, "repository_id", f"{self.repository_id!r} must be lowercase "
                "letters, digits and '-', starting with a letter (at most 63)"
            )


@dataclass(frozen=True)
class TrainerImageArgs:
    """Inputs of :class:`TrainerImage`."""

    repository_url: Input[str]
    """``<location>-docker.pkg.dev/<project>/<repository>`` (:attr:`ImageRegistry.url`)."""
    name: str = "raytpu"
    """Image name in the repository."""
    tag: str = "latest"
    """Tag pushed with the image (for people); pods use the digest."""
    context: str = "."
    """Build context: the repository root (the Dockerfile copies pyproject.toml, infra/,
    components/, workloads/ from it), relative to the Pulumi project's directory."""
    dockerfile: str = "workloads/Dockerfile"
    """The Dockerfile, relative to the Pulumi project's directory."""
    platform: str = "linux/amd64"
    """TPU VMs are x86-64."""

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z0-9]+([._-][a-z0-9]+)*", self.name):
            raise args_error(self, "name", f"{self.name!r} is not an image name")
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", self.tag):
            raise args_error(self, "tag", f"{self.tag!r} is not a Docker tag")
