"""The stack's RayCluster on TPU slices: Namespace, Workload Identity ServiceAccount, RayCluster
(one worker group per slice group), a GMP PodMonitoring and an optional internal load
balancer for the dashboard.

The rooms: inputs in :mod:`~raytpu.spec.ray_cluster`, their checks in
:mod:`~raytpu.components.ray_cluster_validation`, group shaping (the RayCluster spec) in
:mod:`~raytpu.components.ray_groups`, pod templates in
:mod:`~raytpu.components.ray_pod_templates`, environment in :mod:`~raytpu.components.ray_env`,
dashboard and token access in :mod:`~raytpu.components.ray_access`.
"""

from __future__ import annotations

from typing import Any

import pulumi
from raytpu.components._options import depends_on_of
from raytpu.components.k8s_objects import (
    ConfigMap,
    Namespace,
    Secret,
    Service,
    ServiceAccount,
    pod_security_labels,
)
from raytpu.components.monitoring import PodMonitoring, ray_pod_monitoring_spec
from raytpu.components.ray_access import auth_token_command, dashboard_command
from raytpu.components.ray_cluster_validation import args_problems, image_is_pinned
from raytpu.components.ray_gcs_ft import CA_KEY
from raytpu.components.ray_groups import group_summary, ray_cluster_spec
from raytpu.components.ray_pod_templates import HEAD_PORTS
from raytpu.components.ray_resources import RayCluster
from raytpu.facts import versions
from raytpu.facts.problems import ArgsError
from raytpu.spec.ray_cluster import TpuRayClusterArgs as TpuRayClusterArgs
from raytpu.spec.ray_cluster import TpuWorkerGroup as TpuWorkerGroup

GSA_ANNOTATION = "iam.gke.io/gcp-service-account"
ILB_ANNOTATION = "networking.gke.io/load-balancer-type"


class TpuRayCluster(pulumi.ComponentResource):
    """Namespace + Workload Identity KSA + RayCluster (+ optional internal LB)."""

    namespace: Namespace | None
    service_account: ServiceAccount
    redis_secret: Secret | None
    redis_ca: ConfigMap | None
    ray_cluster: RayCluster
    dashboard_lb: Service | None

    def __init__(
        self,
        name: str,
        args: TpuRayClusterArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        problems = args_problems(args)
        if problems:  # before registering anything, the component included
            raise ArgsError(problems)
        super().__init__("raytpu:ray:TpuRayCluster", name, None, opts)
        self.args = args
        if isinstance(args.image, str) and not image_is_pinned(args.image):
            pulumi.log.warn(f"Ray image {args.image!r} is not pinned to a version tag or "
                            "digest: nodes may run different images", resource=self)
        # Children do not inherit a component's dependsOn: the caller's (the operator charts,
        # so that CRDs and the TPU webhook exist first) are passed down explicitly.
        inherited = depends_on_of(opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=inherited)
        labels = {"app.kubernetes.io/part-of": "raytpu", **args.labels}

        self.namespace = None
        ns_name: pulumi.Input[str] = args.namespace
        if args.create_namespace:
            self.namespace = Namespace(
                f"{name}-ns",
                metadata={"name": args.namespace,
                          "labels": {**labels, **pod_security_labels()}},
                opts=child,
            )
            ns_name = self.namespace.metadata_name

        self.service_account = ServiceAccount(
            f"{name}-ksa",
            metadata={
                "name": args.service_account, "namespace": ns_name, "labels": labels,
                "annotations": {GSA_ANNOTATION: args.gsa_email},
            },
            # No token unless a pod asks for one in its own spec (the autoscaling head does):
            # Workload Identity needs none, and a pod that skips the API should carry none.
            fields={"automountServiceAccountToken": False},
            opts=child,
        )

        self.redis_secret, self.redis_ca = None, None
        ft = args.gcs_fault_tolerance
        if ft is not None and ft.password is not None:
            # The AUTH string lives here only: the RayCluster names the Secret's key.
            self.redis_secret = Secret(
                f"{name}-redis-auth",
                metadata={"name": ft.password_secret, "namespace": ns_name, "labels": labels},
                fields={"type": "Opaque", "stringData": {ft.password_key: ft.password}},
                opts=child)
        if ft is not None and ft.ca_cert is not None and ft.ca_config_map is not None:
            self.redis_ca = ConfigMap(
                f"{name}-redis-ca",
                metadata={"name": ft.ca_config_map, "namespace": ns_name, "labels": labels},
                fields={"data": {CA_KEY: ft.ca_cert}}, opts=child)

        spec = ray_cluster_spec(args, labels)
        ray_opts = pulumi.ResourceOptions(parent=self, depends_on=[
            *inherited, self.service_account,
            *(r for r in (self.redis_secret, self.redis_ca) if r is not None)])
        if args.autoscaling_enabled:
            # The autoscaler owns replicas once running; re-applying the initial count on
            # every `pulumi up` would fight it.
            ray_opts = pulumi.ResourceOptions.merge(
                ray_opts,
                pulumi.ResourceOptions(ignore_changes=["spec.workerGroupSpecs[*].replicas"]),
            )
        self.ray_cluster = RayCluster(
            f"{name}-raycluster",
            metadata={"name": args.cluster_name, "namespace": ns_name, "labels": labels},
            spec=spec,
            opts=ray_opts,
        )

        self.pod_monitoring: PodMonitoring | None = None
        if args.pod_monitoring:
            self.pod_monitoring = PodMonitoring(
                f"{name}-podmonitoring",
                metadata={"name": f"{args.cluster_name}-ray", "namespace": ns_name,
                          "labels": labels},
                spec=ray_pod_monitoring_spec(
                    args.cluster_name, port=next(n for n, p in HEAD_PORTS
                                                 if p == versions.Ports.RAY_METRICS)),
                opts=pulumi.ResourceOptions(parent=self,
                                            depends_on=[*inherited, self.service_account]),
            )

        self.dashboard_lb = None
        if args.dashboard_internal_lb:
            self.dashboard_lb = Service(
                f"{name}-dashboard-ilb",
                metadata={
                    "name": f"{args.cluster_name}-dashboard-ilb", "namespace": ns_name,
                    "labels": labels, "annotations": {ILB_ANNOTATION: "Internal"},
                },
                spec={
                    "type": "LoadBalancer",
                    "loadBalancerSourceRanges": list(args.access_cidrs),
                    # Client IPs reach the head unchanged, so the NetworkPolicy's
                    # rayAccessCidrs rule can match them (Cluster would SNAT to a node IP).
                    "externalTrafficPolicy": "Local",
                    "selector": {"ray.io/cluster": args.cluster_name, "ray.io/node-type": "head"},
                    "ports": [
                        {"name": n, "port": p, "targetPort": p}
                        for n, p in HEAD_PORTS if n in ("dashboard", "client")
                    ],
                },
                opts=pulumi.ResourceOptions(parent=self,
                                            depends_on=[*inherited, self.ray_cluster]),
            )

        self.outputs: dict[str, Any] = {
            "clusterName": args.cluster_name,
            "namespace": args.namespace,
            "headService": f"{args.cluster_name}-head-svc",
            "dashboardPortForward": dashboard_command(args.cluster_name, args.namespace),
            "authMode": args.auth,
            "authTokenCommand": (auth_token_command(args.cluster_name, args.namespace)
                                 if args.auth == "token" else None),
            "workerGroups": [group_summary(s) for s in args.worker_groups],
            "gcsFaultTolerance": ft is not None,
        }
        self.register_outputs(self.outputs)
