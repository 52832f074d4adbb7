"""How ``raytpu status`` reaches the Kubernetes API: credentials and the reads it makes.

The official ``kubernetes`` client is imported only here, inside the command, so ``raytpu
plan`` never pays for it. Credentials: ``--kubeconfig``, else the stack output ``kubeconfig``
(``pulumi stack output kubeconfig --show-secrets``, when the Pulumi CLI is installed and the
stack selected), else the current kubectl context. What is read becomes a
:class:`raytpu.operations.status.ClusterSnapshot`; the view is computed from that alone.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raytpu.facts.names import NODEPOOL_LABEL

if TYPE_CHECKING:
    from raytpu.config.stack import StackConfig

RAY_CLUSTER_LABEL = "ray.io/cluster"
RAY_API = ("ray.io", "v1", "rayclusters")
KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta2"
TIMEOUT_S = 15


class StatusError(Exception):
    """The cluster could not be reached or read (one sentence for the user)."""


class NoKubeconfig(StatusError):
    """No credentials were found at all: the message says how to get them."""


def credentials_hint(cfg: StackConfig) -> str:
    """What to do when no kubeconfig names the cluster (docs/deploying.md)."""
    flag = " --dns-endpoint" if cfg.cluster.dns_endpoint else ""
    return (f"pass --kubeconfig FILE, or fetch credentials with `gcloud container clusters "
            f"get-credentials {cfg.cluster.name} --location {cfg.cluster_location} "
            f"--project {cfg.project}{flag}`")


@dataclass
class KubeReader:
    """Reads through the official client; any transport/auth failure is a StatusError."""

    api_client: Any
    _core: Any = field(init=False)
    _custom: Any = field(init=False)

    def __post_init__(self) -> None:
        from kubernetes import client

        self._core = client.CoreV1Api(self.api_client)
        self._custom = client.CustomObjectsApi(self.api_client)

    def _call(self, what: str, fn: Any, *args: Any, missing_ok: bool = False,
              **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            return fn(*args, _request_timeout=TIMEOUT_S, **kwargs)
        except ApiException as e:
            if missing_ok and e.status == 404:
                return None
            raise StatusError(f"reading {what}: HTTP {e.status} {e.reason}") from None
        except Exception as e:  # urllib3/socket/exec-plugin errors: the cluster is out of reach
            raise StatusError(f"reading {what}: {type(e).__name__}: {e}") from None

    def nodes(self) -> list[Any]:
        return list(self._call("nodes", self._core.list_node,
                               label_selector=NODEPOOL_LABEL).items)

    def ray_pods(self, namespace: str, cluster: str) -> list[Any]:
        return list(self._call(f"pods in {namespace}", self._core.list_namespaced_pod,
                               namespace, label_selector=f"{RAY_CLUSTER_LABEL}={cluster}").items)

    def kuberay_pods(self, namespace: str) -> list[Any]:
        """Every pod KubeRay made in ``namespace`` (a team's RayJobs' clusters)."""
        return list(self._call(f"pods in {namespace}", self._core.list_namespaced_pod,
                               namespace, label_selector=RAY_CLUSTER_LABEL).items)

    def events(self, namespace: str) -> list[Any]:
        """The namespace's events (the scheduler's, the kubelet's, KubeRay's Warnings)."""
        return list(self._call(f"events in {namespace}", self._core.list_namespaced_event,
                               namespace).items)

    def ray_clusters(self, namespace: str) -> list[dict[str, Any]]:
        group, version, plural = RAY_API
        found = self._call(f"RayClusters in {namespace}",
                           self._custom.list_namespaced_custom_object, group, version,
                           namespace, plural, missing_ok=True)
        return list((found or {}).get("items") or [])

    def ray_cluster(self, namespace: str, name: str) -> dict[str, Any] | None:
        group, version, plural = RAY_API
        found: dict[str, Any] | None = self._call(
            f"RayCluster {namespace}/{name}", self._custom.get_namespaced_custom_object,
            group, version, namespace, plural, name, missing_ok=True)
        return found

    def workloads(self, namespace: str) -> list[dict[str, Any]]:
        found = self._call(f"Kueue workloads in {namespace}",
                           self._custom.list_namespaced_custom_object, KUEUE_GROUP,
                           KUEUE_VERSION, namespace, "workloads", missing_ok=True)
        return list((found or {}).get("items") or [])

    def cluster_queues(self) -> list[dict[str, Any]]:
        found = self._call("Kueue ClusterQueues", self._custom.list_cluster_custom_object,
                           KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", missing_ok=True)
        return list((found or {}).get("items") or [])


def _stack_kubeconfig(stack: str) -> str | None:
    """The stack output ``kubeconfig``, when the Pulumi CLI can give it."""
    from raytpu.operations.stack_outputs import stack_output

    text = stack_output(stack, "kubeconfig", secret=True)
    return text if text is not None and text.startswith(("apiVersion", "{")) else None


def connect(stack: str, kubeconfig: Path | None, context: str | None) -> tuple[Any, str]:
    """An ApiClient and where its credentials came from; raises StatusError."""
    from kubernetes import config as kube_config

    try:
        if kubeconfig is not None:
            return (kube_config.new_client_from_config(str(kubeconfig), context=context),
                    f"--kubeconfig {kubeconfig}")
        text = _stack_kubeconfig(stack)
        if text is not None:
            with tempfile.TemporaryDirectory(prefix="raytpu-status-") as d:
                path = Path(d) / "kubeconfig"
                path.write_text(text)
                return (kube_config.new_client_from_config(str(path), context=context),
                        f"pulumi stack output kubeconfig (stack {stack})")
        return kube_config.new_client_from_config(context=context), "the current kubectl context"
    except Exception as e:  # ConfigException, missing file, bad YAML
        raise NoKubeconfig(f"no usable kubeconfig ({e})") from None
