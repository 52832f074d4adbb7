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

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from raytpu.components.gcp_resources import gke_cluster_lookup
from raytpu.components.kubeconfig import kubernetes_provider, render_kubeconfig
from raytpu.spec.existing_gke_cluster import ExistingGkeClusterArgs

# The outputs of a raytpu stack (``raytpu.program.stack.infra_outputs``) that name its cluster.


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
