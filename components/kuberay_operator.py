"""KubeRay operator installation: Helm charts (cert-manager -> KubeRay -> TPU webhook) or the
GKE Ray Operator add-on.

Design answers to the two known traps (shared/ref/notes/kuberay-tpu.md §3, pulumi.md §6):

1. *First preview of a fresh stack must not fail on the unknown ``RayCluster`` kind.* CRDs
   installed by an opaque ``helm.v3.Release`` are invisible to the Kubernetes provider during
   preview (pulumi-kubernetes #3176/#3299). ``helm.v4.Chart`` renders the chart like
   ``helm template --include-crds`` (``IncludeCRDs = !skipCrds`` in the provider's
   ``helm/v4/chart.go``) and registers every object, CRDs included, as a Pulumi resource; the
   provider caches CRDs it sees in ``Check`` (PR #2904), so a RayCluster that depends on the
   chart resolves its kind at preview.
2. *A KubeRay version bump must upgrade the CRDs.* Helm installs ``crds/`` once and never
   upgrades them (kuberay #2084: a v1.0 CRD without ``numOfHosts`` under a v1.1 operator deleted
   every worker). With ``helm.v4.Chart`` the CRDs are ordinary Pulumi resources, so a new chart
   version diffs and updates them. They are large (RayJob 1.39 MB, over the 256 KiB
   last-applied annotation), so the Kubernetes provider must use server-side apply (its default
   in pulumi-kubernetes v4; ``enable_server_side_apply`` on the Provider).

``skipCrds`` is therefore set to ``False`` explicitly on every chart, and the order is expressed
with ``dependsOn``: cert-manager must serve before the webhook's Issuer/Certificate are
created, and the webhook (``failurePolicy`` defaults to ``Fail``) must run before any KubeRay
pod is created -- consumers depend on :attr:`KubeRayOperator.ready`.

3. *The webhook image and KubeRay's ``RayMultiHostIndexing`` gate are one choice*
   (``raytpu.facts.versions.TPU_WEBHOOK_IMAGE``): the published webhook image predates the fix that
   makes its podAffinity work with the gate's labels, so the gate is off unless the image is
   declared to handle it.
4. *GKE add-on mode: GKE installs the KubeRay CRDs asynchronously after the cluster exists*,
   so a RayCluster declared right away fails with "no matches for kind RayCluster" (the
   provider retries that for ~30 s only, ``await.Creation``). A Job polls the API server until
   ``rayclusters.ray.io`` is Established; pulumi-kubernetes awaits a Job's completion (its
   Job awaiter), so everything that depends on :attr:`KubeRayOperator.ready` waits for the CRD.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from raytpu.components._options import depends_on_of
from raytpu.components.k8s_objects import (
    ClusterRole,
    ClusterRoleBinding,
    Job,
    Namespace,
    ServiceAccount,
)
from raytpu.components.ray_pod_templates import container_security_context, pod_security_context
from raytpu.spec.kuberay_operator import (
    CERT_MANAGER_NAMESPACE,
    WEBHOOK_NAMESPACE,
    ChartRef,
    KubeRayOperatorArgs,
    chart_refs,
    feature_gates,
    split_image,
)

# GKE add-on mode: what the CRD wait Job looks for, and how long pulumi waits for it.
ADDON_CRD = "rayclusters.ray.io"
ADDON_WAIT_NAMESPACE = "default"  # exists on every cluster; the Job owns nothing else there
ADDON_WAIT_TIMEOUT_S = 1200
_WAIT_SCRIPT = f"""\
import json, ssl, time, urllib.request
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
token = open(sa + "/token").read()
ctx = ssl.create_default_context(cafile=sa + "/ca.crt")
url = "https://kubernetes.default.svc/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
req = urllib.request.Request(url + "{ADDON_CRD}", headers={{"Authorization": "Bearer " + token}})
deadline = time.time() + {ADDON_WAIT_TIMEOUT_S - 60}
while True:
    try:
        crd = json.load(urllib.request.urlopen(req, context=ctx, timeout=10))
        conds = crd.get("status", {{}}).get("conditions", [])
        if any(c["type"] == "Established" and c["status"] == "True" for c in conds):
            print("{ADDON_CRD} is established")
            break
    except Exception as e:  # 404 until the add-on has installed the CRD
        print("waiting for {ADDON_CRD}:", e, flush=True)
    if time.time() > deadline:
        raise SystemExit("{ADDON_CRD} did not appear: is the Ray Operator add-on enabled?")
    time.sleep(10)
"""



def _chart_source(ref: ChartRef) -> dict[str, Any]:
    """``chart``/``repository_opts`` for helm.v4.Chart: OCI charts are a full reference."""
    if ref.repo.startswith("oci://"):
        return {"chart": f"{ref.repo.rstrip('/')}/{ref.chart}"}
    return {"chart": ref.chart, "repository_opts": k8s.helm.v4.RepositoryOptsArgs(repo=ref.repo)}


def chart_values(args: KubeRayOperatorArgs) -> dict[str, dict[str, Any]]:
    """Helm values per component (also written by ``raytpu manifests``)."""
    operator: dict[str, Any] = {
        "image": {"tag": f"v{args.kuberay_version}"},  # chart default too; pinned for review
        "featureGates": feature_gates(args),
        "resources": {k: dict(v) for k, v in args.operator_resources.items()},
    }
    if args.node_selector:
        operator["nodeSelector"] = dict(args.node_selector)
    return {
        "cert-manager": {
            # cert-manager >= 1.15 renders its CRDs as templates behind crds.enabled; keep them
            # on `pulumi destroy` (crds.keep -> helm.sh/resource-policy: keep -> retainOnDelete).
            "crds": {"enabled": True, "keep": True},
            # GKE manages kube-system; hold the leader-election lease in our own namespace.
            "global": {"leaderElection": {"namespace": CERT_MANAGER_NAMESPACE}},
        },
        "kuberay-operator": operator,
        "kuberay-tpu-webhook": {"tpuWebhook": {
            "namespace": {"name": WEBHOOK_NAMESPACE},
            # Pinned here, not left to the chart: the image and the gate are one choice.
            "image": dict(zip(("repository", "tag"), split_image(args.webhook_image),
                              strict=True)),
        }},
    }


class KubeRayOperator(pulumi.ComponentResource):
    """Installs KubeRay and the KubeRay TPU webhook, or records that GKE manages them."""

    charts: dict[str, k8s.helm.v4.Chart]
    namespaces: dict[str, pulumi.Resource]
    """Namespaces that exist once this component is ready, with the resource creating each."""
    ready: list[pulumi.Resource]
    """What a RayCluster must depend on: the charts (CRDs, operator, webhook); in add-on mode
    the Job that waits for the add-on's CRDs."""

    def __init__(
        self,
        name: str,
        args: KubeRayOperatorArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("raytpu:kuberay:KubeRayOperator", name, None, opts)
        self.args = args
        # Children do not inherit a component's dependsOn (neither the SDK nor the engine
        # propagates it): pass the caller's (cluster, node pools) down explicitly.
        self._inherited = depends_on_of(opts)
        self.charts = {}
        self.namespaces = {}
        self.ready = []
        refs = chart_refs(args)
        if args.mode == "helm":
            self._install(name, refs)
        elif args.addon_wait_image is not None:
            self.ready = [self._wait_for_addon(name, args.addon_wait_image)]
        outputs: dict[str, Any] = {
            "mode": args.mode,
            "charts": [r.to_dict() for r in refs],
            "namespace": args.namespace if args.mode == "helm" else None,
            "webhookNamespace": WEBHOOK_NAMESPACE if args.mode == "helm" else None,
        }
        if args.mode == "gke-addon":
            outputs["note"] = (
                "GKE Ray Operator add-on: GKE installs and runs KubeRay and the TPU webhook; "
                "no Helm charts are installed by this stack"
            )
        self.outputs = outputs
        self.register_outputs(outputs)

    def _install(self, name: str, refs: Sequence[ChartRef]) -> None:
        values = chart_values(self.args)
        child = pulumi.ResourceOptions(parent=self)
        previous: list[pulumi.Resource] = []
        for ref in refs:
            deps: list[pulumi.Resource] = [*self._inherited, *previous]
            if ref.namespace != WEBHOOK_NAMESPACE:
                ns = self._namespace(name, ref.namespace)
                deps.append(ns)
            chart = k8s.helm.v4.Chart(
                f"{name}-{ref.component}",
                **_chart_source(ref),
                version=ref.version,
                namespace=ref.namespace,
                name=ref.component,  # release name, independent of the Pulumi resource name
                values=values[ref.component],
                skip_crds=False,  # the point of v4 Chart here: CRDs become Pulumi resources
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=deps)),
            )
            self.charts[ref.component] = chart
            if ref.namespace == WEBHOOK_NAMESPACE:
                self.namespaces[WEBHOOK_NAMESPACE] = chart
            # Strict chain: cert-manager -> operator -> webhook (the issue's order).
            previous = [chart]
        self.ready = [self.charts[c] for c in ("kuberay-operator", "kuberay-tpu-webhook")]

    def _wait_for_addon(self, name: str, image: str) -> pulumi.Resource:
        """A Job that completes once the add-on's RayCluster CRD is Established."""
        child = pulumi.ResourceOptions(parent=self, depends_on=self._inherited)
        labels = {"app.kubernetes.io/part-of": "raytpu"}
        account = f"{name}-wait-for-addon"
        sa = ServiceAccount(f"{name}-wait-sa", metadata={
            "name": account, "namespace": ADDON_WAIT_NAMESPACE, "labels": labels}, opts=child)
        role = ClusterRole(f"{name}-wait-role", metadata={"name": account, "labels": labels},
                           fields={"rules": [{"apiGroups": ["apiextensions.k8s.io"],
                                              "resources": ["customresourcedefinitions"],
                                              "resourceNames": [ADDON_CRD], "verbs": ["get"]}]},
                           opts=child)
        binding = ClusterRoleBinding(
            f"{name}-wait-binding", metadata={"name": account, "labels": labels},
            fields={"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                "name": account},
                    "subjects": [{"kind": "ServiceAccount", "name": account,
                                  "namespace": ADDON_WAIT_NAMESPACE}]},
            opts=child)
        return Job(
            f"{name}-wait-for-addon-crds",
            metadata={"name": account, "namespace": ADDON_WAIT_NAMESPACE, "labels": labels},
            spec={
                "backoffLimit": 2,
                "activeDeadlineSeconds": ADDON_WAIT_TIMEOUT_S,
                "template": {"metadata": {"labels": labels}, "spec": {
                    "serviceAccountName": account,
                    "restartPolicy": "Never",
                    # The Ray pods' restricted Pod Security profile (the same Ray image).
                    "securityContext": pod_security_context(),
                    "containers": [{
                        "name": "wait", "image": image, "command": ["python", "-c", _WAIT_SCRIPT],
                        "securityContext": container_security_context(),
                        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"},
                                      "limits": {"memory": "256Mi"}},
                    }],
                }},
            },
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[*self._inherited, sa, role, binding],
                custom_timeouts=pulumi.CustomTimeouts(create=f"{ADDON_WAIT_TIMEOUT_S}s",
                                                      update=f"{ADDON_WAIT_TIMEOUT_S}s")),
        )

    def _namespace(self, name: str, namespace: str) -> pulumi.Resource:
        if namespace not in self.namespaces:
            self.namespaces[namespace] = Namespace(
                f"{name}-ns-{namespace}",
                metadata={"name": namespace, "labels": {"app.kubernetes.io/part-of": "raytpu"}},
                opts=pulumi.ResourceOptions(parent=self, depends_on=self._inherited),
            )
        return self.namespaces[namespace]

