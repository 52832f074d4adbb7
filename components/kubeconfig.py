"""Kubeconfig for a GKE cluster, authenticated through ``gke-gcloud-auth-plugin``."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s


def render_kubeconfig(context: str, endpoint: str, ca_certificate: str | None) -> str:
    """A kubeconfig that authenticates through ``gke-gcloud-auth-plugin`` (no static token).

    ``ca_certificate`` ``None``: the DNS-based endpoint, whose certificate is publicly
    trusted (not signed by the cluster CA), as ``gcloud container clusters get-credentials
    --dns-endpoint`` writes it."""
    import yaml

    cluster: dict[str, Any] = {"server": f"https://{endpoint}"}
    if ca_certificate is not None:
        cluster = {"certificate-authority-data": ca_certificate, **cluster}
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": cluster}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "current-context": context,
        "preferences": {},
        "users": [{
            "name": context,
            "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": "gke-gcloud-auth-plugin",
                "installHint": "Install gke-gcloud-auth-plugin: gcloud components install "
                               "gke-gcloud-auth-plugin",
                "provideClusterInfo": True,
            }},
        }],
    }
    return yaml.safe_dump(doc, sort_keys=False)


def kubernetes_provider(
    name: str, kubeconfig: pulumi.Input[str], opts: pulumi.ResourceOptions | None = None
) -> k8s.Provider:
    """The Kubernetes provider every raytpu component deploys through."""
    return k8s.Provider(
        name,
        kubeconfig=kubeconfig,
        # The KubeRay CRDs (RayJob: 1.39 MB) exceed the last-applied annotation limit of
        # client-side apply. Server-side is the v4 default; explicit so no env flips it.
        enable_server_side_apply=True,
        opts=opts,
    )
