"""Inputs of :class:`~raytpu.components.FleetMonitoring`: the slice groups to chart and alert
on, and the alert's settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from raytpu.facts.names import DNS_LABEL, tpu_pool_regex
from raytpu.facts.problems import args_error
from raytpu.facts.slice_group import SliceGroup


@dataclass(frozen=True)
class MonitoredSliceGroup:
    """One slice group (a ``raytpu:slices`` entry) as the dashboard and the alert see it."""

    name: str
    """Node pool name of the group (``TpuSlicePoolArgs.pool_name``)."""
    multi_host: bool
    """Whether a slice spans several hosts (pools ``<name>-<index>``) or one (pool ``<name>``)."""
    expected_slices: int
    """Available slices below this (for ``alert_after_seconds``) alert; 0: never."""
    max_slices: int
    """The most slices the group may have (the dashboard's scale)."""

    @classmethod
    def of(cls, group: SliceGroup) -> MonitoredSliceGroup:
        """A slice group as monitored: it should have its fixed count, or its autoscaling
        minimum, up."""
        return cls(name=group.name, multi_host=group.shape.multi_host,
                   expected_slices=group.min_slices, max_slices=group.max_slices)

    @property
    def pool_regex(self) -> str:
        """The group's node pools (``raytpu.facts.names.TPU_POOL_NAME``)."""
        return tpu_pool_regex(self.name, self.multi_host)


@dataclass(frozen=True)
class FleetMonitoringArgs:
    """Inputs of :class:`FleetMonitoring`."""

    project: str
    """GCP project the dashboard and the alert policy live in (the cluster's)."""
    stack: str
    """Stack name; titles the dashboard and the alert."""
    cluster_name: str
    """GKE cluster name (``resource.label.cluster_name`` of the GKE system metrics)."""
    location: str
    """The cluster's zone or region (``resource.label.location``)."""
    ray_cluster_name: str
    """Name of the RayCluster whose pods the dashboard charts."""
    ray_namespace: str
    """Namespace of the RayCluster."""
    slice_groups: tuple[MonitoredSliceGroup, ...]
    """The slice groups to chart and alert on."""
    alert_after_seconds: int = 600
    """How long a slice group may lack slices before the alert fires (whole minutes)."""
    notification_channels: tuple[str, ...] = ()
    """``projects/<p>/notificationChannels/<id>`` the alert notifies."""
    user_labels: Mapping[str, str] = field(default_factory=dict)
    """Labels on the alert policy."""

    def __post_init__(self) -> None:
        if not self.project:
            raise args_error(self, "project", "required")
        if self.alert_after_seconds <= 0 or self.alert_after_seconds % 60:
            raise args_error(self, "alert_after_seconds",
                             f"{self.alert_after_seconds} must be a positive multiple of 60")
        for g in self.slice_groups:
            if not DNS_LABEL.match(g.name):
                raise args_error(self, "slice_groups", f"{g.name!r} is not a DNS "
                                 "label")
            if not 0 <= g.expected_slices <= g.max_slices:
                raise args_error(self, "slice_groups", f"{g.name!r}: expected "
                                 f"{g.expected_slices} is outside 0..{g.max_slices}")

    @property
    def watched(self) -> tuple[MonitoredSliceGroup, ...]:
        """The groups the alert covers: multi-host, with slices that must be there."""
        return tuple(g for g in self.slice_groups if g.multi_host and g.expected_slices > 0)
