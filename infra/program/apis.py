"""The Google APIs a stack enables (``raytpu:project.enableApis``), as data.

To extend: add a line to :data:`STACK_APIS` (the API and what needs it). A new ``gcp:``
resource type also needs its API in ``raytpu.components.project_services.API_OF_TYPE``, so
that it waits for the API; ``tests/infra/test_project_services.py`` checks both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pulumi

if TYPE_CHECKING:
    from raytpu.components.project_services import ProjectServices
    from raytpu.config.stack import StackConfig

# API -> why the stack needs it.
STACK_APIS: dict[str, str] = {
    "compute.googleapis.com": "VPC, subnet, Cloud Router + NAT, firewall rules; node VMs",
    "container.googleapis.com": "GKE cluster, node pools, the GKE version lookup",
    "iam.googleapis.com": "service accounts and their IAM bindings",
    "iamcredentials.googleapis.com": "Workload Identity: Ray pods get tokens of their GSA",
    "cloudresourcemanager.googleapis.com": "project IAM bindings of the node service account",
    "storage.googleapis.com": "the checkpoint bucket",
    "artifactregistry.googleapis.com": "the trainer image repository",
    "logging.googleapis.com": "GKE system and workload logs (the cluster's default)",
    "monitoring.googleapis.com": "GKE system metrics, managed Prometheus, the fleet dashboard "
                                 "and slice alert policy",
}


# Only for a stack that creates a Memorystore instance for the Ray GCS.
MEMORYSTORE_APIS: dict[str, str] = {
    "redis.googleapis.com": "the Memorystore instance the Ray GCS is kept in",
    "servicenetworking.googleapis.com": "private service access to that instance",
}


def stack_apis(cfg: StackConfig) -> dict[str, str]:
    """The APIs this stack enables; empty when ``raytpu:project.enableApis`` is false."""
    if not cfg.project_settings.enable_apis:
        return {}
    ft = cfg.ray.gcs_fault_tolerance
    return {**STACK_APIS, **(MEMORYSTORE_APIS if ft and ft.memorystore else {})}


def declare_project_services(cfg: StackConfig) -> ProjectServices | None:
    """Enable the stack's APIs (``None`` when the project's APIs are managed elsewhere)."""
    from raytpu.components.project_services import ProjectServices
    from raytpu.spec.project_services import ProjectServicesArgs

    apis = stack_apis(cfg)
    if not apis:
        return None
    return ProjectServices("apis", ProjectServicesArgs(project=cfg.project, services=apis))


def after_apis(services: ProjectServices | None) -> pulumi.ResourceOptions | None:
    """Options for a component: each ``gcp:`` resource under it waits for its API."""
    if services is None:
        return None
    return pulumi.ResourceOptions(transformations=[services.transformation])
