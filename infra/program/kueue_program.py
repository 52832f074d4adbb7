"""The Kueue layer of the stack program: ``raytpu:teams`` -> Kueue install + team queues.

Declared only when the stack has teams (a stack without ``raytpu:teams`` is unchanged).
Where each number comes from:

* a team's ``google.com/tpu`` quota on a slice group's flavor = slices x chips per slice
  (``quota`` nominal, ``borrowing`` borrowing limit); groups of one shape share a flavor and
  their quotas add up;
* its CPU and memory quota = what its TPU quota can run at once: every host pod of every
  slice (the worker pods' requests, :func:`raytpu.spec.pod_resources.worker_resources`)
  plus, per slice (at most one job per slice), one Ray head (``raytpu:ray.headCpu`` /
  ``headMemory``) and one K8sJobMode submitter (Kueue counts KubeRay's default, 500m / 200Mi).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pulumi
from raytpu.components.kueue import Kueue
from raytpu.components.kueue_queues import KueueQueues
from raytpu.components.ray_job import SUBMITTER_RESOURCES
from raytpu.config.key_paths import Keys
from raytpu.config.node_fit import parse_quantity
from raytpu.config.stack import StackConfig
from raytpu.config.teams import LOCAL_QUEUE_NAME, TeamConfig, cluster_queue_name, team_namespace
from raytpu.facts.catalog import SliceShape
from raytpu.facts.names import NODEPOOL_LABEL
from raytpu.spec.kueue import KueueArgs
from raytpu.spec.kueue_queues import HostQuota, KueueQueuesArgs, TeamQueue, TpuFlavor, TpuQuota

# The submitter requests the one RayJob builder sets (KubeRay's defaults), which Kueue v0.19.2
# counts for a K8sJobMode RayJob's submitter PodSet (pkg/controller/jobs/rayjob/
# rayjob_controller.go defaultSubmitterResources).
SUBMITTER_REQUESTS = dict(SUBMITTER_RESOURCES["requests"])
SUBMITTER_CPU = parse_quantity(SUBMITTER_REQUESTS["cpu"])
SUBMITTER_MEMORY = parse_quantity(SUBMITTER_REQUESTS["memory"])


def tpu_flavors(cfg: StackConfig) -> dict[str, TpuFlavor]:
    """The flavor of each slice group, by group name (groups of one shape share one)."""
    by_name: dict[str, TpuFlavor] = {}
    out: dict[str, TpuFlavor] = {}
    for s in cfg.slices:
        g = s.group
        out[s.name] = by_name.setdefault(g.flavor_name, TpuFlavor(g.flavor_name,
                                                                  dict(g.node_selector)))
    return out


def _worker_requests(shape: SliceShape) -> tuple[Decimal, Decimal]:
    from raytpu.spec.pod_resources import worker_resources  # the one sizing

    requests = worker_resources(shape)["requests"]
    return parse_quantity(requests["cpu"]), parse_quantity(requests["memory"])


def _host_need(cfg: StackConfig, slices: dict[str, int]) -> tuple[Decimal, Decimal]:
    """CPU cores and memory bytes that ``slices`` (per group) need at once, heads included."""
    groups = {s.name: s for s in cfg.slices}
    head_cpu = parse_quantity(cfg.ray.head_cpu) + SUBMITTER_CPU
    head_memory = parse_quantity(cfg.ray.head_memory) + SUBMITTER_MEMORY
    cpu = memory = Decimal(0)
    for group, n in slices.items():
        shape = groups[group].shape
        worker_cpu, worker_memory = _worker_requests(shape)
        cpu += n * (shape.hosts * worker_cpu + head_cpu)
        memory += n * (shape.hosts * worker_memory + head_memory)
    return cpu, memory


def _cpu(cores: Decimal) -> str:
    """Cores as a quantity, rounded up to a millicore (``721``, ``903.5``)."""
    millis = math.ceil(cores * 1000)
    whole, rest = divmod(millis, 1000)
    return str(whole) if rest == 0 else f"{whole}.{rest:03d}".rstrip("0")


def _memory(n_bytes: Decimal) -> str:
    """Bytes as a quantity, rounded up to a GiB (readable; at most 1 GiB more)."""
    return f"{math.ceil(n_bytes / 2**30)}Gi"


def team_queue(cfg: StackConfig, team: TeamConfig) -> TeamQueue:
    flavors = tpu_flavors(cfg)
    groups = {s.name: s for s in cfg.slices}
    chips: dict[str, list[int]] = {}  # flavor -> [nominal, borrowing]
    for group in team.slice_groups:
        per_slice = groups[group].shape.chips
        entry = chips.setdefault(flavors[group].name, [0, 0])
        entry[0] += team.quota.get(group, 0) * per_slice
        entry[1] += team.borrowing.get(group, 0) * per_slice
    cpu, memory = _host_need(cfg, team.quota)
    cpu_b, memory_b = _host_need(cfg, team.borrowing)
    return TeamQueue(
        team=team.name,
        namespace=team_namespace(team.name),
        cluster_queue=cluster_queue_name(team.name),
        local_queue=LOCAL_QUEUE_NAME,
        tpu=[TpuQuota(f, n, b) for f, (n, b) in chips.items()],
        host=HostQuota(cpu=_cpu(cpu), memory=_memory(memory), cpu_borrowing=_cpu(cpu_b),
                       memory_borrowing=_memory(memory_b)),
    )


def queues_args(cfg: StackConfig) -> KueueQueuesArgs:
    by_group = tpu_flavors(cfg)
    used = {by_group[g].name for t in cfg.teams for g in t.slice_groups}
    flavors = list({f.name: f for f in by_group.values() if f.name in used}.values())
    return KueueQueuesArgs(flavors=flavors, teams=[team_queue(cfg, t) for t in cfg.teams])


def kueue_args(system_pool: str | None) -> KueueArgs:
    return KueueArgs(node_selector={NODEPOOL_LABEL: system_pool} if system_pool else {})


def build_kueue(
    cfg: StackConfig,
    *,
    provider: pulumi.ProviderResource | None,
    depends_on: Sequence[pulumi.Resource] = (),
    queues_depend_on: Sequence[pulumi.Resource] = (),
    system_pool: str | None = None,
) -> tuple[dict[str, Any], list[pulumi.Resource]]:
    """Declare Kueue and the team queues; nothing without ``raytpu:teams``. Returns the
    stack outputs and what Ray objects must wait for (Kueue's chart: its webhooks served).

    ``depends_on``: what the Kueue install waits for (the cluster, its system pool, the
    KubeRay CRDs its Ray integrations watch; never the TPU pools). ``queues_depend_on``: what
    the LocalQueues wait for besides Kueue (the team namespaces)."""
    if not cfg.teams:
        return {}, []
    providers = [provider] if provider is not None else None
    kueue = Kueue("kueue", kueue_args(system_pool), opts=pulumi.ResourceOptions(
        providers=providers, depends_on=list(depends_on)))
    queues = KueueQueues("teams", queues_args(cfg), opts=pulumi.ResourceOptions(
        providers=providers, depends_on=[*kueue.ready, *queues_depend_on]))
    return {"kueue": kueue.outputs, "kueue_queues": queues.outputs}, list(kueue.ready)


def kueue_problems(cfg: StackConfig) -> list[str]:
    """Problems building the Kueue layer's Args, before anything is declared."""
    if not cfg.teams:
        return []
    try:
        queues_args(cfg)
    except ValueError as e:  # the teams' quotas and shapes make the queues
        return Keys("raytpu:teams").lines(e)
    return []
