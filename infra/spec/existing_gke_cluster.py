"""Inputs of :class:`~raytpu.components.ExistingGkeCluster`: which cluster to adopt, and the
stack outputs that name it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from raytpu.facts.names import LOCATION, PROJECT_ID, cluster_name_problem
from raytpu.facts.problems import args_error
from raytpu.spec.inputs import Input, StackReference

STACK_OUTPUTS: Mapping[str, str] = {
    "cluster_name": "cluster_name",
    "location": "cluster_location",
    "kubeconfig": "kubeconfig",
    "node_service_account": "node_service_account",
}


@dataclass(frozen=True)
class ExistingGkeClusterArgs:
    """Inputs of :class:`ExistingGkeCluster`. Plain strings are checked here; outputs of
    other resources or stacks are taken as they come."""

    project: str
    """GCP project of the cluster; also names its Workload Identity pool."""
    location: Input[str]
    """The cluster's zone (zonal cluster) or region (regional cluster)."""
    cluster_name: Input[str]
    """GKE name of the cluster."""
    node_service_account: Input[str]
    """Email of the service account the TPU node pools run as: a least-privilege account
    of the cluster's owner (never the Compute Engine default account)."""
    kubeconfig: Input[str] | None = None
    """A kubeconfig for the cluster (a raytpu stack's secret ``kubeconfig`` output).
    ``None``: rendered from the cluster's lookup, with exec auth through
    ``gke-gcloud-auth-plugin``."""
    dns_endpoint: bool = False
    """Without ``kubeconfig``: reach the control plane through its DNS-based endpoint
    (which must allow outside traffic) instead of its IP endpoint."""

    @property
    def workload_pool(self) -> str:
        return f"{self.project}.svc.id.goog"

    def __post_init__(self) -> None:
        if not PROJECT_ID.match(self.project):
            raise args_error(self, "project", f"{self.project!r} is not a GCP "
                             "project ID")
        if isinstance(self.location, str) and not LOCATION.match(self.location):
            raise args_error(
                self, "location", f"{self.location!r} is neither a zone "
                "(us-central2-b) nor a region (us-central2)"
            )
        if isinstance(self.cluster_name, str):
            problem = cluster_name_problem(self.cluster_name)
            if problem:
                raise args_error(self, "cluster_name", problem)
        sa = self.node_service_account
        if isinstance(sa, str) and not (
            "@" in sa and sa.endswith(".gserviceaccount.com")
            and not sa.endswith("-compute@developer.gserviceaccount.com")
        ):
            raise args_error(
                self, "node_service_account", f"{sa!r} must be the email of a "
                "least-privilege service account (not the Compute Engine default one)"
            )

    @classmethod
    def from_stack(
        cls,
        stack: StackReference,
        project: str,
        outputs: Mapping[str, str] = STACK_OUTPUTS,
    ) -> ExistingGkeClusterArgs:
        """The cluster of another stack, from its outputs (by default a raytpu stack's:
        ``cluster_name``, ``cluster_location``, ``kubeconfig``, ``node_service_account``;
        ``outputs`` maps these fields to other output names)."""
        missing = sorted(set(STACK_OUTPUTS) - set(outputs))
        if missing:
            raise args_error(cls.__name__, "from_stack", f"outputs lacks {missing}")
        return cls(
            project=project,
            location=stack.require_output(outputs["location"]),
            cluster_name=stack.require_output(outputs["cluster_name"]),
            node_service_account=stack.require_output(outputs["node_service_account"]),
            kubeconfig=stack.require_output(outputs["kubeconfig"]),
        )
