"""Inputs of :class:`~raytpu.components.KubeRayOperator` and what follows from them alone:
the charts it installs, in order, and the webhook image's repository and tag."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from raytpu.facts import versions
from raytpu.facts.problems import ArgsError, args_error

Mode = Literal["helm", "gke-addon"]
MODES: tuple[str, ...] = ("helm", "gke-addon")

# The webhook chart (ai-on-gke/kuberay-tpu-webhook helm-chart/templates/deployment.yaml)
# creates its own Namespace from tpuWebhook.namespace.name: declaring it here too would give
# the object two owners.
WEBHOOK_NAMESPACE = "ray-system"
CERT_MANAGER_NAMESPACE = "cert-manager"

# RayMultiHostIndexing is on by default in KubeRay 1.7.0 (beta since 1.6, #4572); it is set
# explicitly, on or off, from the webhook image's ability to handle its labels (module docstring,
# point 3). Only this gate is passed: Helm replaces lists wholesale, and an explicit copy of the
# full default list would pin gates that a later KubeRay version may rename or drop (unknown
# gates make the operator exit).
MULTI_HOST_INDEXING_GATE = "RayMultiHostIndexing"


DEFAULT_OPERATOR_RESOURCES: Mapping[str, Any] = {
    # Chart default is a 100m/512Mi limit; ~500 Ray pods take ~500 MB (values.yaml comment).
    "requests": {"cpu": "100m", "memory": "512Mi"},
    "limits": {"cpu": "1", "memory": "1Gi"},
}


def _error(field: str, text: str) -> ArgsError:
    # Bare field names (``namespace: ...``): the Args' words since they were first refused.
    return args_error("", field, text)


@dataclass(frozen=True)
class KubeRayOperatorArgs:
    """Inputs of :class:`KubeRayOperator`."""

    mode: Mode = "helm"
    """``helm``: cert-manager, KubeRay and the TPU webhook from their charts;
    ``gke-addon``: GKE's Ray Operator add-on (``GkeClusterArgs.ray_operator_addon``)."""
    namespace: str = "kuberay-system"
    """Namespace of the KubeRay operator (created here in helm mode)."""
    kuberay_version: str = versions.KUBERAY_VERSION
    """KubeRay operator chart version (Helm mode)."""
    webhook_version: str = versions.CHARTS["kuberay-tpu-webhook"].version
    """KubeRay TPU webhook chart version (Helm mode)."""
    cert_manager_version: str = versions.CHARTS["cert-manager"].version
    """cert-manager chart version (the webhook's certificates)."""
    install_cert_manager: bool = True
    """False when the cluster already runs cert-manager (the webhook only needs its CRDs)."""
    operator_resources: Mapping[str, Any] = field(
        default_factory=lambda: dict(DEFAULT_OPERATOR_RESOURCES)
    )
    """Requests and limits of the KubeRay operator pod."""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    """Extra nodeSelector for the operator pods. Not needed to keep them off TPU nodes: those
    carry the ``google.com/tpu`` NoSchedule taint and the charts add no toleration."""
    webhook_image: str = versions.TPU_WEBHOOK_IMAGE.reference
    """TPU webhook image (``<repository>:<tag>[@<digest>]``), Helm mode."""
    multi_host_indexing: bool = versions.RAY_MULTI_HOST_INDEXING
    """KubeRay's RayMultiHostIndexing gate. Only with a webhook that handles its labels
    (``kuberay-tpu-webhook/v1.3.2`` or later); the default image does not."""
    addon_wait_image: str | None = None
    """GKE add-on mode: an image with ``python`` (the stack uses ``versions.RAY_IMAGE``) for the
    Job that waits for the add-on's CRDs. None: no wait (a first ``pulumi up`` may then fail on the
    RayCluster's kind and succeed when run again)."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise _error("mode", f"{self.mode!r} is not valid; valid: {', '.join(MODES)}")
        if self.multi_host_indexing and self.webhook_image == versions.TPU_WEBHOOK_IMAGE.reference:
            raise _error(
                "multi_host_indexing", f"the webhook image {self.webhook_image!r} predates "
                f"{versions.TPU_WEBHOOK_MULTIHOST_INDEXING_FIX}: with the gate on its podAffinity "
                "matches no pod and multi-host workers stay Pending")
        split_image(self.webhook_image)  # raises on a reference the chart cannot take
        if self.namespace in (WEBHOOK_NAMESPACE, CERT_MANAGER_NAMESPACE):
            # ray-system only exists once the webhook chart (installed after KubeRay) runs.
            raise _error("namespace", f"{self.namespace!r} belongs to another chart; use a "
                         "namespace of KubeRay's own (default kuberay-system)")


@dataclass(frozen=True)
class ChartRef:
    """A chart this component installs, in a form the plan tables and outputs can show."""

    component: str
    chart: str
    version: str
    repo: str
    namespace: str

    def to_dict(self) -> dict[str, str]:
        return {"component": self.component, "chart": self.chart, "version": self.version,
                "repo": self.repo, "namespace": self.namespace}


def split_image(reference: str) -> tuple[str, str]:
    """``repo:tag[@digest]`` -> (repo, ``tag[@digest]``): the chart renders ``repo:tag``."""
    name, at, digest = reference.partition("@")
    repo, colon, tag = name.rpartition(":")
    if not colon or not repo or "/" in tag or not tag:
        raise _error("webhook_image", f"{reference!r} needs a tag (<repository>:<tag>"
                     "[@sha256:...]): the webhook chart renders '<repository>:<tag>'")
    return repo, tag + at + digest


def feature_gates(args: KubeRayOperatorArgs) -> list[dict[str, Any]]:
    return [{"name": MULTI_HOST_INDEXING_GATE, "enabled": args.multi_host_indexing}]


def chart_refs(args: KubeRayOperatorArgs) -> list[ChartRef]:
    """The charts of ``args``, in install order (empty for the GKE add-on)."""
    if args.mode != "helm":
        return []
    cm, op, wh = (versions.CHARTS[k] for k in ("cert-manager", "kuberay-operator",
                                               "kuberay-tpu-webhook"))
    refs = [ChartRef("cert-manager", cm.chart, args.cert_manager_version, cm.repo,
                     CERT_MANAGER_NAMESPACE)] if args.install_cert_manager else []
    refs.append(ChartRef("kuberay-operator", op.chart, args.kuberay_version, op.repo,
                         args.namespace))
    refs.append(ChartRef("kuberay-tpu-webhook", wh.chart, args.webhook_version, wh.repo,
                         WEBHOOK_NAMESPACE))
    return refs
