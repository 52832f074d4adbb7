"""Kueue installation: the v0.19.2 Helm chart, on the system pool, Ray integrations on.

Why the chart through ``helm.v4.Chart`` (as :mod:`raytpu.components.kuberay_operator`
installs KubeRay) rather than the release ``manifests.yaml`` with server-side apply: the v4
Chart renders the chart with its CRDs and registers every object as a Pulumi resource, so
(1) the Kueue kinds resolve during the first preview of a fresh stack (the provider caches
CRDs it sees), (2) a version bump in :data:`raytpu.facts.versions.CHARTS` diffs and upgrades the
CRDs (``helm install`` never upgrades ``crds/``), (3) the Kubernetes provider applies them
server-side, which their size needs, and (4) the chart's values are where the manager
Configuration, the node selector and the image pin go, one reviewed dict
(:func:`chart_values`), which ``raytpu manifests`` lists. The manifests file would have to be
fetched and patched (the Configuration lives in a ConfigMap inside it) to do the same.

The Configuration (``config.kueue.x-k8s.io/v1beta2``) is passed whole
(``managerConfig.controllerManagerConfigYaml`` is one string: the chart does not merge it with
its default), so :func:`manager_config` restates the chart's defaults and changes:

* ``integrations.frameworks``: RayJob and RayCluster only (the chart registers webhooks for
  the frameworks listed; nothing else here is queued);
* ``waitForPodsReady``: an admitted workload whose pods are not all Ready within the timeout
  is evicted and requeued, so a TPU slice that cannot start (stockout, a broken host) gives
  its quota back instead of holding it. The timeout covers a cluster-autoscaler scale-up of a
  multi-host TPU pool from zero.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml
from raytpu.components._options import depends_on_of
from raytpu.components.k8s_objects import Namespace
from raytpu.facts import versions
from raytpu.spec.kueue import KueueArgs


def manager_config(args: KueueArgs) -> dict[str, Any]:
    """The controller's Configuration: the chart's default with the changes above."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {"groupKindConcurrency": {
            "Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 10,
            "LocalQueue.kueue.x-k8s.io": 5, "ClusterQueue.kueue.x-k8s.io": 5,
            "ResourceFlavor.kueue.x-k8s.io": 1}},
        "clientConnection": {"qps": 300, "burst": 500},
        "waitForPodsReady": {
            "timeout": args.pods_ready_timeout,
            "blockAdmission": False,  # other queues' jobs keep being admitted meanwhile
            "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 60,
                                  "backoffMaxSeconds": args.requeue_backoff_max_seconds},
        },
        "integrations": {"frameworks": list(args.frameworks)},
    }


def chart_values(args: KueueArgs) -> dict[str, Any]:
    """The chart's values (also listed by ``raytpu manifests``)."""
    manager: dict[str, Any] = {
        "image": {"repository": versions.KUEUE_IMAGE, "tag": f"v{args.version}",
                  "pullPolicy": "IfNotPresent"},
        "resources": {k: dict(v) for k, v in args.manager_resources.items()},
    }
    controller: dict[str, Any] = {"manager": manager}
    if args.node_selector:
        controller["nodeSelector"] = dict(args.node_selector)
    return {
        "controllerManager": controller,
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(
            manager_config(args), sort_keys=False)},
    }


class Kueue(pulumi.ComponentResource):
    """Installs Kueue. Queues and flavors depend on :attr:`ready` (CRDs, webhooks served)."""

    chart: k8s.helm.v4.Chart
    ready: list[pulumi.Resource]

    def __init__(self, name: str, args: KueueArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("raytpu:kueue:Kueue", name, None, opts)
        inherited = depends_on_of(opts)  # children do not inherit a component's dependsOn
        chart = versions.CHARTS["kueue"]
        namespace = Namespace(
            f"{name}-ns", metadata={"name": args.namespace,
                                    "labels": {"app.kubernetes.io/part-of": "raytpu"}},
            opts=pulumi.ResourceOptions(parent=self, depends_on=inherited))
        self.chart = k8s.helm.v4.Chart(
            name,
            chart=f"{chart.repo.rstrip('/')}/{chart.chart}",
            version=args.version,
            namespace=args.namespace,
            name="kueue",  # release name: the chart's objects are named kueue-*
            values=chart_values(args),
            skip_crds=False,  # the CRDs become Pulumi resources (module docstring)
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*inherited, namespace]),
        )
        self.ready = [self.chart]
        self.outputs = {"chart": chart.chart, "version": args.version, "repo": chart.repo,
                        "namespace": args.namespace}
        self.register_outputs(self.outputs)
