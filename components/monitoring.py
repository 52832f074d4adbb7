"""Seeing the fleet: Ray scraped by Managed Service for Prometheus, a dashboard, an alert.

* :class:`PodMonitoring` (``monitoring.googleapis.com/v1``, typed like the ``ray.io`` kinds
  in :mod:`raytpu.components.ray_resources`): GMP scrapes Ray's metrics port (8080, named
  ``metrics`` by KubeRay and declared on every Ray container) of the head and the workers,
  selected by KubeRay's ``ray.io/cluster`` / ``ray.io/node-type`` labels.
  :func:`ray_pod_monitoring` builds the one for a RayCluster; ``TpuRayCluster`` declares it.
* TPU runtime metrics (``kubernetes.io/container/accelerator/duty_cycle``, ``memory_used``,
  ``memory_total``) are GKE *system* metrics: no PodMonitoring; GKE collects them when the
  cluster sends SYSTEM_COMPONENTS and the TPU container declares ``containerPort: 8431``
  (both done by this package).
* :class:`FleetMonitoring`: the stack's Cloud Monitoring dashboard (built from
  :class:`Chart` data) and an alert policy that fires when a slice group has fewer
  available multi-host slices (``kubernetes.io/node_pool/multi_host/available``) than it
  should, for longer than ``alert_after_seconds``. Needs ``monitoring.googleapis.com``.

``kubernetes.io/node_pool/multi_host/available`` exists for multi-host pools only (and
needs GKE >= 1.32.1-gke.1357001): single-host slice groups get no availability chart and
no alert condition.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi_kubernetes.apiextensions import CustomResource
from raytpu.components.gcp_resources import MonitoringAlertPolicy, MonitoringDashboard
from raytpu.components.k8s_objects import ObjectMeta
from raytpu.components.ray_resources import _set_all
from raytpu.facts.ray_metrics import MFU, TOKENS_PER_S
from raytpu.spec.monitoring import FleetMonitoringArgs, MonitoredSliceGroup

GMP_API_VERSION = "monitoring.googleapis.com/v1"
PODMONITORING_TYPE = f"kubernetes:{GMP_API_VERSION}:PodMonitoring"
# Target labels GMP reserves (the CRD's x-kubernetes-validations on targetLabels.fromPod.to).
PROTECTED_TARGET_LABELS = frozenset({
    "project_id", "location", "cluster", "namespace", "job", "instance",
    "top_level_controller", "top_level_controller_type", "__address__",
})

# Cloud Monitoring metric types the dashboard and alert read (GKE system metrics list,
# cloud.google.com/monitoring/api/metrics_kubernetes; shared/ref/notes/platform.md §3.2).
SLICE_AVAILABLE = "kubernetes.io/node_pool/multi_host/available"
SLICE_AVAILABLE_PROMQL = "kubernetes_io:node_pool_multi_host_available"
TPU_DUTY_CYCLE = "kubernetes.io/container/accelerator/duty_cycle"
TPU_MEMORY_USED = "kubernetes.io/container/accelerator/memory_used"
TPU_MEMORY_TOTAL = "kubernetes.io/container/accelerator/memory_total"
CONTAINER_MEMORY_USED = "kubernetes.io/container/memory/used_bytes"
CONTAINER_MEMORY_LIMIT = "kubernetes.io/container/memory/limit_bytes"


# -- PodMonitoring (monitoring.googleapis.com/v1) -----------------------------------------


@pulumi.input_type
class LabelMappingArgs:
    """``targetLabels.fromPod[]``: copy a pod label onto the scraped series."""

    from_: str = pulumi.property("from")
    to: str | None = pulumi.property("to", default=None)

    def __init__(self, *, from_: str, to: str | None = None) -> None:
        if to in PROTECTED_TARGET_LABELS:
            raise ValueError(f"targetLabels.fromPod.to: {to!r} is a label GMP reserves")
        _set_all(self, {"from_": from_, "to": to})


@pulumi.input_type
class TargetLabelsArgs:
    from_pod: Sequence[LabelMappingArgs] | None = pulumi.property("fromPod", default=None)
    metadata: Sequence[str] | None = pulumi.property("metadata", default=None)

    def __init__(self, *, from_pod: Sequence[LabelMappingArgs] | None = None,
                 metadata: Sequence[str] | None = None) -> None:
        _set_all(self, {"from_pod": list(from_pod) if from_pod else None,
                        "metadata": list(metadata) if metadata else None})


@pulumi.input_type
class ScrapeEndpointArgs:
    """``endpoints[]``: ``port`` (name or number) and ``interval`` are required in v1."""

    port: str | int = pulumi.property("port")
    interval: str = pulumi.property("interval")
    path: str | None = pulumi.property("path", default=None)
    timeout: str | None = pulumi.property("timeout", default=None)

    def __init__(self, *, port: str | int, interval: str = "30s", path: str | None = None,
                 timeout: str | None = None) -> None:
        _set_all(self, {"port": port, "interval": interval, "path": path, "timeout": timeout})


@pulumi.input_type
class PodMonitoringSpecArgs:
    selector: Mapping[str, Any] = pulumi.property("selector")
    """A LabelSelector (``matchLabels`` / ``matchExpressions``, API field names)."""
    endpoints: Sequence[ScrapeEndpointArgs] = pulumi.property("endpoints")
    target_labels: TargetLabelsArgs | None = pulumi.property("targetLabels", default=None)

    def __init__(self, *, selector: Mapping[str, Any], endpoints: Sequence[ScrapeEndpointArgs],
                 target_labels: TargetLabelsArgs | None = None) -> None:
        if not endpoints:
            raise ValueError("PodMonitoring.spec.endpoints: at least one endpoint")
        if not selector:
            raise ValueError("PodMonitoring.spec.selector: an empty selector scrapes every pod "
                             "of the namespace")
        _set_all(self, {"selector": dict(selector), "endpoints": list(endpoints),
                        "target_labels": target_labels})


class PodMonitoring(CustomResource):
    """A GMP ``PodMonitoring`` (type token ``kubernetes:monitoring.googleapis.com/v1:
    PodMonitoring``). Its CRD comes with managed collection on the cluster."""

    def __init__(self, resource_name: str, *, metadata: ObjectMeta, spec: PodMonitoringSpecArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(resource_name, api_version=GMP_API_VERSION, kind="PodMonitoring",
                         metadata=metadata, spec=spec, opts=opts)


def ray_pod_monitoring_spec(cluster_name: str | None, port: str = "metrics",
                            interval: str = "30s") -> PodMonitoringSpecArgs:
    """Scrape the head and workers of one RayCluster (``cluster_name``; None: every Ray pod
    of the namespace, e.g. a team's RayJob clusters, whose names are generated) on Ray's
    metrics port, keeping the Ray labels (cluster, node type, group) on every series (as
    KubeRay's podMonitor does)."""
    match = ({"ray.io/cluster": cluster_name} if cluster_name is not None
             else {"ray.io/is-ray-node": "yes"})
    return PodMonitoringSpecArgs(
        selector={
            "matchLabels": match,
            "matchExpressions": [{"key": "ray.io/node-type", "operator": "In",
                                  "values": ["head", "worker"]}],
        },
        endpoints=[ScrapeEndpointArgs(port=port, interval=interval)],
        target_labels=TargetLabelsArgs(from_pod=[
            LabelMappingArgs(from_="ray.io/cluster", to="ray_io_cluster"),
            LabelMappingArgs(from_="ray.io/node-type", to="ray_io_node_type"),
            LabelMappingArgs(from_="ray.io/group", to="ray_io_group"),
        ]),
    )


# -- the dashboard, from data ------------------------------------------------------------


@dataclass(frozen=True)
class Series:
    """One line set of a chart: a Cloud Monitoring filter and how to aggregate it."""

    metric: str
    resource: str
    where: Mapping[str, str] = field(default_factory=dict)
    """``<label> -> <expression>``, e.g. ``resource.label."cluster_name" -> '"c"'``."""
    aligner: str = "ALIGN_MEAN"
    reducer: str = "REDUCE_MEAN"
    group_by: tuple[str, ...] = ()
    legend: str = ""

    def filter(self) -> str:
        parts = [f'metric.type="{self.metric}"', f'resource.type="{self.resource}"']
        parts += [f"{k}={v}" for k, v in self.where.items()]
        return " ".join(parts)

    def data_set(self) -> dict[str, Any]:
        aggregation: dict[str, Any] = {"alignmentPeriod": "60s",
                                       "perSeriesAligner": self.aligner,
                                       "crossSeriesReducer": self.reducer}
        if self.group_by:
            aggregation["groupByFields"] = list(self.group_by)
        out: dict[str, Any] = {
            "plotType": "LINE",
            "timeSeriesQuery": {"timeSeriesFilter": {"filter": self.filter(),
                                                     "aggregation": aggregation}},
        }
        if self.legend:
            out["legendTemplate"] = self.legend
        return out


@dataclass(frozen=True)
class Chart:
    title: str
    series: tuple[Series, ...]
    y_label: str
    threshold: float | None = None

    def widget(self) -> dict[str, Any]:
        chart: dict[str, Any] = {
            "dataSets": [s.data_set() for s in self.series],
            "yAxis": {"label": self.y_label, "scale": "LINEAR"},
        }
        if self.threshold is not None:
            chart["thresholds"] = [{"label": "expected", "value": self.threshold}]
        return {"title": self.title, "xyChart": chart}


def _q(value: str) -> str:
    return json.dumps(value)


def dashboard_charts(args: FleetMonitoringArgs) -> list[Chart]:
    cluster = {'resource.label."cluster_name"': _q(args.cluster_name),
               'resource.label."location"': _q(args.location)}
    ray_pods = {**cluster, 'resource.label."namespace_name"': _q(args.ray_namespace)}
    charts: list[Chart] = []
    for g in args.slice_groups:
        # KubeRay worker pods are "<cluster>-<group>-worker-<5 random>".
        workers = {**ray_pods, 'resource.label."pod_name"':
                   f"starts_with({_q(f'{args.ray_cluster_name}-{g.name}-worker-')})"}
        if g.multi_host:
            charts.append(Chart(
                f"{g.name}: available slices (of {g.max_slices})",
                (Series(SLICE_AVAILABLE, "k8s_node_pool",
                        {**cluster, 'resource.label."node_pool_name"':
                         f"monitoring.regex.full_match({_q(g.pool_regex)})"},
                        aligner="ALIGN_COUNT_TRUE", reducer="REDUCE_SUM"),),
                "slices", threshold=float(g.expected_slices) if g.expected_slices else None,
            ))
        charts.append(Chart(f"{g.name}: TPU duty cycle",
                            (Series(TPU_DUTY_CYCLE, "k8s_container", workers),), "percent"))
        charts.append(Chart(f"{g.name}: TPU HBM", (
            Series(TPU_MEMORY_USED, "k8s_container", workers, reducer="REDUCE_SUM",
                   legend="used"),
            Series(TPU_MEMORY_TOTAL, "k8s_container", workers, reducer="REDUCE_SUM",
                   legend="total"),
        ), "bytes"))
    trainer = {'resource.label."cluster"': _q(args.cluster_name),
               'resource.label."namespace"': _q(args.ray_namespace)}
    for metric, title, unit in ((TOKENS_PER_S, "trainer: tokens/s", "tokens/s"),
                                (MFU, "trainer: MFU", "fraction of peak bf16")):
        charts.append(Chart(title, (Series(metric.gmp_type, "prometheus_target", trainer,
                                           reducer="REDUCE_MAX",
                                           group_by=('metric.label."run"',),
                                           legend="${metric.labels.run}"),), unit))
    head = {**ray_pods,
            'resource.label."pod_name"': f"starts_with({_q(f'{args.ray_cluster_name}-head-')})",
            'resource.label."container_name"': _q("ray-head")}
    charts.append(Chart("Ray head memory", (
        Series(CONTAINER_MEMORY_USED, "k8s_container",
               {**head, 'metric.label."memory_type"': _q("non-evictable")},
               reducer="REDUCE_SUM", legend="used"),
        Series(CONTAINER_MEMORY_LIMIT, "k8s_container", head, reducer="REDUCE_SUM",
               legend="limit"),
    ), "bytes"))
    return charts


def dashboard_json(args: FleetMonitoringArgs) -> str:
    """The API's Dashboard object (cloud.google.com/monitoring/api/ref_v3/rest/v1/
    projects.dashboards), deterministic so that a plan only changes with the charts."""
    doc = {
        "displayName": f"raytpu {args.stack}: TPU fleet ({args.cluster_name})",
        "gridLayout": {"columns": "2", "widgets": [c.widget() for c in dashboard_charts(args)]},
        "labels": {"raytpu": ""},
    }
    return json.dumps(doc, sort_keys=True)


def slice_alert_query(args: FleetMonitoringArgs, g: MonitoredSliceGroup) -> str:
    """PromQL: true while fewer than ``expected`` of the group's slices are available.
    ``or vector(0)``: a group whose pools report nothing counts as zero, not as silence."""
    selector = (f'monitored_resource="k8s_node_pool",cluster_name={_q(args.cluster_name)},'
                f'location={_q(args.location)},node_pool_name=~{_q(g.pool_regex)}')
    return (f"(sum({SLICE_AVAILABLE_PROMQL}{{{selector}}}) or vector(0)) "
            f"< {g.expected_slices}")


def alert_policy_inputs(args: FleetMonitoringArgs) -> dict[str, Any]:
    minutes = args.alert_after_seconds // 60
    return {
        "project": args.project,
        "displayName": f"raytpu {args.stack}: TPU slices missing ({args.cluster_name})",
        "combiner": "OR",
        "severity": "ERROR",
        "conditions": [
            {
                "displayName": (f"{g.name}: fewer than {g.expected_slices} of {g.max_slices} "
                                f"slices available for {minutes} min"),
                "conditionPrometheusQueryLanguage": {
                    "query": slice_alert_query(args, g),
                    "duration": f"{args.alert_after_seconds}s",
                    "evaluationInterval": "60s",
                },
            }
            for g in args.watched
        ],
        "notificationChannels": list(args.notification_channels) or None,
        "documentation": {
            "mimeType": "text/markdown",
            "content": (
                "A TPU slice group has fewer available multi-host slices than it should "
                f"(`{SLICE_AVAILABLE}`, label `unavailability_reason`). Check `raytpu status "
                f"--stack {args.stack}` and the node pools' events."
            ),
        },
        "userLabels": dict(args.user_labels) or None,
    }


class FleetMonitoring(pulumi.ComponentResource):
    """The stack's Cloud Monitoring dashboard and slice-availability alert policy."""

    dashboard: MonitoringDashboard
    alert_policy: MonitoringAlertPolicy | None
    """None when no slice group is watched (only single-host or elastic-from-zero groups)."""

    def __init__(self, name: str, args: FleetMonitoringArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        if not isinstance(args, FleetMonitoringArgs):
            raise TypeError(f"FleetMonitoring {name!r}: args must be FleetMonitoringArgs, "
                            f"not {type(args)!r}")
        super().__init__("raytpu:monitoring:FleetMonitoring", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.dashboard = MonitoringDashboard(
            f"{name}-dashboard", {"project": args.project, "dashboardJson": dashboard_json(args)},
            child,
        )
        self.alert_policy = None
        if args.watched:
            self.alert_policy = MonitoringAlertPolicy(
                f"{name}-slices", alert_policy_inputs(args), child)
        self.register_outputs({
            "dashboard": self.dashboard.id,
            "alertPolicy": self.alert_policy.policy_name if self.alert_policy else None,
            "watchedGroups": [g.name for g in args.watched],
        })
