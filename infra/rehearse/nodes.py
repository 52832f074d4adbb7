"""Fake GKE nodes that mirror a stack's node pools, for KWOK to keep Ready.

Each pool the plan declares becomes the nodes GKE would give it: the system pool's with
GKE's published allocatable for its machine type, and one node per TPU host of each slice,
labelled as GKE labels TPU nodes (accelerator, topology, machine type,
``cloud.google.com/gke-nodepool``), tainted ``google.com/tpu`` and with the VM's chips as
capacity. Only the plan's own inputs are read, never the components: a node that does not
match what the Ray groups select is a finding, not something to paper over.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from raytpu.facts.catalog import (
    ACCELERATOR_LABEL,
    GENERATIONS,
    INSTANCE_TYPE_LABEL,
    TOPOLOGY_LABEL,
    TPU_RESOURCE,
    slice_shape,
)
from raytpu.facts.machines import machine_resources
from raytpu.facts.names import NODEPOOL_LABEL
from raytpu.plan.values import reveal

if TYPE_CHECKING:
    from raytpu.rehearse.objects import Declared

NODE_POOL_TYPE = "gcp:container/nodePool:NodePool"
SPOT_LABEL = "cloud.google.com/gke-spot"
# KWOK manages only nodes with this annotation (`--manage-nodes-with-annotation-selector`).
KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
GKE_DEFAULT_MAX_PODS = 110
# Allocatable as GKE publishes it (cloud.google.com/kubernetes-engine/docs/concepts/
# plan-node-sizes: its n2-standard-4 example; the others by its reservation table, as
# ../shared/ref/notes/local-control-plane.md §5 lists them). Taken as data, not from
# raytpu.facts.machines.node_allocatable, so a "head fits" check is not the project's formula
# checked against itself. A machine type missing here falls back to that formula (and the
# rehearsal lists it in its caveats).
PUBLISHED_ALLOCATABLE: dict[str, tuple[str, str]] = {
    "n2-standard-4": ("3920m", "13498416Ki"),
    "n2-standard-8": ("7910m", "29719101Ki"),
    "ct4p-hightpu-4t": ("239330m", "411044249Ki"),
    "ct5lp-hightpu-4t": ("111650m", "190109286Ki"),
    "ct6e-standard-4t": ("179480m", "732684451Ki"),
}


class NodesError(Exception):
    """A pool's machine type or topology the catalog does not know."""


@dataclass(frozen=True)
class FakePool:
    """One GKE node pool as the rehearsal builds it."""

    name: str
    """The pool's GKE name (``cloud.google.com/gke-nodepool``)."""
    machine_type: str
    nodes: int
    tpu_chips: int
    """``google.com/tpu`` per node; 0 on CPU pools."""
    topology: str | None
    published: bool
    """Whether the allocatable is GKE's published figure (else the project's formula)."""


def _generation_of(machine_type: str) -> tuple[str, int] | None:
    for gen in GENERATIONS.values():
        for chips, m in gen.machine_types.items():
            if m == machine_type:
                return gen.name, chips
    return None


def _count(inputs: dict[str, Any], at_max: bool) -> int:
    autoscaling = inputs.get("autoscaling")
    if at_max and autoscaling:
        return int(autoscaling.get("maxNodeCount") or autoscaling.get("totalMaxNodeCount") or 0)
    for key in ("nodeCount", "initialNodeCount"):
        if inputs.get(key) is not None:
            return int(inputs[key])
    return 1  # GKE's default node count


def node_name(pool: str, index: int) -> str:
    return f"{pool}-host-{index}"


def _allocatable(machine_type: str) -> tuple[str, str, bool]:
    if machine_type in PUBLISHED_ALLOCATABLE:
        cpu, memory = PUBLISHED_ALLOCATABLE[machine_type]
        return cpu, memory, True
    from raytpu.facts.machines import node_allocatable

    a = node_allocatable(machine_type)
    if a is None:
        raise NodesError(f"node pool machine type {machine_type!r} is not in the catalog "
                         "(raytpu.facts.machines): cannot size its fake nodes")
    return f"{int(a.cpu * 1000)}m", f"{a.memory_bytes // 1024}Ki", False


def fake_nodes(result: Declared, *, at_max: bool = False
               ) -> tuple[list[FakePool], list[dict[str, Any]]]:
    """The pools and their Node objects: each pool at its initial size, or at the most its
    autoscaling allows with ``at_max`` (an elastic slice pool: every slice's hosts)."""
    pools: list[FakePool] = []
    nodes: list[dict[str, Any]] = []
    for r in result.resources:
        if r.type != NODE_POOL_TYPE:
            continue
        inputs = reveal(r.inputs)
        name = str(inputs["name"])
        config = inputs.get("nodeConfig") or {}
        machine_type = str(config.get("machineType") or "e2-medium")
        count = _count(inputs, at_max)
        labels = {NODEPOOL_LABEL: name, INSTANCE_TYPE_LABEL: machine_type,
                  "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  "type": "kwok", **(config.get("labels") or {})}
        zones = inputs.get("nodeLocations") or []
        if zones:
            labels["topology.kubernetes.io/zone"] = str(zones[0])
        if config.get("spot"):
            labels[SPOT_LABEL] = "true"
        taints: list[dict[str, str]] = [dict(t) for t in config.get("taints") or []]
        vcpus_gib = machine_resources(machine_type)
        if vcpus_gib is None:
            raise NodesError(f"node pool {name!r}: machine type {machine_type!r} is not in "
                             "the catalog (raytpu.facts.machines)")
        vcpus, gib = vcpus_gib
        pods = int(inputs.get("maxPodsPerNode") or GKE_DEFAULT_MAX_PODS)
        capacity: dict[str, str] = {"cpu": str(vcpus), "memory": f"{int(gib * 1024)}Mi",
                                    "pods": str(pods), "ephemeral-storage": "100Gi"}
        cpu, memory, published = _allocatable(machine_type)
        allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods),
                       "ephemeral-storage": "95Gi"}
        tpu = _generation_of(machine_type)
        chips, topology = 0, None
        if tpu is not None:
            gen, chips = tpu
            placement = inputs.get("placementPolicy") or {}
            topology = placement.get("tpuTopology") or slice_shape(
                GENERATIONS[gen].accelerator_type(chips), machine_type=machine_type).topology
            labels |= {ACCELERATOR_LABEL: GENERATIONS[gen].accelerator_label,
                       TOPOLOGY_LABEL: str(topology)}
            # GKE taints every TPU node; pods tolerate it (KubeRay's TPU groups, the webhook).
            taints.append({"key": TPU_RESOURCE, "value": "present", "effect": "NoSchedule"})
            capacity[TPU_RESOURCE] = allocatable[TPU_RESOURCE] = str(chips)
        pools.append(FakePool(name, machine_type, count, chips, topology, published))
        for i in range(count):
            node = node_name(name, i)
            nodes.append({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node,
                             "annotations": {KWOK_ANNOTATION[0]: KWOK_ANNOTATION[1],
                                             "node.alpha.kubernetes.io/ttl": "0"},
                             "labels": {**labels, "kubernetes.io/hostname": node}},
                "spec": {"taints": taints} if taints else {},
                "status": {"capacity": capacity, "allocatable": allocatable},
            })
    return pools, nodes


def caveats(pools: list[FakePool]) -> list[str]:
    """What the fake nodes do not carry over from GKE, for the report."""
    return [f"node pool {p.name}: allocatable of {p.machine_type} from the project's formula "
            "(GKE publishes no figure for it here)" for p in pools if not p.published]
