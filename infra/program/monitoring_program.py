"""The monitoring layer of the stack program: StackConfig -> FleetMonitoring.

The PodMonitoring that scrapes Ray is the RayCluster component's (``raytpu:monitoring.
enabled`` turns it on in :func:`raytpu.program.ray_program.cluster_args`); the GKE cluster sends
system metrics and runs managed Prometheus (:class:`~raytpu.components.GkeClusterArgs`).
Needs the ``monitoring.googleapis.com`` API on the project.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
from raytpu.components.monitoring import FleetMonitoring
from raytpu.config.key_paths import Keys
from raytpu.config.schema import shared_fields
from raytpu.config.stack import ConfigError, StackConfig
from raytpu.spec.monitoring import FleetMonitoringArgs, MonitoredSliceGroup

# Where FleetMonitoringArgs' fields come from (the rest: raytpu:monitoring.<camelCase>).
_KEYS = Keys("raytpu:monitoring", {
    ("project",): "gcp:project", ("stack",): "stack", ("cluster_name",): "raytpu:cluster.name",
    ("location",): "raytpu:zone", ("ray_cluster_name",): "raytpu:ray.clusterName",
    ("ray_namespace",): "raytpu:ray.namespace", ("slice_groups",): "raytpu:slices",
    ("alert_after_seconds",): "raytpu:monitoring.alertAfter",
})


def monitoring_args(cfg: StackConfig, labels: Mapping[str, str]) -> FleetMonitoringArgs:
    """The Args, or ConfigError naming the ``raytpu:monitoring`` key."""
    m = cfg.monitoring
    try:
        return FleetMonitoringArgs(
            **shared_fields(FleetMonitoringArgs, m),
            project=cfg.project,
            stack=cfg.stack,
            cluster_name=cfg.cluster.name,
            location=cfg.cluster_location,
            ray_cluster_name=cfg.ray.cluster_name,
            ray_namespace=cfg.ray.namespace,
            slice_groups=tuple(MonitoredSliceGroup.of(s.group) for s in cfg.slices),
            alert_after_seconds=m.alert_after_seconds,
            user_labels=dict(labels),
        )
    except ValueError as e:
        raise ConfigError(_KEYS.lines(e)) from None


def build_monitoring(
    cfg: StackConfig, labels: Mapping[str, str], opts: pulumi.ResourceOptions | None = None
) -> dict[str, Any]:
    """Declare the dashboard and the alert (nothing when ``raytpu:monitoring.enabled`` is
    false); ``labels``: the stack's GCE labels, for the alert policy; ``opts``: the
    components' options (their resources wait for ``monitoring.googleapis.com``). Returns
    the stack outputs."""
    if not cfg.monitoring.enabled:
        return {}
    fleet = FleetMonitoring("monitoring", monitoring_args(cfg, labels), opts)
    return {
        "monitoring_dashboard": fleet.dashboard.id,
        "monitoring_alert_policy": (fleet.alert_policy.policy_name
                                    if fleet.alert_policy is not None else None),
    }
