"""``raytpu status --stack S [--json]``: the stack's fleet as the Kubernetes API sees it now.

Per slice group: its node pools with nodes Ready / expected (nodes carry
``cloud.google.com/gke-nodepool``), the Ray worker pods Running per slice (KubeRay labels
``ray.io/group`` and ``ray.io/worker-group-replica-index``), and the RayCluster's
``status``. Per team (``raytpu:teams``): Kueue workloads admitted / pending in the team's
namespace (named after the team) and the quota its ClusterQueue uses
(``kueue.x-k8s.io/v1beta2``; the ClusterQueue named after the team, or selecting its
namespace).

Computation apart from access and presentation: :func:`read_snapshot` makes the reads (through
a :class:`ClusterReader`, :class:`raytpu.operations.kube.KubeReader` for a real cluster),
:func:`status_view` is a pure function of the stack and that :class:`ClusterSnapshot` (the
view model, also ``--json``'s object), and :mod:`raytpu.operations.status_render` draws it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from raytpu.facts.catalog import TPU_RESOURCE
from raytpu.facts.gcs_ft_env import FT_ENABLED_ANNOTATION, REDIS_ADDRESS_ENV
from raytpu.facts.names import NODEPOOL_LABEL

# Where the command's other parts live, for callers that import them from here.
from raytpu.operations.kube import KubeReader as KubeReader
from raytpu.operations.kube import NoKubeconfig as NoKubeconfig
from raytpu.operations.kube import StatusError as StatusError
from raytpu.operations.kube import connect as connect
from raytpu.operations.kube import credentials_hint as credentials_hint
from raytpu.operations.why import chips_in_use as chips_in_use

if TYPE_CHECKING:
    from raytpu.config.stack import StackConfig, TeamConfig
    from raytpu.facts.slice_group import SliceGroup

RAY_GROUP_LABEL = "ray.io/group"
RAY_NODE_TYPE_LABEL = "ray.io/node-type"
REPLICA_INDEX_LABEL = "ray.io/worker-group-replica-index"
REPLICA_NAME_LABEL = "ray.io/worker-group-replica-name"


class ClusterReader(Protocol):
    """What ``raytpu status`` reads; objects as the ``kubernetes`` client returns them
    (models for core kinds, dicts for custom resources)."""

    def nodes(self) -> list[Any]: ...
    def ray_pods(self, namespace: str, cluster: str) -> list[Any]: ...
    def ray_cluster(self, namespace: str, name: str) -> dict[str, Any] | None: ...
    def workloads(self, namespace: str) -> list[dict[str, Any]]: ...
    def cluster_queues(self) -> list[dict[str, Any]]: ...
    def kuberay_pods(self, namespace: str) -> list[Any]: ...
    def ray_clusters(self, namespace: str) -> list[dict[str, Any]]: ...
    def events(self, namespace: str) -> list[Any]: ...


@dataclass(frozen=True)
class ClusterSnapshot:
    """What the API returned for one stack, read once (objects as the client returns them)."""

    nodes: list[Any]
    """TPU and system nodes (those labelled with their node pool)."""
    ray_pods: list[Any]
    """The stack's RayCluster's pods."""
    ray_cluster: dict[str, Any] | None
    """The RayCluster object; None when it does not exist."""
    workloads: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Kueue workloads per team namespace."""
    cluster_queues: list[dict[str, Any]] = field(default_factory=list)
    team_pods: dict[str, list[Any]] = field(default_factory=dict)
    """KubeRay's pods per team namespace (the clusters of the team's RayJobs)."""
    team_clusters: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """RayClusters per team namespace."""
    events: dict[str, list[Any]] = field(default_factory=dict)
    """Events per namespace (the RayCluster's and each team's): what ``why`` reads."""


def read_snapshot(cfg: StackConfig, reader: ClusterReader) -> ClusterSnapshot:
    """Every read ``raytpu status`` makes for ``cfg``; raises StatusError."""
    from raytpu.config.teams import team_namespace

    ns, name = cfg.ray.namespace, cfg.ray.cluster_name
    teams = [team_namespace(t.name) for t in cfg.teams]
    return ClusterSnapshot(
        nodes=reader.nodes(),
        ray_pods=reader.ray_pods(ns, name),
        ray_cluster=reader.ray_cluster(ns, name),
        workloads={t: reader.workloads(t) for t in teams},
        cluster_queues=reader.cluster_queues() if cfg.teams else [],
        team_pods={t: reader.kuberay_pods(t) for t in teams},
        team_clusters={t: reader.ray_clusters(t) for t in teams},
        events={n: reader.events(n) for n in dict.fromkeys([ns, *teams])},
    )


# -- the view (pure: tested on API-shaped objects) ---------------------------------------


def _ready(node: Any) -> bool:
    conditions = (node.status.conditions if node.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def _group_view(s: SliceGroup, nodes_by_pool: dict[str, list[Any]],
                pods: list[Any]) -> dict[str, Any]:
    hosts = s.shape.hosts
    pools = []
    slices_ready = 0
    for name in s.pool_names:
        nodes = nodes_by_pool.get(name, [])
        ready = sum(_ready(n) for n in nodes)
        # A multi-host pool is one slice of `hosts` nodes; a single-host pool holds
        # one node per slice.
        expected = hosts if s.shape.multi_host else s.initial_slices
        pools.append({"name": name, "nodes": len(nodes), "ready": ready, "expected": expected})
        slices_ready += (ready == hosts) if s.shape.multi_host else ready
    by_replica: dict[str, list[Any]] = defaultdict(list)
    for p in pods:
        labels = p.metadata.labels or {}
        key = labels.get(REPLICA_INDEX_LABEL) or labels.get(REPLICA_NAME_LABEL) or "?"
        by_replica[key].append(p)
    replicas = []
    for key in sorted(by_replica, key=lambda k: (not k.isdigit(), int(k) if k.isdigit() else 0,
                                                   k)):
        group = by_replica[key]
        running = sum(1 for p in group if p.status and p.status.phase == "Running")
        replicas.append({"replica": key, "pods": len(group), "running": running,
                         "hosts": hosts})
    slices_running = sum(1 for r in replicas if r["running"] == hosts)
    expected_slices = s.min_slices
    return {
        "name": s.name,
        "tpu": s.shape.accelerator_type,
        "hosts_per_slice": hosts,
        "slices": {"min": s.min_slices, "count": s.initial_slices, "max": s.max_slices,
                   "expected": expected_slices, "nodes_ready": slices_ready,
                   "ray_running": slices_running},
        "node_pools": pools,
        "ray_slices": replicas,
        "healthy": slices_ready >= expected_slices and slices_running >= expected_slices,
    }


def _chips(quantity: Any) -> int:
    try:
        return int(str(quantity))
    except ValueError:
        return 0


def _team_view(team: TeamConfig, workloads: list[dict[str, Any]],
               queue: dict[str, Any] | None) -> dict[str, Any]:
    from raytpu.config.teams import team_namespace

    def condition(w: dict[str, Any], kind: str) -> bool:
        return any(c.get("type") == kind and c.get("status") == "True"
                   for c in (w.get("status") or {}).get("conditions") or [])

    live = [w for w in workloads if not condition(w, "Finished")]
    admitted = sum(1 for w in live if condition(w, "Admitted"))
    out: dict[str, Any] = {"name": team.name, "namespace": team_namespace(team.name),
                           "workloads": {"admitted": admitted, "pending": len(live) - admitted}}
    if queue is None:
        out["cluster_queue"] = None
        return out
    status = queue.get("status") or {}
    used = chips_in_use(queue)
    nominal = sum(_chips(r.get("nominalQuota"))
                  for g in (queue.get("spec") or {}).get("resourceGroups") or []
                  for f in g.get("flavors") or [] for r in f.get("resources") or []
                  if r.get("name") == TPU_RESOURCE)
    out["cluster_queue"] = {
        "name": (queue.get("metadata") or {}).get("name"),
        "tpu_chips": {"used": used, "nominal": nominal},
        "admitted_workloads": status.get("admittedWorkloads", 0),
        "pending_workloads": status.get("pendingWorkloads", 0),
    }
    return out


def queue_of(team: TeamConfig, queues: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The team's ClusterQueue: the one named after the team, else the one whose
    namespaceSelector picks the team's namespace."""
    from raytpu.config.teams import cluster_queue_name, team_namespace

    for q in queues:
        if (q.get("metadata") or {}).get("name") == cluster_queue_name(team.name):
            return q
    for q in queues:
        selector = ((q.get("spec") or {}).get("namespaceSelector") or {}).get("matchLabels") or {}
        if selector.get("kubernetes.io/metadata.name") == team_namespace(team.name):
            return q
    return None


def gcs_ft_view(rc: dict[str, Any] | None, pods: list[Any]) -> dict[str, Any]:
    """Whether GCS fault tolerance, which the stack asks for, is what runs: a KubeRay older
    than 1.3.0 (whose CRD has no ``gcsFaultToleranceOptions``, e.g. an add-on's) prunes the
    field without an error, and the head then runs without Redis and resident hosts die
    with it. KubeRay 1.7.0 (``common/pod.go configureGCSFaultTolerance``) marks the head
    pod ``ray.io/ft-enabled`` and sets ``RAY_REDIS_ADDRESS`` on its Ray container."""
    kept = rc is not None and "gcsFaultToleranceOptions" in (rc.get("spec") or {})
    heads = [p for p in pods
             if (p.metadata.labels or {}).get(RAY_NODE_TYPE_LABEL) == "head"]
    annotated = any((p.metadata.annotations or {}).get(FT_ENABLED_ANNOTATION) == "true"
                    for p in heads)
    # The Ray container is the first (KubeRay's RayContainerIndex).
    redis_env = any(e.name == REDIS_ADDRESS_ENV for p in heads
                    for e in ((p.spec.containers[0].env or []) if p.spec.containers else []))
    problems = []
    if rc is not None and not kept:
        problems.append("the RayCluster has no spec.gcsFaultToleranceOptions: the operator's "
                        "CRD pruned it (KubeRay older than 1.3.0?); GCS fault tolerance and "
                        "resident hosts are off")
    if not heads:
        problems.append("no head pod to check")
    else:
        if not annotated:
            problems.append(f"the head pod lacks {FT_ENABLED_ANNOTATION}=true")
        if not redis_env:
            problems.append(f"the head's Ray container has no {REDIS_ADDRESS_ENV}")
    return {"ray_cluster_kept_options": kept, "head_ft_annotation": annotated,
            "head_redis_address": redis_env, "ok": not problems, "problems": problems}


def status_view(cfg: StackConfig, snapshot: ClusterSnapshot) -> dict[str, Any]:
    """The status object (documented in docs/monitoring.md) of ``cfg`` as ``snapshot`` shows it."""
    nodes_by_pool: dict[str, list[Any]] = defaultdict(list)
    for n in snapshot.nodes:
        pool = (n.metadata.labels or {}).get(NODEPOOL_LABEL)
        if pool:
            nodes_by_pool[pool].append(n)
    ns, name = cfg.ray.namespace, cfg.ray.cluster_name
    pods_by_group: dict[str, list[Any]] = defaultdict(list)
    for p in snapshot.ray_pods:
        labels = p.metadata.labels or {}
        if labels.get(RAY_NODE_TYPE_LABEL) == "worker":
            pods_by_group[labels.get(RAY_GROUP_LABEL, "")].append(p)
    rc = snapshot.ray_cluster
    rc_status = (rc or {}).get("status") or {}
    ray_cluster = None if rc is None else {
        "name": name, "namespace": ns,
        "state": rc_status.get("state", "unknown"),
        "ready_workers": rc_status.get("readyWorkerReplicas", 0),
        "desired_workers": rc_status.get("desiredWorkerReplicas", 0),
        "conditions": {c.get("type"): c.get("status")
                       for c in rc_status.get("conditions") or []},
    }
    groups = [_group_view(s.group, nodes_by_pool, pods_by_group.get(s.name, []))
              for s in cfg.slices]
    from raytpu.config.teams import team_namespace

    teams = [_team_view(t, snapshot.workloads.get(team_namespace(t.name), []),
                        queue_of(t, snapshot.cluster_queues))
             for t in cfg.teams]
    from raytpu.operations.status_why import add_whys

    gcs_ft = (gcs_ft_view(rc, snapshot.ray_pods)
              if cfg.ray.gcs_fault_tolerance is not None and rc is not None else None)
    view = {
        "stack": cfg.stack,
        "cluster": cfg.cluster.name,
        "ray_cluster": ray_cluster,
        "gcs_fault_tolerance": gcs_ft,
        "groups": groups,
        "teams": teams,
        "healthy": (all(g["healthy"] for g in groups) and ray_cluster is not None
                    and (gcs_ft is None or gcs_ft["ok"])),
    }
    return add_whys(cfg, snapshot, view,
                    [queue_of(t, snapshot.cluster_queues) for t in cfg.teams])


def fleet_status(cfg: StackConfig, reader: ClusterReader) -> dict[str, Any]:
    """Read, then view: ``status_view(cfg, read_snapshot(cfg, reader))``; raises StatusError."""
    return status_view(cfg, read_snapshot(cfg, reader))
