"""Pinned versions, chart coordinates and ports: declared once, used everywhere.

Bumping a version here changes the plan (and so the committed plan snapshots), which is
how a reviewer sees an upgrade in a pull request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Ray: one version for the package's workloads extra (pyproject.toml), the container
# image (workloads/Dockerfile) and the RayCluster's rayVersion. tests/ check they agree.
RAY_VERSION = "2.60.0"
RAY_IMAGE = f"rayproject/ray:{RAY_VERSION}-py311"
# The user rayproject/ray images run as (ray-project/ray docker/base-deps/Dockerfile:
# `ARG RAY_UID=1000`, `ARG RAY_GID=100`, `useradd ... ray --uid $RAY_UID --gid $RAY_GID`,
# `USER $RAY_UID`, `ENV HOME=/home/ray`); workloads/Dockerfile keeps that user.
RAY_UID = 1000
RAY_GID = 100  # the image's `users` group
RAY_HOME = "/home/ray"
# Pod Security Standard the Ray namespaces enforce (`pod-security.kubernetes.io/enforce`):
# the strictest level the Ray pods pass (kubernetes.io/docs/concepts/security/
# pod-security-standards). Other namespaces of Ray pods (team namespaces) use it too.
POD_SECURITY_LEVEL = "restricted"
TORCH_VERSION = "2.9.0"
TORCH_XLA_VERSION = "2.9.0"
# The newest JAX PyPI serves for Python 3.11 (`pip index versions jax`, Dec 2026). Its
# jax[tpu] pins libtpu 0.0.42.*, torch_xla[tpu] 2.9.0 pins libtpu 0.0.21: one environment
# holds one libtpu, so the trainer image is built for one framework (workloads/Dockerfile
# TPU_FRAMEWORK), while the CPU wheels of both live side by side in the workloads extra.
JAX_VERSION = "0.10.2"

# Pulumi: the SDK pinned in pyproject.toml and the CLI the workflows install
# (pulumi/actions `pulumi-version`). CLI and SDK are released together under one version,
# and the plugins `pulumi up` uses follow the SDK versions in the venv. tests/ check all three.
PULUMI_VERSION = "3.272.0"

# KubeRay 1.7.0 supports Ray >= 2.38 ("don't use Ray 2.11.0 - 2.37.0", Ray upgrade guide).
KUBERAY_VERSION = "1.7.0"
MIN_RAY_VERSION_FOR_KUBERAY = "2.38.0"
RAY_API_VERSION = "ray.io/v1"
# Ray token authentication: Ray >= 2.52.0, and RayCluster.spec.authOptions from KubeRay 1.5.1
# (docs.ray.io "Configure Ray clusters to use token authentication").
MIN_RAY_VERSION_FOR_TOKEN_AUTH = "2.52.0"
MIN_KUBERAY_VERSION_FOR_AUTH_OPTIONS = "1.5.1"


# Kueue (raytpu:teams): the chart (CHARTS["kueue"]), its controller image (the chart's
# values.yaml at the git tag names a staging image; the release job rewrites it to this one,
# hack/helm-chart-package.sh), the API the stack writes (v1beta2: the storage version since
# 0.16; v1beta1 is still served but deprecated) and the release namespace of the docs.
KUEUE_VERSION = "0.19.2"
KUEUE_IMAGE = "registry.k8s.io/kueue/kueue"
KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
KUEUE_NAMESPACE = "kueue-system"
# A Workload has at most 18 PodSets (kueue v0.19.2 pkg/controller/jobframework/constants.go
# MaxPodSets; Workload CRD podSets maxItems=18). A RayJob's PodSets: the head, one per worker
# group and, in K8sJobMode (KubeRay's default submissionMode), the submitter Job.
KUEUE_MAX_POD_SETS = 18


@dataclass(frozen=True)
class HelmChart:
    chart: str
    version: str
    repo: str
    """Helm repository URL, or an ``oci://`` registry path (then ``chart`` is its last segment)."""


CHARTS: dict[str, HelmChart] = {
    "cert-manager": HelmChart("cert-manager", "v1.19.1", "https://charts.jetstack.io"),
    "kuberay-operator": HelmChart(
        "kuberay-operator", KUBERAY_VERSION, "https://ray-project.github.io/kuberay-helm/"
    ),
    # ai-on-gke/kuberay-tpu-webhook chart 0.3.1 = webhook 1.3.1 (KubeRay >= 1.4 compatible).
    "kuberay-tpu-webhook": HelmChart(
        "kuberay-tpu-webhook",
        "0.3.1",
        "oci://us-docker.pkg.dev/ai-on-gke/kuberay-tpu-webhook-helm",
    ),
    # Kueue's chart, published with each release (site/content/en/docs/installation).
    "kueue": HelmChart("kueue", KUEUE_VERSION, "oci://registry.k8s.io/kueue/charts"),
}



# The local control plane of `raytpu rehearse`: each component built from its Go module at
# this version (raytpu.rehearse.build), into a cache outside the repository. Kubernetes and
# Kueue match the libraries of the operators the stacks pin (KubeRay 1.7.0 and Kueue 0.19.2
# build against k8s.io 0.36); etcd >= 3.5.13 has the RequestWatchProgress that
# kube-apiserver >= 1.35 requires.
@dataclass(frozen=True)
class GoComponent:
    """One component of the rehearsal's control plane and how its binaries are built."""

    name: str
    """The cache folder's prefix (``<name>-<version>``)."""
    module: str
    """The Go module the binaries come from."""
    version: str
    """The module's version (a Go version, ``v`` first)."""
    binaries: tuple[str, ...]
    """What the build leaves in the component's ``bin/``."""
    recipe: Literal["install", "wrapper", "kubernetes"]
    """``install``: ``go install PKG@VERSION``; ``wrapper``: a module of our own requiring
    it (its go.mod has replace directives, which ``go install`` refuses); ``kubernetes``: a
    wrapper that also replaces every staging module pinned at ``v0.0.0``."""
    packages: tuple[str, ...]
    """The main packages, one per binary."""


KUBERNETES_VERSION = "1.36.3"
# The module proxy lists ray-operator v1.7.0 but refuses its download (403 "not available",
# 2026-12-05); v1.5.0 is the newest it serves. The stacks keep KUBERAY_VERSION: the
# rehearsal says which operator it ran and what 1.5.0 lacks (docs/rehearsal.md).
REHEARSAL_KUBERAY_VERSION = "1.5.0"
_KR = "github.com/ray-project/kuberay/ray-operator"
REHEARSAL_COMPONENTS: tuple[GoComponent, ...] = (
    GoComponent("etcd", "go.etcd.io/etcd/server/v3", "v3.6.13", ("etcd",), "wrapper",
                ("go.etcd.io/etcd/server/v3",)),
    GoComponent("kubernetes", "k8s.io/kubernetes", f"v{KUBERNETES_VERSION}",
                ("kube-apiserver", "kube-controller-manager", "kube-scheduler"), "kubernetes",
                tuple(f"k8s.io/kubernetes/cmd/{b}" for b in
                      ("kube-apiserver", "kube-controller-manager", "kube-scheduler"))),
    GoComponent("kwok", "sigs.k8s.io/kwok", "v0.8.0", ("kwok",), "install",
                ("sigs.k8s.io/kwok/cmd/kwok",)),
    GoComponent("ray-operator", _KR, f"v{REHEARSAL_KUBERAY_VERSION}", ("ray-operator",),
                "install", (_KR,)),
    GoComponent("kueue", "sigs.k8s.io/kueue", f"v{KUEUE_VERSION}", ("kueue",), "install",
                ("sigs.k8s.io/kueue/cmd/kueue",)),
)



@dataclass(frozen=True)
class TpuWebhookImage:
    """A build of the KubeRay TPU webhook and whether it handles KubeRay's multi-host labels."""

    repository: str
    tag: str
    digest: str
    handles_multihost_indexing: bool
    """Whether its podAffinity works with KubeRay's ``RayMultiHostIndexing`` labels."""
    source: str

    @property
    def reference(self) -> str:
        return f"{self.repository}:{self.tag}@{self.digest}"


# The webhook image (Helm mode) and the KubeRay feature gate are one choice:
#
# * With RayMultiHostIndexing on (KubeRay 1.7.0's default), pods carry KubeRay's
#   ray.io/worker-group-replica-index + ray.io/replica-host-index labels. The webhook before
#   ai-on-gke/kuberay-tpu-webhook f82f9b4 (#24, 2026-04-03; tags v1.3.2 .. v1.3.5) then skips
#   its own `replicaIndex` label yet still injects a *required* podAffinity on
#   `replicaIndex In [<group>-<i>]` (main.go mutatePod / injectAffinity at f82f9b4^): no pod
#   matches, so every multi-host worker stays Pending.
# * The only published image, v1.3.1-gke.2 (chart 0.3.1's default at every tag up to v1.3.5,
#   commit 5da78aa, 2026-02-13), predates that fix; the repository names no later build
#   (helm-chart/values.yaml, deployments/deployment.yaml, Makefile, cloudbuild.yaml at ef658db).
# * So Helm mode turns the gate off: the webhook takes its fallback path (its own replicaIndex
#   label and TPU_WORKER_ID bookkeeping, the path every KubeRay < 1.5 used) and its affinity
#   matches. Costs: KubeRay no longer deletes and recreates a multi-host replica as a unit
#   (raycluster_controller.go: reconcileMultiHostWorkerGroup runs only with the gate), and the
#   fallback's informer handshake never matches before ef658db (#29: lastAdmitted is keyed
#   with the replica number, the check with the "<group>-<n>" label), so each TPU pod admission
#   waits the webhook's 1 s timeout before it reads the pod list.
# A webhook built from kuberay-tpu-webhook/v1.3.5 (or later) may run with the gate on:
# raytpu:kuberay.webhookImage + raytpu:kuberay.multiHostIndexing: true.
TPU_WEBHOOK_IMAGE = TpuWebhookImage(
    repository="us-docker.pkg.dev/ai-on-gke/kuberay-tpu-webhook/tpu-webhook",
    tag="v1.3.1-gke.2",
    digest="sha256:c392f614b7ffc2071a46b5fa7c1ea309475265be5af806927bb4f87313d9ca43",
    handles_multihost_indexing=False,
    source="ai-on-gke/kuberay-tpu-webhook@ef658db deployments/deployment.yaml; "
           "helm-chart/values.yaml at tags v1.3.2..v1.3.5",
)
# The first webhook tag whose affinity keys on ray.io/worker-group-replica-name.
TPU_WEBHOOK_MULTIHOST_INDEXING_FIX = "kuberay-tpu-webhook/v1.3.2"
RAY_MULTI_HOST_INDEXING = TPU_WEBHOOK_IMAGE.handles_multihost_indexing


# GKE: the Ray Operator add-on needs this control-plane version; the TPU webhook needs 1.28.
MIN_GKE_FOR_RAY_ADDON = "1.30.0-gke.1747000"
MIN_GKE_FOR_TPU_WEBHOOK = "1.28.0"


# Ports (KubeRay defaults, ray-project/kuberay utils/constant.go; TPU webhook main.go).
class Ports:
    RAY_GCS = 6379
    RAY_CLIENT = 10001
    RAY_DASHBOARD = 8265
    RAY_METRICS = 8080
    RAY_SERVE = 8000
    MEGASCALE = 8081  # multislice coordinator (8080 is Ray's metrics port)
    # libtpu runtime metrics: GKE collects kubernetes.io/container/accelerator/{duty_cycle,
    # memory_used,memory_total} only from TPU containers that declare this port (GKE TPU
    # observability docs: "containerPort: 8431 # Port to export TPU runtime metrics").
    TPU_RUNTIME_METRICS = 8431
    TPU_WEBHOOK = 443
    CERT_MANAGER_WEBHOOK = 10250
    # Admission webhooks the control plane must reach on nodes, beyond the 443/10250
    # that GKE's own master rule opens (controller-runtime 9443, common 8443, Istio 15017).
    EXTRA_WEBHOOK_PORTS = (8443, 9443, 15017)
    IAP_SSH = 22


# Google's IAP TCP-forwarding source range (fixed, documented by IAP).
IAP_SOURCE_RANGE = "35.235.240.0/20"


def version_tuple(version: str) -> tuple[int, ...]:
    """'1.31.2-gke.1115000' -> (1, 31, 2, 1115000); '2.60.0' -> (2, 60, 0)."""
    base, _, gke = version.partition("-gke.")
    parts = [int(p) for p in base.split(".") if p.isdigit()]
    if gke:
        parts.append(int(gke))
    return tuple(parts)
