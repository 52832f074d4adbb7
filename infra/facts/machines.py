"""Machine types as data: the vCPUs and memory of TPU VMs and of the general-purpose VMs a
system pool may use, and what GKE leaves of them to pods (its reservation formula).

The TPU side of a machine type (chips per VM, which generation) is in
:mod:`raytpu.facts.catalog`; this module knows only sizes, so the fit checks
(:mod:`raytpu.config.node_fit`) and the catalog read one table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# vCPUs and memory (GB, as GCE lists them) of each TPU VM machine type: what a Ray worker
# pod, one per host, may request.
MACHINE_RESOURCES: dict[str, tuple[int, int]] = {
    "ct4p-hightpu-4t": (240, 407),
    "ct5lp-hightpu-1t": (24, 48),
    "ct5lp-hightpu-4t": (112, 192),
    "ct5lp-hightpu-8t": (224, 384),
    "ct5p-hightpu-4t": (208, 448),
    "ct6e-standard-1t": (44, 176),
    "ct6e-standard-4t": (180, 720),
    "ct6e-standard-8t": (180, 1440),
    # cloud.google.com/tpu/docs/tpu7x: "Number of vCPUs (4-chip VM) 224", "RAM (GB) 960".
    "tpu7x-standard-4t": (224, 960),
}


def _family(prefix: str, gb_per_vcpu: float, vcpus: tuple[int, ...],
            memory_gb: Mapping[int, float] | None = None) -> dict[str, tuple[int, float]]:
    odd = memory_gb or {}
    return {f"{prefix}-{n}": (n, odd.get(n, n * gb_per_vcpu)) for n in vcpus}


# vCPUs and memory (GB as Compute Engine lists it, 1 GB = 2^30 bytes) of the general-purpose
# machine types a CPU (system) pool may use: their memory is a fixed ratio per vCPU within a
# family (n2-highmem-128 is the exception). Source: the E2, N1, N2, N2D, N4 and C3 tables of
# cloud.google.com/compute/docs/general-purpose-machines.
GENERAL_PURPOSE_MACHINES: dict[str, tuple[int, float]] = {
    **_family("e2-standard", 4, (2, 4, 8, 16, 32)),
    **_family("e2-highmem", 8, (2, 4, 8, 16)),
    **_family("e2-highcpu", 1, (2, 4, 8, 16, 32)),
    **_family("n1-standard", 3.75, (1, 2, 4, 8, 16, 32, 64, 96)),
    **_family("n2-standard", 4, (2, 4, 8, 16, 32, 48, 64, 80, 96, 128)),
    **_family("n2-highmem", 8, (2, 4, 8, 16, 32, 48, 64, 80, 96, 128), {128: 864}),
    **_family("n2-highcpu", 1, (2, 4, 8, 16, 32, 48, 64, 80, 96)),
    **_family("n2d-standard", 4, (2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224)),
    **_family("n2d-highmem", 8, (2, 4, 8, 16, 32, 48, 64, 80, 96)),
    **_family("n2d-highcpu", 1, (2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224)),
    **_family("n4-standard", 4, (2, 4, 8, 16, 32, 48, 64, 80)),
    **_family("n4-highmem", 8, (2, 4, 8, 16, 32, 48, 64, 80)),
    **_family("n4-highcpu", 2, (2, 4, 8, 16, 32, 48, 64, 80)),
    **_family("c3-standard", 4, (4, 8, 22, 44, 88, 176)),
    **_family("c3-highmem", 8, (4, 8, 22, 44, 88, 176)),
    **_family("c3-highcpu", 2, (4, 8, 22, 44, 88, 176)),
}


def machine_resources(machine_type: str) -> tuple[int, float] | None:
    """(vCPUs, memory GB) of a TPU VM or general-purpose machine type; None if not listed."""
    if machine_type in MACHINE_RESOURCES:
        vcpus, gb = MACHINE_RESOURCES[machine_type]
        return vcpus, float(gb)
    return GENERAL_PURPOSE_MACHINES.get(machine_type)


# What GKE Standard reserves on every node for the kubelet, the container runtime and the OS
# (cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes, "Memory and CPU
# reservations"): a share of each successive tier of the machine's CPU and memory. A tier is
# (size, fraction); the last tier has no upper bound.
GKE_CPU_RESERVATION: tuple[tuple[float | None, float], ...] = (
    (1, 0.06), (1, 0.01), (2, 0.005), (None, 0.0025),  # cores
)
GKE_MEMORY_RESERVATION: tuple[tuple[float | None, float], ...] = (
    (4, 0.25), (4, 0.20), (8, 0.10), (112, 0.06), (None, 0.02),  # GiB
)
GKE_SMALL_MACHINE_MEMORY_RESERVATION_MIB = 255  # machines with less than 1 GiB
GKE_EVICTION_THRESHOLD_MIB = 100  # kubelet's hard eviction threshold, also not allocatable


def _tiered(total: float, tiers: tuple[tuple[float | None, float], ...]) -> float:
    reserved, left = 0.0, total
    for size, fraction in tiers:
        part = left if size is None else min(left, size)
        reserved += part * fraction
        left -= part
        if left <= 0:
            break
    return reserved


@dataclass(frozen=True)
class NodeAllocatable:
    """What pods may request on one GKE node of a machine type (GKE's formula)."""

    machine_type: str
    vcpus: int
    memory_gib: float
    cpu: float
    """Allocatable cores."""
    memory_bytes: int

    @property
    def memory_gib_allocatable(self) -> float:
        return self.memory_bytes / 2**30


def node_allocatable(machine_type: str) -> NodeAllocatable | None:
    """GKE's allocatable CPU and memory for ``machine_type``; None if the catalog does not
    list the machine type. The kernel also keeps a little memory (GKE's own example, a 4 vCPU
    16 GB node, shows 13498416Ki allocatable, 3 % under this formula): callers leave headroom."""
    res = machine_resources(machine_type)
    if res is None:
        return None
    vcpus, gib = res
    cpu = vcpus - _tiered(vcpus, GKE_CPU_RESERVATION)
    reserved_mib: float
    if gib < 1:
        reserved_mib = GKE_SMALL_MACHINE_MEMORY_RESERVATION_MIB
    else:
        reserved_mib = _tiered(gib, GKE_MEMORY_RESERVATION) * 1024
    memory = gib * 2**30 - (reserved_mib + GKE_EVICTION_THRESHOLD_MIB) * 2**20
    return NodeAllocatable(machine_type, vcpus, gib, cpu, int(memory))
