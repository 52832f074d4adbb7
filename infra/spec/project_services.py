"""Inputs of :class:`~raytpu.components.ProjectServices`: the project and the Google APIs to
enable in it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from raytpu.facts.problems import args_error

_API = re.compile(r"^[a-z][a-z0-9-]*(\.[a-z0-9-]+)*\.googleapis\.com$")

# The API each GCP resource type of this package calls (type token prefix -> service).


@dataclass(frozen=True)
class ProjectServicesArgs:
    """Inputs of :class:`ProjectServices`."""

    project: str
    """GCP project whose APIs are enabled."""
    services: Mapping[str, str] = field(default_factory=dict)
    """API name (``container.googleapis.com``) -> why the stack needs it."""

    def __post_init__(self) -> None:
        if not self.project:
            raise args_error(self, "project", "required")
        for api in self.services:
            if not _API.match(api):
                raise args_error(
                    self, "services", f"{api!r} is not a Google API name "
                    "(e.g. container.googleapis.com)"
                )
