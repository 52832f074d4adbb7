"""What the rehearsal reads back: each Ray pod (its node and pool, or the scheduler's reason),
each multi-host replica (all its hosts on one pool?), the pods KubeRay should have made and
did not, and when it has all settled."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from raytpu.rehearse.api import Api
from raytpu.rehearse.slice_affinity import REPLICA_LABEL as EMULATED_REPLICA_LABEL

# The pods must look the same this long before the rehearsal calls them settled: KubeRay and
# the scheduler act within a few hundred milliseconds of each other's writes.
STABLE_FOR_S = 1.5
RAY_CLUSTER_LABEL = "ray.io/cluster"
RAY_GROUP_LABEL = "ray.io/group"
HEAD_GROUP = "headgroup"
REPLICA_LABEL = "ray.io/worker-group-replica-name"


@dataclass(frozen=True)
class PodOutcome:
    namespace: str
    name: str
    group: str
    node: str | None
    pool: str | None
    phase: str
    reason: str


@dataclass(frozen=True)
class SliceOutcome:
    cluster: str
    group: str
    replica: str | None
    """KubeRay's replica name when it labels pods (``RayMultiHostIndexing``), else the one
    :mod:`raytpu.rehearse.slice_affinity` gave; None: the group's pods on one pool."""
    pool: str | None
    """The one pool all its hosts are on (None: they straddle pools, or are not all bound)."""
    hosts: int
    """Pods found; ``expected_hosts`` is the group's ``numOfHosts``."""
    expected_hosts: int
    bound: bool




@dataclass(frozen=True)
class Expected:
    """The pods one RayCluster should have: a head, and replicas x numOfHosts per group."""

    namespace: str
    cluster: str
    groups: dict[str, tuple[int, int]]
    """group -> (replicas, numOfHosts); the head group is (1, 1)."""

    @property
    def pods(self) -> int:
        return sum(r * h for r, h in self.groups.values())


def expected_pods(clusters: list[dict[str, Any]]) -> list[Expected]:
    """What each RayCluster (as declared and admitted, or as read live) should have."""
    out = []
    for obj in clusters:
        if obj["kind"] != "RayCluster" or obj["spec"].get("suspend"):
            continue
        groups = {HEAD_GROUP: (1, 1)}
        for g in obj["spec"].get("workerGroupSpecs") or []:
            groups[g["groupName"]] = (int(g.get("replicas", g.get("minReplicas", 0)) or 0),
                                      int(g.get("numOfHosts", 1) or 1))
        out.append(Expected(obj["metadata"].get("namespace", "default"),
                             obj["metadata"]["name"], groups))
    return out


def pod_outcome(pod: dict[str, Any], pool_of: dict[str, str]) -> PodOutcome:
    meta, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
    node = spec.get("nodeName")
    reason = ""
    for c in status.get("conditions") or []:
        if c["type"] == "PodScheduled" and c["status"] != "True":
            reason = c.get("message") or c.get("reason") or "not scheduled"
    if node is None and not reason:
        reason = "not yet scheduled"
    return PodOutcome(meta["namespace"], meta["name"],
                      meta.get("labels", {}).get(RAY_GROUP_LABEL, ""), node,
                      pool_of.get(node) if node else None, status.get("phase", "Pending"),
                      reason)


def ray_pods(api: Api) -> list[dict[str, Any]]:
    return sorted(api.list_items("v1", "Pod", labelSelector=RAY_CLUSTER_LABEL),
                  key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))


def settled(pods: list[dict[str, Any]], expected: list[Expected]) -> bool:
    if len(pods) < sum(e.pods for e in expected):
        return False
    for p in pods:
        if p["spec"].get("nodeName"):
            if (p.get("status") or {}).get("phase") != "Running":
                return False
        elif not any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                     for c in (p.get("status") or {}).get("conditions") or []):
            return False
    return True


def wait_settled(api: Api, expected: list[Expected], timeout: float
                  ) -> tuple[list[dict[str, Any]], bool, float]:
    started = time.monotonic()
    last: list[tuple[str, str | None, str]] | None = None
    stable_since = started
    while True:
        pods = ray_pods(api)
        state = [(p["metadata"]["name"], p["spec"].get("nodeName"),
                  (p.get("status") or {}).get("phase", "")) for p in pods]
        now = time.monotonic()
        if state != last:
            last, stable_since = state, now
        if settled(pods, expected) and now - stable_since >= STABLE_FOR_S:
            return pods, True, stable_since - started
        if now - started > timeout:
            return pods, False, now - started
        time.sleep(0.2)


def slices_of(expected: list[Expected], pods: list[PodOutcome],
            labels: dict[str, dict[str, str]]) -> list[SliceOutcome]:
    out = []
    for e in expected:
        for group, (_, hosts) in e.groups.items():
            if group == HEAD_GROUP or hosts < 2:
                continue
            mine = [p for p in pods if p.namespace == e.namespace and p.group == group
                    and labels[p.name].get(RAY_CLUSTER_LABEL) == e.cluster]
            by: dict[tuple[str | None, str | None], list[PodOutcome]] = {}
            for p in mine:
                replica = (labels[p.name].get(REPLICA_LABEL)
                           or labels[p.name].get(EMULATED_REPLICA_LABEL))
                # Without KubeRay's replica label a replica is known only by where it runs.
                by.setdefault((replica, None if replica else p.pool), []).append(p)
            for (replica, _), members in sorted(by.items(), key=lambda kv: str(kv[0])):
                pools = {p.pool for p in members}
                one = next(iter(pools)) if len(pools) == 1 else None
                bound = (one is not None and len(members) == hosts
                         and all(p.node for p in members))
                out.append(SliceOutcome(e.cluster, group, replica, one, len(members), hosts,
                                        bound))
    return out


def missing_pods(api: Api, expected: list[Expected], pods: list[PodOutcome],
             labels: dict[str, dict[str, str]]) -> list[str]:
    out = []
    for e in expected:
        have = sum(1 for p in pods if p.namespace == e.namespace
                   and labels[p.name].get(RAY_CLUSTER_LABEL) == e.cluster)
        if have >= e.pods:
            continue
        events = [ev for ev in api.list_items("v1", "Event", e.namespace)
                  if ev.get("involvedObject", {}).get("name") == e.cluster
                  and ev.get("type") == "Warning"]
        why = events[-1].get("message", "") if events else "no event from KubeRay"
        out.append(f"RayCluster {e.namespace}/{e.cluster}: {have} of {e.pods} pods created "
                   f"({why})")
    return out
