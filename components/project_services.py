"""The Google APIs a stack needs, enabled before anything that calls them.

On a new project most APIs are off; the first ``pulumi up`` would otherwise fail with
"<API> has not been used in project ... or it is disabled". ``ProjectServices`` declares one
``gcp.projects.Service`` per API with ``disableOnDestroy: false``: destroying the stack never
turns an API off under other workloads of the project. Enabling APIs needs the Service Usage
API (``serviceusage.googleapis.com``), which new projects have on.

:func:`ProjectServices.transformation` makes every ``gcp:`` resource declared under a
component wait for the API its type belongs to (:data:`API_OF_TYPE`), so the components need
no extra Args; invokes (the GKE version lookup) take :attr:`ProjectServices.resources`.
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
from raytpu.components.gcp_resources import ProjectService
from raytpu.spec.project_services import ProjectServicesArgs

API_OF_TYPE: Mapping[str, str] = {
    "gcp:compute/": "compute.googleapis.com",
    "gcp:container/": "container.googleapis.com",
    "gcp:serviceaccount/": "iam.googleapis.com",
    "gcp:projects/iAMMember": "cloudresourcemanager.googleapis.com",
    "gcp:storage/": "storage.googleapis.com",
    "gcp:artifactregistry/": "artifactregistry.googleapis.com",
    "gcp:monitoring/": "monitoring.googleapis.com",
    "gcp:servicenetworking/": "servicenetworking.googleapis.com",
    "gcp:redis/": "redis.googleapis.com",
}


def api_of(type_token: str) -> str | None:
    """The API a resource of ``type_token`` needs, if it is one this package declares."""
    for prefix, api in API_OF_TYPE.items():
        if type_token.startswith(prefix):
            return api
    return None




class ProjectServices(pulumi.ComponentResource):
    """The project's enabled APIs, left enabled on destroy."""

    services: dict[str, ProjectService]
    """The Service resource of each API, by API name."""

    def __init__(
        self, name: str, args: ProjectServicesArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        if not isinstance(args, ProjectServicesArgs):
            raise TypeError(
                f"ProjectServices {name!r}: args must be ProjectServicesArgs, not {type(args)!r}"
            )
        super().__init__("raytpu:project:ProjectServices", name, None, opts)
        self.services = {
            api: ProjectService(
                f"{name}-{api.removesuffix('.googleapis.com').replace('.', '-')}",
                {
                    "project": args.project,
                    "service": api,
                    # Other workloads of the project may use the API too.
                    "disableOnDestroy": False,
                },
                pulumi.ResourceOptions(parent=self),
            )
            for api in args.services
        }
        self.register_outputs({"services": sorted(self.services)})

    @property
    def resources(self) -> list[pulumi.Resource]:
        """Every Service resource: what an invoke on the project must wait for."""
        return list(self.services.values())

    def depends_on_for(self, type_token: str) -> list[pulumi.Resource]:
        """The Service resource a resource of ``type_token`` must wait for (none if its API
        is not managed here)."""
        api = api_of(type_token)
        return [self.services[api]] if api in self.services else []

    def transformation(
        self, args: pulumi.ResourceTransformationArgs
    ) -> pulumi.ResourceTransformationResult | None:
        """For ``ResourceOptions(transformations=[...])`` of a component: each ``gcp:``
        resource under it waits for its API. Runs client-side, before registration."""
        deps = self.depends_on_for(args.type_)
        if not deps:
            return None
        opts = pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(depends_on=deps))
        return pulumi.ResourceTransformationResult(args.props, opts)
