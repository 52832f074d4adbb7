"""A GKE cluster this program does not create: bring your own cluster.

``ExistingGkeCluster`` declares no GCP resource. It references a cluster by name and
location (``gcp.container.getCluster`` supplies the endpoint and CA for the kubeconfig), or
by the outputs of the Pulumi stack that owns it (:meth:`ExistingGkeClusterArgs.from_stack`),
and offers the same attributes :class:`~raytpu.components.GkeCluster` offers to the
components built on it: ``cluster_id`` and ``node_service_account_email`` for
:class:`~raytpu.components.TpuSlicePool`, ``provider`` for the KubeRay operator and the
RayCluster, ``node_service_account_member`` for the image registry, ``workload_pool``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from raytpu.components.gcp_resources import gke_cluster_lookup
from raytpu.components.kubeconfig import kubernetes_provider, render_kubeconfig
from raytpu.facts.names import LOCATION, PROJECT_ID, cluster_name_problem
from raytpu.facts.problems import args_error

# The outputs of a raytpu stack (``raytpu.program.stack.infra_outputs``) that name its cluster.
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
    location: pulumi.Input[str]
    """The cluster's zone (zonal cluster) or region (regional cluster)."""
    cluster_name: pulumi.Input[str]
    """GKE name of the cluster."""
    node_service_account: pulumi.Input[str]
    """Email of the service account the TPU node pools run as: a least-privilege account
    of the cluster's owner (never the Compute Engine default account)."""
    kubeconfig: pulumi.Input[str] | None = None
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
        stack: pulumi.StackReference,
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


def _api_server(cluster: dict[str, Any], dns: bool) -> str:
    if dns:
        configs = cluster.get("controlPlaneEndpointsConfigs") or [{}]
        endpoints = configs[0].get("dnsEndpointConfigs") or [{}]
        return str(endpoints[0].get("endpoint"))
    return str(cluster.get("endpoint"))


class ExistingGkeCluster(pulumi.ComponentResource):
    """A GKE cluster owned elsewhere, with the attributes of a :class:`GkeCluster` that
    the TPU pools, the KubeRay operator and the RayCluster consume."""

    cluster_id: pulumi.Output[str]
    """``projects/<p>/locations/<l>/clusters/<name>``: what node pools reference."""
    cluster_name: pulumi.Output[str]
    location: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    """Secret: the given kubeconfig or one rendered from the lookup."""
    provider: k8s.Provider
    """Kubernetes provider for everything deployed into the cluster."""
    node_service_account_email: pulumi.Output[str]
    node_service_account_member: pulumi.Output[str]
    workload_pool: str

    def __init__(
        self, name: str, args: ExistingGkeClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        if not isinstance(args, ExistingGkeClusterArgs):
            raise TypeError(f"ExistingGkeCluster {name!r}: args must be ExistingGkeClusterArgs, "
                            f"not {type(args)!r}")
        super().__init__("raytpu:gke:ExistingGkeCluster", name, None, opts)
        self.cluster_name = pulumi.Output.from_input(args.cluster_name)
        self.location = pulumi.Output.from_input(args.location)
        self.cluster_id = pulumi.Output.concat(
            "projects/", args.project, "/locations/", self.location, "/clusters/",
            self.cluster_name,
        )
        self.workload_pool = args.workload_pool
        self.node_service_account_email = pulumi.Output.from_input(args.node_service_account)
        self.node_service_account_member = self.node_service_account_email.apply(
            lambda email: f"serviceAccount:{email}"
        )
        if args.kubeconfig is not None:
            kubeconfig = pulumi.Output.from_input(args.kubeconfig)
        else:
            dns = args.dns_endpoint
            context = pulumi.Output.concat(
                "gke_", args.project, "_", self.location, "_", self.cluster_name
            )
            found = gke_cluster_lookup(args.cluster_name, args.location, args.project)
            kubeconfig = pulumi.Output.all(context, found).apply(
                lambda v: render_kubeconfig(
                    v[0], _api_server(v[1], dns),
                    None if dns else v[1]["masterAuths"][0]["clusterCaCertificate"],
                )
            )
        self.kubeconfig = pulumi.Output.secret(kubeconfig)
        self.provider = kubernetes_provider(
            f"{name}-k8s", self.kubeconfig, pulumi.ResourceOptions(parent=self)
        )
        self.register_outputs({
            "name": self.cluster_name,
            "location": self.location,
            "kubeconfig": self.kubeconfig,
            "nodeServiceAccountEmail": self.node_service_account_email,
            "workloadPool": self.workload_pool,
        })
