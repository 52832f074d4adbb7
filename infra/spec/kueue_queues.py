"""Inputs of :class:`~raytpu.components.KueueQueues`: TPU flavors, the teams' ClusterQueues and
quotas, and their validation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from raytpu.facts.names import K8S_NAME

PRIORITY_VALUES: Mapping[str, int] = {"low": 100, "default": 500, "high": 1000}
CPU_RESOURCES = ("cpu", "memory")
DEFAULT_COHORT = "raytpu"
DEFAULT_CPU_FLAVOR = "raytpu-cpu"


@dataclass(frozen=True)
class TpuFlavor:
    """A ResourceFlavor of one TPU slice shape."""

    name: str
    """The ResourceFlavor's name."""
    node_labels: Mapping[str, str]
    """The worker group's nodeSelector, exactly."""


@dataclass(frozen=True)
class TpuQuota:
    """A team's quota on one TPU flavor, in ``google.com/tpu`` chips."""

    flavor: str
    """A :class:`TpuFlavor`'s name."""
    nominal_chips: int
    """``nominalQuota``: the team's own chips."""
    borrowing_chips: int = 0
    """``borrowingLimit``: chips it may borrow from the cohort's idle quota."""


@dataclass(frozen=True)
class HostQuota:
    """A team's CPU and memory quota (Kubernetes quantities)."""

    cpu: str
    """Nominal CPU (Ray heads, submitters and TPU host pods)."""
    memory: str
    """Nominal memory."""
    cpu_borrowing: str = "0"
    """CPU the team may borrow along with borrowed slices."""
    memory_borrowing: str = "0"
    """Memory the team may borrow along with borrowed slices."""


@dataclass(frozen=True)
class TeamQueue:
    """One team's ClusterQueue and LocalQueue."""

    team: str
    """The team's name (resource names derive from it)."""
    namespace: str
    """The team's namespace: the ClusterQueue admits only its jobs; the LocalQueue lives
    there."""
    cluster_queue: str
    """The ClusterQueue's name."""
    tpu: Sequence[TpuQuota]
    """TPU quota per flavor."""
    host: HostQuota
    """CPU and memory quota."""
    local_queue: str = "default"
    """The LocalQueue's name (``default``: Kueue's queue for unlabelled jobs)."""


@dataclass(frozen=True)
class KueueQueuesArgs:
    """The flavors, the teams' queues and the priority classes of one fleet."""

    flavors: Sequence[TpuFlavor]
    """One per TPU slice shape some team has quota on."""
    teams: Sequence[TeamQueue]
    """One ClusterQueue + LocalQueue each."""
    cohort: str = DEFAULT_COHORT
    """The cohort every team's ClusterQueue lends to and borrows from."""
    cpu_flavor: str = DEFAULT_CPU_FLAVOR
    """The flavor without node labels that CPU and memory are counted on."""
    priority_values: Mapping[str, int] = field(default_factory=lambda: dict(PRIORITY_VALUES))
    """WorkloadPriorityClass name -> value."""

    def __post_init__(self) -> None:
        flavors = [f.name for f in self.flavors]
        names = [*flavors, self.cpu_flavor]
        if len(set(names)) != len(names):
            raise ValueError(f"flavors: names must be unique: {names}")
        for n in names:
            if not K8S_NAME.match(n) or len(n) > 253:
                raise ValueError(f"flavors: {n!r} is not a Kubernetes object name")
        for f in self.flavors:
            if not f.node_labels:
                raise ValueError(f"flavors[{f.name!r}].node_labels: a TPU flavor without node "
                                 "labels would match any node")
        queues = [t.cluster_queue for t in self.teams]
        if len(set(queues)) != len(queues):
            raise ValueError(f"teams: ClusterQueue names must be unique: {queues}")
        for t in self.teams:
            for q in t.tpu:
                if q.flavor not in flavors:
                    raise ValueError(f"teams[{t.team!r}].tpu: unknown flavor {q.flavor!r}; "
                                     f"flavors: {', '.join(flavors)}")
                if q.nominal_chips < 0 or q.borrowing_chips < 0:
                    raise ValueError(f"teams[{t.team!r}].tpu[{q.flavor!r}]: chips must be >= 0")
            tpu_flavors = [q.flavor for q in t.tpu]
            if len(set(tpu_flavors)) != len(tpu_flavors):
                raise ValueError(f"teams[{t.team!r}].tpu: one quota per flavor: {tpu_flavors}")
