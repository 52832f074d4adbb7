"""One model of a slice group: ``count`` slices of one TPU shape, and everything derived
from it, each by one function here or in :mod:`raytpu.facts.names`.

The stack configuration (``raytpu:slices[]``, :class:`raytpu.config.stack.SliceGroupConfig`)
makes one :class:`SliceGroup` per entry; the node pools, the Ray worker group, the Kueue
flavor, the dashboard and alert, the cost row, ``raytpu status`` and the ``slices`` stack
output all read it, so a naming or sizing rule changes in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from raytpu.facts import names
from raytpu.facts.capacity import Capacity
from raytpu.facts.catalog import SliceShape


@dataclass(frozen=True)
class SliceGroup:
    """``min_slices``..``max_slices`` slices of one shape, ``initial_slices`` at start."""

    name: str
    """The group's name (``raytpu:slices[].name``): its pools, Ray worker group and cost
    label are named after it."""
    shape: SliceShape
    """Shape of every slice of the group (``raytpu.facts.catalog.slice_shape``)."""
    min_slices: int
    """Fewest slices (a fixed group: its count)."""
    max_slices: int
    """Most slices (a multi-host group gets this many node pools)."""
    initial_slices: int
    """Slices provisioned at creation (and Ray's initial replicas)."""
    elastic: bool = False
    """Autoscaled between ``min_slices`` and ``max_slices``; otherwise fixed."""
    capacity: Capacity = "on-demand"
    """How the group's VMs are obtained (what prices them): :mod:`raytpu.facts.capacity`."""
    reservation: str | None = None
    """The specific reservation the VMs consume (``capacity`` reservation)."""
    max_run_seconds: int | None = None
    """Flex-start: how long GKE lets a VM run before it reclaims it."""

    @property
    def pool_names(self) -> list[str]:
        """GKE node pools of the group (one per slice when multi-host)."""
        return names.tpu_pool_names(self.name, self.shape.multi_host, self.max_slices)

    @property
    def pool_regex(self) -> str:
        """What the dashboard and the alert filter the pools by."""
        return names.tpu_pool_regex(self.name, self.shape.multi_host)

    @property
    def node_selector(self) -> dict[str, str]:
        """The labels the group's pods select its nodes by (the shape's)."""
        return self.shape.node_selector

    @property
    def flavor_name(self) -> str:
        """The Kueue ResourceFlavor of the group's shape (groups of one shape share it)."""
        return kueue_flavor_name(self.shape)

    @property
    def spot(self) -> bool:
        return self.capacity == "spot"

    def output(self) -> dict[str, Any]:
        """The group's entry of the ``slices`` stack output (documented in README)."""
        return {
            "tpu": self.shape.accelerator_type,
            "topology": self.shape.topology,
            "machineType": self.shape.machine_type,
            "hostsPerSlice": self.shape.hosts,
            "minSlices": self.min_slices,
            "maxSlices": self.max_slices,
            "spot": self.spot,
            "capacity": self.capacity,
            "nodeSelector": self.shape.node_selector,
        }


def kueue_flavor_name(shape: SliceShape) -> str:
    """One name per slice shape: accelerator type, topology, machine type (the three labels
    of its node selector)."""
    return f"{shape.accelerator_type}-{shape.topology}-{shape.machine_type}".lower()
