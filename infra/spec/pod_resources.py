"""What one TPU host's Ray pod asks of its VM: the one sizing the RayCluster's worker groups,
the config's fit check and Kueue's per-slice quota all read."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TypedDict

from raytpu.facts.catalog import TPU_RESOURCE, SliceShape

# Share of the VM a Ray worker requests: the rest is left to kubelet/system reservations and
# the node's DaemonSets (TPU device plugin, GKE metadata server, logging).
NODE_FRACTION = 0.8


class ResourceRequirements(TypedDict, total=False):
    """A container's ``resources`` (Kubernetes core/v1 ResourceRequirements)."""

    requests: Mapping[str, str]
    limits: Mapping[str, str]


def worker_resources(shape: SliceShape) -> ResourceRequirements:
    """Container resources of one TPU host pod: every chip, ~80% of the VM's CPU and memory."""
    vcpu, gb = shape.host_vcpus, shape.host_memory_gb
    cpu = str(math.floor(vcpu * NODE_FRACTION))
    memory = f"{math.floor(gb * NODE_FRACTION)}G"
    chips = str(shape.chips_per_vm)
    # Memory and chips as limits too (no overcommit, guaranteed chips); no CPU limit: one pod
    # per VM, and CFS throttling only hurts the input pipeline.
    return {
        "requests": {"cpu": cpu, "memory": memory, TPU_RESOURCE: chips},
        "limits": {"memory": memory, TPU_RESOURCE: chips},
    }
