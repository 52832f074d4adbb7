"""The Cloud TPU catalog: every fact about TPU generations and slice shapes, as data.

Everything that depends on a TPU shape (node pools, Ray worker groups, the trainer's
MFU) derives it from here. Sources: ``shared/ref/tpu`` (xpk 1.16.0's table and the
Cloud TPU version pages) and ``shared/ref/notes/gke-tpu.md``.

Vocabulary used throughout the package:

* *slice*: one TPU slice = one GKE node pool, created and removed as a unit.
* *host*: one TPU VM = one GKE node = one Ray worker pod. ``hosts = chips / chips_per_vm``.
* *accelerator type*: the Cloud TPU name. v4/v5p names count TensorCores (``v4-16`` is
  8 chips), v5e/v6e names count chips (``v5litepod-16`` is 16 chips).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Literal

from raytpu.facts.machines import MACHINE_RESOURCES
from raytpu.facts.ray_topologies import (
    RAY_2D,
    RAY_SMALL_3D,
    RAY_V7X,
    RayTopologies,
    topology_chips,
)

# Label keys GKE puts on TPU nodes; pods select a slice's pool with all three.
ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
# Kubernetes' well-known label, set by GKE on every node (TPU nodes included, e.g.
# `node.kubernetes.io/instance-type=ct6e-standard-4t`): it tells apart two pools of one
# accelerator and topology on different VMs (v5e 2x4 = 1 x ct5lp-hightpu-8t or 2 x -4t).
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
# Extended resource and taint key on every TPU node.
TPU_RESOURCE = "google.com/tpu"


@dataclass(frozen=True)
class Generation:
    """One TPU generation as GKE exposes it."""

    name: str
    """Short name used in this package: v4, v5e, v5p, v6e, tpu7x."""
    type_prefix: str
    """Prefix of the Cloud TPU accelerator type names (``v5litepod`` for v5e)."""
    accelerator_label: str
    """Value of the ``cloud.google.com/gke-tpu-accelerator`` node label."""
    tensorcores_per_chip: int
    topology_dims: int
    machine_types: Mapping[int, str]
    """GKE machine type per chips-per-VM."""
    multi_host_chips_per_vm: int
    """Chips per VM of the machine type multi-host slices use."""
    max_chips: int
    """Largest slice GKE documents for this generation."""
    peak_bf16_flops_per_chip: float
    hbm_bytes_per_chip: int
    """HBM per chip as the generation's Cloud TPU page states it (``source``): GiB where it
    says GiB, GB (10^9 bytes) where it says GB, so a fit check never assumes more memory
    than the page promises."""
    zones: tuple[str, ...]
    """Zones the Cloud TPU regions page lists (it changes often: a miss is a warning)."""
    min_gke_version: str | None
    """Minimum GKE version for TPU node pools, where a source states it."""
    ray_accelerator_type: str
    """Ray's accelerator type resource for this generation (``ray.util.accelerators``)."""
    ray_topologies: RayTopologies
    """The topologies Ray's TPU layer accepts for this generation (see :class:`RayTopologies`)."""
    source: str
    multi_host_placement: Literal["compact", "workload-policy"] = "compact"
    """How GKE places a multi-host slice's VMs: a ``COMPACT`` placement policy with the
    slice's ``tpuTopology`` (v4-v6e), or a ``HIGH_THROUGHPUT`` workload policy (a compute
    resource policy carrying the topology) named as the pool's placement policy (Ironwood:
    GKE refuses COMPACT for it, "Use workload policy instead"; xpk 1.16
    ``requires_workload_policy``)."""
    max_dimension: int | None = None
    """Largest side of a 3-D topology, where a source caps it below ``max_chips``."""
    ray_pod_prefix: str | None = None
    """Prefix of the pod type Ray derives from ``TPU_ACCELERATOR_TYPE`` where it differs
    from ``type_prefix`` (Ray names ``tpu7x-16`` ``v7x-16``)."""

    @property
    def names_count_tensorcores(self) -> bool:
        return self.tensorcores_per_chip > 1

    def accelerator_type(self, chips: int) -> str:
        return f"{self.type_prefix}-{chips * self.tensorcores_per_chip}"


GENERATIONS: dict[str, Generation] = {
    g.name: g
    for g in (
        Generation(
            name="v4",
            type_prefix="v4",
            accelerator_label="tpu-v4-podslice",
            tensorcores_per_chip=2,
            topology_dims=3,
            machine_types={4: "ct4p-hightpu-4t"},
            multi_host_chips_per_vm=4,
            max_chips=3072,  # 12x16x16, "About TPUs in GKE"
            peak_bf16_flops_per_chip=275e12,
            hbm_bytes_per_chip=32 * 2**30,  # "HBM2 capacity and bandwidth: 32 GiB"
            zones=("us-central2-b",),
            min_gke_version=None,
            ray_accelerator_type="TPU-V4",
            ray_topologies=RayTopologies(RAY_SMALL_3D, (12, 12, 16)),
            source="cloud.google.com/tpu/docs/v4",
        ),
        Generation(
            name="v5e",
            type_prefix="v5litepod",
            accelerator_label="tpu-v5-lite-podslice",
            tensorcores_per_chip=1,
            topology_dims=2,
            machine_types={1: "ct5lp-hightpu-1t", 4: "ct5lp-hightpu-4t", 8: "ct5lp-hightpu-8t"},
            multi_host_chips_per_vm=4,
            max_chips=256,
            peak_bf16_flops_per_chip=197e12,
            hbm_bytes_per_chip=16 * 10**9,  # "HBM capacity per chip: 16 GB"
            zones=(
                "us-central1-a", "us-south1-a", "us-west1-c", "us-west4-a",
                "us-east5-a", "us-east5-b", "us-east5-c",
            ),
            min_gke_version=None,
            ray_accelerator_type="TPU-V5LITEPOD",
            ray_topologies=RayTopologies(RAY_2D),
            source="cloud.google.com/tpu/docs/v5e",
        ),
        Generation(
            name="v5p",
            type_prefix="v5p",
            accelerator_label="tpu-v5p-slice",
            tensorcores_per_chip=2,
            topology_dims=3,
            machine_types={4: "ct5p-hightpu-4t"},
            multi_host_chips_per_vm=4,
            max_chips=6144,  # 16x16x24
            peak_bf16_flops_per_chip=459e12,
            hbm_bytes_per_chip=95 * 2**30,  # "HBM capacity per chip (GiB): 95"
            zones=("us-central1-a", "us-east5-a", "us-east5-b", "us-east5-c", "us-south1-a"),
            min_gke_version=None,
            ray_accelerator_type="TPU-V5P",
            ray_topologies=RayTopologies(RAY_SMALL_3D, (16, 16, 24)),
            source="cloud.google.com/tpu/docs/v5p",
        ),
        Generation(
            name="v6e",
            type_prefix="v6e",
            accelerator_label="tpu-v6e-slice",
            tensorcores_per_chip=1,
            topology_dims=2,
            machine_types={1: "ct6e-standard-1t", 4: "ct6e-standard-4t", 8: "ct6e-standard-8t"},
            multi_host_chips_per_vm=4,
            max_chips=256,
            peak_bf16_flops_per_chip=918e12,
            hbm_bytes_per_chip=32 * 10**9,  # "HBM capacity per chip: 32 GB"
            zones=(
                "us-central1-b", "us-east1-d", "us-east5-a", "us-east5-b", "us-east5-c",
                "us-east4-a", "us-east4-b", "us-west1-c",
            ),
            min_gke_version="1.31.2-gke.1115000",
            ray_accelerator_type="TPU-V6E",
            ray_topologies=RayTopologies(RAY_2D),
            source="cloud.google.com/tpu/docs/v6e",
        ),
        Generation(
            # Ironwood. xpk 1.16 also lists a 1-chip tpu7x-standard-1t (1x1x1); the Cloud TPU
            # and GKE Ironwood pages document only the 4-chip VM ("each TPU7x VM contains 4
            # chips") and give no size for a 1-chip one, so only the 4-chip VM is offered.
            name="tpu7x",
            type_prefix="tpu7x",
            accelerator_label="tpu7x",
            tensorcores_per_chip=2,
            topology_dims=3,
            machine_types={4: "tpu7x-standard-4t"},
            multi_host_chips_per_vm=4,
            max_chips=9216,  # "9,216-chip footprint per pod"; xpk: 144 cubes of 64 chips
            peak_bf16_flops_per_chip=2307e12,
            hbm_bytes_per_chip=192 * 2**30,  # "HBM capacity per chip (GiB): 192"
            zones=("us-central1-c",),
            min_gke_version="1.34.0-gke.2201000",  # GKE Standard (tpu-ironwood concept page)
            ray_accelerator_type="TPU-V7X",
            ray_topologies=RayTopologies(RAY_V7X),
            source="cloud.google.com/tpu/docs/tpu7x",
            multi_host_placement="workload-policy",
            max_dimension=256,  # xpk 1.16 generate_tpu_topologies: sides 4..256
            ray_pod_prefix="v7x",
        ),
    )
}

# Accepted spellings of a name prefix -> generation ("v5e-16" is how Ray names v5litepod-16).
_PREFIX_ALIASES: dict[str, str] = {g.type_prefix: g.name for g in GENERATIONS.values()}
_PREFIX_ALIASES["v5e"] = "v5e"
_PREFIX_ALIASES["v7x"] = "tpu7x"  # Ray's spelling of Ironwood's names

# v5e/v6e topologies (Cloud TPU v5e/v6e pages; 2x8 is not one of them).
_TOPOLOGIES_2D = ("1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")
# v4/v5p below 64 chips; larger ones are A<=B<=C, all multiples of 4.
_SMALL_3D = ("2x2x1", "2x2x2", "2x2x4", "2x4x4")


class CatalogError(ValueError):
    """A TPU name, topology or machine type the catalog does not know.

    ``field`` names the slice key at fault (tpu, topology, machineType) so that the
    config layer can prefix the full key path.
    """

    def __init__(self, field: str, value: object, problem: str, valid: list[str]) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        self.valid = valid
        shown = ", ".join(valid[:12]) + (", ..." if len(valid) > 12 else "")
        super().__init__(f"{value!r} {problem}; valid: {shown}")




@cache
def valid_topologies(generation: str) -> tuple[str, ...]:
    """Every topology GKE accepts for a generation, smallest first."""
    gen = GENERATIONS[generation]
    if gen.topology_dims == 2:
        return tuple(t for t in _TOPOLOGIES_2D if topology_chips(t) <= gen.max_chips)
    side = gen.max_dimension or gen.max_chips
    big = [
        (a, b, c)
        for a in range(4, gen.max_chips + 1, 4)
        for b in range(a, gen.max_chips // a + 1, 4)
        for c in range(b, min(side, gen.max_chips // (a * b)) + 1, 4)
    ]
    big.sort(key=lambda t: (t[0] * t[1] * t[2], t[2], t[1]))
    return _SMALL_3D + tuple("x".join(map(str, t)) for t in big)


@cache
def accelerator_types(generation: str) -> tuple[str, ...]:
    """Accelerator type names of a generation, smallest first."""
    gen = GENERATIONS[generation]
    chips = sorted({topology_chips(t) for t in valid_topologies(generation)})
    return tuple(gen.accelerator_type(c) for c in chips)


def all_accelerator_types() -> list[str]:
    return [name for g in GENERATIONS for name in accelerator_types(g)]


def _default_topology(generation: str, chips: int) -> str:
    # The most cubic shape (the one xpk and the Cloud TPU docs pick for a name), among those
    # Ray accepts when it accepts any of them (see RayTopologies).
    candidates = [t for t in valid_topologies(generation) if topology_chips(t) == chips]
    ray_ok = [t for t in candidates if GENERATIONS[generation].ray_topologies.accepts(t)]
    return min(ray_ok or candidates, key=lambda t: max(int(d) for d in t.split("x")))


# xpk 1.16.0 core/nodepool.py: a system with supports_accelerator_network_profile (every v6e
# one of core/system_characteristics.py, on ct6e-standard-1t and -4t; no other TPU) gets
# `--accelerator-network-profile=auto --node-labels=cloud.google.com/gke-networking-dra-driver
# =true`: GKE sets up the accelerator's high-performance networking (pulumi-gcp 10.2
# NodePoolNetworkConfig.acceleratorNetworkProfile). xpk lists no ct6e-standard-8t: unsourced.
ACCELERATOR_NETWORK_PROFILE_MACHINES = frozenset({"ct6e-standard-1t", "ct6e-standard-4t"})
DRA_NETWORKING_LABEL = ("cloud.google.com/gke-networking-dra-driver", "true")


@dataclass(frozen=True)
class SliceShape:
    """One TPU slice: what its node pool and its Ray worker group are made of."""

    generation: Generation
    """TPU generation (v4, v5e, v5p, v6e) and its facts."""
    accelerator_type: str
    """GKE accelerator label value (``tpu-v5-lite-podslice``)."""
    topology: str
    """Chip topology (``2x4``, ``2x2x2``)."""
    machine_type: str
    """Machine type of each host VM (``ct5lp-hightpu-4t``)."""
    chips_per_vm: int
    """Chips per host VM: each TPU pod requests this many ``google.com/tpu``."""

    @property
    def chips(self) -> int:
        return topology_chips(self.topology)

    @property
    def tensorcores(self) -> int:
        return self.chips * self.generation.tensorcores_per_chip

    @property
    def hosts(self) -> int:
        """GKE nodes (TPU VMs) of one slice: the node pool's node count."""
        return self.chips // self.chips_per_vm

    @property
    def multi_host(self) -> bool:
        return self.hosts > 1

    @property
    def accelerator_network_profile(self) -> str | None:
        """``networkConfig.acceleratorNetworkProfile`` of this shape's node pools (with
        :data:`DRA_NETWORKING_LABEL` on their nodes), as xpk 1.16.0 creates them; ``None``
        where xpk sets none."""
        return "auto" if self.machine_type in ACCELERATOR_NETWORK_PROFILE_MACHINES else None

    @property
    def node_selector(self) -> dict[str, str]:
        """The labels GKE puts on every node of this slice's pools, and only on those of this
        shape: accelerator + topology, and the machine type (v5e/v6e 2x4 is one 8-chip VM or
        two 4-chip VMs: the same accelerator and topology labels). The one source of the
        selector: node pools report it, Ray worker groups and Kueue flavors select by it."""
        return {
            ACCELERATOR_LABEL: self.generation.accelerator_label,
            TOPOLOGY_LABEL: self.topology,
            INSTANCE_TYPE_LABEL: self.machine_type,
        }

    @property
    def ray_accepts_topology(self) -> bool:
        """Whether Ray's TPU layer accepts this slice's topology (:class:`RayTopologies`)."""
        return self.generation.ray_topologies.accepts(self.topology)

    @property
    def host_vcpus(self) -> int:
        return MACHINE_RESOURCES[self.machine_type][0]

    @property
    def host_memory_gb(self) -> int:
        return MACHINE_RESOURCES[self.machine_type][1]

    @property
    def peak_bf16_flops(self) -> float:
        return self.chips * self.generation.peak_bf16_flops_per_chip

    @property
    def ray_head_resource(self) -> str:
        """The resource Ray advertises on worker 0 of a slice, e.g. ``TPU-v4-16-head``."""
        return f"TPU-{self.ray_pod_type}-head"

    @property
    def ray_pod_type(self) -> str:
        """The pod type Ray derives from ``TPU_ACCELERATOR_TYPE`` (v5litepod-16 -> v5litepod-16,
        tpu7x-16 -> v7x-16)."""
        prefix = self.generation.ray_pod_prefix
        if prefix is None:
            return self.accelerator_type
        return f"{prefix}-{self.tensorcores}"

    @property
    def workload_policy(self) -> bool:
        """Whether this slice's pool is placed by a workload policy (multi-host Ironwood)
        rather than by COMPACT placement; single-host pools carry no placement at all."""
        return self.multi_host and self.generation.multi_host_placement == "workload-policy"


def _split_name(tpu: str) -> tuple[Generation, int]:
    prefix, sep, count = tpu.strip().rpartition("-")
    gen_name = _PREFIX_ALIASES.get(prefix.lower())
    if not sep or gen_name is None:
        raise CatalogError("tpu", tpu, "is not a TPU accelerator type", all_accelerator_types())
    gen = GENERATIONS[gen_name]
    valid = list(accelerator_types(gen.name))
    if not count.isdigit() or int(count) == 0:
        raise CatalogError("tpu", tpu, f"is not a TPU {gen.name} accelerator type", valid)
    units = int(count)
    chips, rest = divmod(units, gen.tensorcores_per_chip)
    if rest or gen.accelerator_type(chips) not in valid:
        hint = " (v4/v5p names count TensorCores, 2 per chip)" if rest else ""
        raise CatalogError("tpu", tpu, f"is not a TPU {gen.name} accelerator type{hint}", valid)
    return gen, chips


def slice_shape(
    tpu: str, topology: str | None = None, machine_type: str | None = None
) -> SliceShape:
    """Resolve an accelerator type (and optional topology / machine type) to a slice shape.

    Raises :class:`CatalogError` naming the field at fault and the valid choices.
    """
    gen, chips = _split_name(tpu)
    name = gen.accelerator_type(chips)
    if topology is None:
        topology = _default_topology(gen.name, chips)
    else:
        matching = [t for t in valid_topologies(gen.name) if topology_chips(t) == chips]
        if topology not in matching:
            raise CatalogError("topology", topology, f"is not a topology of {name}", matching)

    # Machine types whose VM fits the topology; a multi-host slice uses the 4-chip VM.
    fitting = {c: m for c, m in gen.machine_types.items() if c <= chips and chips % c == 0}
    allowed = {
        c: m for c, m in fitting.items()
        if chips // c == 1 or c == gen.multi_host_chips_per_vm
    }
    if machine_type is None:
        # Fewest hosts: a topology that fits one VM is a single-host slice.
        chips_per_vm = max(allowed)
    else:
        by_name = {m: c for c, m in allowed.items()}
        if machine_type not in by_name:
            raise CatalogError(
                "machineType", machine_type, f"cannot host a {name} ({topology}) slice",
                sorted(by_name),
            )
        chips_per_vm = by_name[machine_type]
    return SliceShape(gen, name, topology, gen.machine_types[chips_per_vm], chips_per_vm)


def generation_of_label(accelerator_label: str) -> Generation:
    for gen in GENERATIONS.values():
        if gen.accelerator_label == accelerator_label:
            return gen
    raise KeyError(accelerator_label)
