"""Will the stack's pods schedule, and will Ray accept its slices? Checked at config time.

* The Ray head (``raytpu:ray.headCpu`` / ``headMemory``, plus KubeRay's autoscaler sidecar when
  a slice group is elastic) must fit one node of ``raytpu:cluster.systemPool.machineType``
  after GKE's reservations (:func:`raytpu.facts.machines.node_allocatable`), with headroom for the
  DaemonSets every GKE node runs and, on the system pool, the operators. Requests equal limits
  on the head, so a head that does not fit stays Pending forever and the pool's autoscaler
  cannot help (every node of the pool has the same size).
* Each TPU worker pod (one per TPU VM) must fit its VM's allocatable the same way.
* Ray's TPU layer accepts only some topologies
  (:class:`raytpu.facts.ray_topologies.RayTopologies`); a slice it rejects would fail at
  job start ("Invalid accelerator topology").

Kubernetes quantities (``500m``, ``16Gi``, ``1.5``, ``64G``, ``1e3``) are parsed as the API
server parses them (``k8s.io/apimachinery/pkg/api/resource``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from raytpu.facts import catalog, machines, versions
from raytpu.facts.ray_topologies import RAY_VERSION_OF_TOPOLOGIES

if TYPE_CHECKING:
    from raytpu.config.stack import SliceGroupConfig, StackConfig

# Share of a node's allocatable left free for what else runs there: every GKE node's
# DaemonSets (kube-proxy, logging, metadata server, the TPU device plugin on TPU nodes) and, on
# the system pool, cert-manager, KubeRay and the TPU webhook; it also covers the ~3 % of
# memory the kernel keeps below GKE's formula (machines.node_allocatable). A policy, not a fact.
HEADROOM = 0.10

# KubeRay 1.7.0 common/pod.go BuildAutoscalerContainer: the in-tree autoscaler sidecar in the
# head pod requests = limits 500m / 512Mi unless autoscalerOptions.resources says otherwise.
AUTOSCALER_SIDECAR_CPU = Decimal("0.5")
AUTOSCALER_SIDECAR_MEMORY = Decimal(512 * 2**20)

_SUFFIXES: dict[str, Decimal] = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12, "P": Decimal(10) ** 15, "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40, "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60,
}
# <signedNumber><suffix>: suffix is a binary SI one, a decimal SI one, or a decimal exponent.
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$"
)


def parse_quantity(value: str | int | float) -> Decimal:
    """A Kubernetes resource quantity as a number (cores, or bytes). ValueError if malformed."""
    text = str(value).strip()
    m = _QUANTITY.match(text)
    if not m:
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 2, 500m, 8Gi, 16G)")
    try:
        number = Decimal(m.group("num"))
    except InvalidOperation:  # pragma: no cover - the pattern only lets numbers through
        raise ValueError(f"{value!r} is not a Kubernetes quantity") from None
    suffix = m.group("suffix") or ""
    if suffix[:1] in ("e", "E"):
        return number * Decimal(10) ** int(suffix[1:])
    return number * _SUFFIXES[suffix]


def _gib(n: Decimal | float) -> str:
    return f"{float(n) / 2**30:.1f} GiB"


def request_problems(
    cpu: Decimal, memory: Decimal, machine_type: str, what: str
) -> list[str]:
    """Why ``cpu`` cores and ``memory`` bytes do not fit one ``machine_type`` node (with
    :data:`HEADROOM`); ``what`` names the pod and keys in the message."""
    alloc = machines.node_allocatable(machine_type)
    if alloc is None:
        return []
    usable = Decimal(1 - HEADROOM)
    cpu_cap = Decimal(str(alloc.cpu)) * usable
    mem_cap = Decimal(alloc.memory_bytes) * usable
    problems = []
    if cpu > cpu_cap:
        problems.append(
            f"{what} request {cpu.normalize():f} CPU, more than a {machine_type} node can give: "
            f"{alloc.cpu:.2f} allocatable of {alloc.vcpus} vCPUs after GKE's reservations, "
            f"{float(cpu_cap):.2f} with {HEADROOM:.0%} left for DaemonSets and operators")
    if memory > mem_cap:
        problems.append(
            f"{what} request {_gib(memory)} of memory, more than a {machine_type} node can "
            f"give: {_gib(alloc.memory_bytes)} allocatable of {alloc.memory_gib:g} GiB after "
            f"GKE's reservations, {_gib(mem_cap)} with {HEADROOM:.0%} left for DaemonSets and "
            "operators")
    return problems


def head_problems(cfg: StackConfig) -> list[str]:
    """The Ray head (+ autoscaler sidecar) against the system pool's machine type."""
    r, machine = cfg.ray, cfg.cluster.system_pool.machine_type
    problems: list[str] = []
    try:
        cpu = parse_quantity(r.head_cpu)
    except ValueError as e:
        problems.append(f"raytpu:ray.headCpu: {e}")
    try:
        memory = parse_quantity(r.head_memory)
    except ValueError as e:
        problems.append(f"raytpu:ray.headMemory: {e}")
    if problems:
        return problems
    if cpu <= 0 or memory <= 0:
        return [f"raytpu:ray.headCpu / headMemory: {r.head_cpu!r} / {r.head_memory!r} must be "
                "positive"]
    sidecar = any(s.elastic for s in cfg.slices)
    if sidecar:
        cpu, memory = cpu + AUTOSCALER_SIDECAR_CPU, memory + AUTOSCALER_SIDECAR_MEMORY
    what = (f"raytpu:ray.headCpu {r.head_cpu!r} / headMemory {r.head_memory!r}: the Ray head "
            f"pod on raytpu:cluster.systemPool.machineType {machine!r}"
            + (" (with KubeRay's 500m/512Mi autoscaler sidecar, on for elastic slices)"
               if sidecar else "") + " would")
    return request_problems(cpu, memory, machine, what)


def worker_problems(
    shape: catalog.SliceShape, resources: Mapping[str, Any], key: str
) -> list[str]:
    """One TPU worker pod's requests against its TPU VM's allocatable."""
    req = resources.get("requests", {})
    cpu = parse_quantity(req.get("cpu", "0"))
    memory = parse_quantity(req.get("memory", "0"))
    return request_problems(cpu, memory, shape.machine_type,
                            f"{key}: each Ray worker pod on {shape.machine_type} would")


def ray_topology_problem(
    shape: catalog.SliceShape, key: str, topology_given: bool = True
) -> str | None:
    """A slice whose topology GKE accepts but Ray's TPU layer rejects: on ``.topology`` with
    the alternatives Ray takes for the same chips, or on ``.tpu`` when there are none."""
    if shape.ray_accepts_topology:
        return None
    gen = shape.generation
    rule = gen.ray_topologies
    ray_ok = [t for t in catalog.valid_topologies(gen.name)
              if catalog.topology_chips(t) == shape.chips and rule.accepts(t)]
    why = (f"GKE accepts it but Ray {RAY_VERSION_OF_TOPOLOGIES} rejects it (ScalingConfig "
           "/ SlicePlacementGroup: 'Invalid accelerator topology'); Ray accepts for TPU "
           f"{gen.name}: {rule.describe()}")
    if ray_ok or topology_given:
        alternatives = f"; same chips, accepted by Ray: {', '.join(ray_ok)}" if ray_ok else ""
        return (f"{key}.topology: {shape.topology!r} ({shape.accelerator_type}): {why}"
                f"{alternatives}")
    largest = max((t for t in catalog.valid_topologies(gen.name) if rule.accepts(t)),
                  key=catalog.topology_chips)
    return (f"{key}.tpu: {shape.accelerator_type!r} has no topology Ray accepts: {why}; the "
            f"largest is {gen.accelerator_type(catalog.topology_chips(largest))} ({largest})")


def _yaml(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else repr(value)


def kuberay_problems(cfg: StackConfig) -> list[str]:
    """The TPU webhook image and KubeRay's RayMultiHostIndexing gate must agree (helm mode)."""
    k = cfg.kuberay
    if k.mode != "helm":
        return [f"raytpu:kuberay.{key}: {_yaml(value)} applies to raytpu:kuberay.mode 'helm' only; "
                "the GKE add-on runs its own webhook and KubeRay"
                for key, value in (("webhookImage", k.webhook_image),
                                   ("multiHostIndexing", k.multi_host_indexing))
                if value is not None]
    from raytpu.spec.kuberay_operator import split_image

    image = k.webhook_image or versions.TPU_WEBHOOK_IMAGE.reference
    try:
        split_image(image)
    except ValueError:
        return [f"raytpu:kuberay.webhookImage: {image!r} needs a tag "
                "(<repository>:<tag>[@sha256:...]): the webhook chart renders "
                "'<repository>:<tag>'"]
    if k.multi_host_indexing and image == versions.TPU_WEBHOOK_IMAGE.reference:
        return [f"raytpu:kuberay.multiHostIndexing: true needs raytpu:kuberay.webhookImage, a TPU "
                f"webhook built from {versions.TPU_WEBHOOK_MULTIHOST_INDEXING_FIX} or later: the "
                f"default image {versions.TPU_WEBHOOK_IMAGE.tag} injects a podAffinity no pod "
                "matches when KubeRay's multi-host labels are on, and multi-host workers stay "
                "Pending"]
    return []


def fit_problems(cfg: StackConfig) -> list[str]:
    """Every scheduling / Ray-acceptance problem of a structurally valid stack."""
    from raytpu.spec.pod_resources import worker_resources  # no cycle at import

    problems = head_problems(cfg) + kuberay_problems(cfg)
    for i, s in enumerate(cfg.slices):
        key = f"raytpu:slices[{i}]"
        try:
            shape = s.shape
        except catalog.CatalogError:
            continue  # reported by the slice checks
        problem = ray_topology_problem(shape, key, topology_given=s.topology is not None)
        if problem:
            problems.append(problem)
        problems += worker_problems(shape, worker_resources(shape), key)
    return problems


def _shape_error(s: SliceGroupConfig) -> bool:
    try:
        s.shape  # noqa: B018 - resolving the shape is the check
    except catalog.CatalogError:
        return True
    return False


def fit_warnings(cfg: StackConfig) -> list[str]:
    """What is allowed but worth a line: a system machine type the catalog cannot check, and
    slice groups whose pods could land on each other's pools (same selector)."""
    out = []
    machine = cfg.cluster.system_pool.machine_type
    if machines.node_allocatable(machine) is None:
        out.append(f"raytpu:cluster.systemPool.machineType: {machine!r} is not in the catalog; "
                   "whether the Ray head (raytpu:ray.headCpu / headMemory) fits a node is not "
                   "checked")
    if cfg.kuberay.mode == "gke-addon":
        multi = [s.name for s in cfg.slices
                 if not _shape_error(s) and s.shape.multi_host]
        if multi:
            out.append(
                f"raytpu:kuberay.mode: 'gke-addon' runs GKE's own KubeRay and TPU webhook, whose "
                "versions GKE does not document; multi-host groups "
                f"({', '.join(multi)}) schedule only if that webhook handles KubeRay's "
                f"RayMultiHostIndexing labels ({versions.TPU_WEBHOOK_MULTIHOST_INDEXING_FIX}+) "
                f"or GKE keeps the gate off. After `pulumi up`: `kubectl -n {cfg.ray.namespace} "
                "get pods -l ray.io/node-type=worker` must not stay Pending on pod affinity")
    seen: dict[tuple[tuple[str, str], ...], int] = {}
    for i, s in enumerate(cfg.slices):
        try:
            key = tuple(sorted(s.shape.node_selector.items()))
        except catalog.CatalogError:
            continue
        if key in seen:
            out.append(f"raytpu:slices[{i}]: same TPU shape and machine type as "
                       f"raytpu:slices[{seen[key]}] ({s.shape.accelerator_type} "
                       f"{s.shape.topology} on {s.shape.machine_type}): their Ray pods select "
                       "the same node labels and can land on each other's node pools")
        seen.setdefault(key, i)
    return out
