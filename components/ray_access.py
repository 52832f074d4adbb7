"""How a person reaches a stack's RayCluster: the dashboard port-forward and the Ray auth
token KubeRay keeps for ``authOptions.mode: token``."""

from __future__ import annotations

from raytpu.facts import versions


def dashboard_command(cluster_name: str, namespace: str) -> str:
    p = versions.Ports.RAY_DASHBOARD
    return f"kubectl -n {namespace} port-forward svc/{cluster_name}-head-svc {p}:{p}"


def auth_secret_name(cluster_name: str) -> str:
    """The Secret KubeRay generates for ``authOptions.mode: token``: ``utils.CheckName`` of
    the cluster name (its last 50 characters; a leading digit or '-' becomes 'r')."""
    s = cluster_name[-50:]
    return "r" + s[1:] if s[:1].isdigit() or s[:1] == "-" else s


def auth_token_command(cluster_name: str, namespace: str) -> str:
    """Shell that gives a Ray client (``ray job submit``, ``raytpu submit``) the token."""
    return (f"export RAY_AUTH_MODE=token RAY_AUTH_TOKEN=$(kubectl -n {namespace} get secret "
            f"{auth_secret_name(cluster_name)} -o jsonpath='{{.data.auth_token}}' | base64 -d)")
