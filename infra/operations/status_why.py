"""The ``why`` of ``raytpu status``: the view's reasons, added to the view of
:func:`raytpu.operations.status.status_view` from the same snapshot
(:mod:`raytpu.operations.why` and :mod:`raytpu.operations.why_pods` compute them).

Where they go: ``pending_pods[]`` (each Pending pod of the stack's RayCluster, its ``why`` and
the reasons ``also`` found), ``ray_cluster.why`` (KubeRay's refusals), ``why`` on a broken
entry of ``groups[].ray_slices``, ``teams[].jobs[]`` (every unfinished Workload of the team,
its state and ``why``), and ``why`` at the top: the first reason of them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from raytpu.operations.why import Why, first, is_true, owner_job, plain, workload_whys
from raytpu.operations.why_pods import cluster_whys

if TYPE_CHECKING:
    from raytpu.config.stack import StackConfig

ClusterSnapshot = Any
"""A :class:`raytpu.operations.status.ClusterSnapshot` (not imported: status imports this)."""


def webhook_hint(cfg: StackConfig) -> str:
    """Where the stack's TPU webhook comes from, and what to do when it does not serve."""
    if cfg.kuberay.mode == "gke-addon":
        return ("the GKE Ray Operator add-on serves it: check the add-on is enabled and the "
                "cluster's version carries the webhook")
    from raytpu.spec.kuberay_operator import WEBHOOK_NAMESPACE

    return (f"the kuberay-tpu-webhook in namespace {WEBHOOK_NAMESPACE} (Helm) must be Ready "
            "before TPU pods are created: check its pod and cert-manager's certificate")


def _state(workload: dict[str, Any]) -> str:
    if is_true(workload, "Admitted"):
        return "admitted"
    return "quota reserved" if is_true(workload, "QuotaReserved") else "queued"


def _entry(whys: list[Why]) -> dict[str, Any]:
    top = first(whys)
    return {"why": top.as_dict() if top else None,
            "also": [w.as_dict() for w in whys if w is not top]}


def _jobs(cfg: StackConfig, snapshot: ClusterSnapshot, ns: str, queue: dict[str, Any] | None,
          nodes: list[dict[str, Any]], hint: str) -> tuple[list[dict[str, Any]], list[Why]]:
    from raytpu.operations.why_pods import job_of

    groups = [s.group for s in cfg.slices]
    by_name = {(q.get("metadata") or {}).get("name"): q for q in snapshot.cluster_queues}
    events = [plain(e) for e in snapshot.events.get(ns, [])]
    pods = [plain(p) for p in snapshot.team_pods.get(ns, [])]
    clusters = {job_of(rc) or (rc.get("metadata") or {}).get("name"): rc
                for rc in snapshot.team_clusters.get(ns, [])}
    out, every = [], []
    for w in snapshot.workloads.get(ns, []):
        if is_true(w, "Finished"):
            continue
        admitted_to = ((w.get("status") or {}).get("admission") or {}).get("clusterQueue")
        whys = workload_whys(w, by_name.get(admitted_to, queue), groups, nodes)
        job = owner_job(w)
        rc = clusters.get(job)
        if rc is not None and is_true(w, "Admitted"):
            name = (rc.get("metadata") or {}).get("name")
            mine = [p for p in pods if ((p.get("metadata") or {}).get("labels") or {})
                    .get("ray.io/cluster") == name]
            pending, own, slices = cluster_whys(rc, groups, mine, nodes, events, hint)
            whys += own + [x for ws in pending.values() for x in ws]
            whys += [x for ws in slices.values() for x in ws]
        every += whys
        out.append({"name": job, "workload": (w.get("metadata") or {}).get("name"),
                    "state": _state(w), **_entry(whys)})
    return out, every


def add_whys(cfg: StackConfig, snapshot: ClusterSnapshot, view: dict[str, Any],
             queues: list[dict[str, Any] | None]) -> dict[str, Any]:
    """``view`` with its reasons (a new dict; ``view`` and ``snapshot`` are left as found);
    ``queues``: each team's ClusterQueue, in ``cfg.teams``' order."""
    from raytpu.config.teams import team_namespace

    hint = webhook_hint(cfg)
    nodes = [plain(n) for n in snapshot.nodes]
    ns = cfg.ray.namespace
    every: list[Why] = []
    pending_pods: list[dict[str, Any]] = []
    ray_cluster = view["ray_cluster"]
    groups = [dict(g) for g in view["groups"]]
    if snapshot.ray_cluster is not None:
        rc = plain(snapshot.ray_cluster)
        pods = [plain(p) for p in snapshot.ray_pods]
        events = [plain(e) for e in snapshot.events.get(ns, [])]
        pending, own, slices = cluster_whys(rc, [s.group for s in cfg.slices], pods, nodes,
                                            events, hint)
        group_of = {f"{ns}/{p['metadata']['name']}": (p["metadata"].get("labels") or {})
                    .get("ray.io/group") for p in pods}
        pending_pods = [{"pod": at, "group": group_of.get(at), **_entry(whys)}
                        for at, whys in sorted(pending.items())]
        ray_cluster = {**ray_cluster, "why": _entry(own)["why"]}
        for g in groups:
            g["ray_slices"] = [{**r, **({"why": _entry(slices[(g["name"], r["replica"])])["why"]}
                                        if (g["name"], r["replica"]) in slices else {})}
                               for r in g["ray_slices"]]
            # A broken slice (split, or never given TPU_WORKER_*) cannot run its program.
            g["healthy"] = g["healthy"] and not any("why" in r for r in g["ray_slices"])
        every += own + [w for ws in slices.values() for w in ws]
        every += [w for ws in pending.values() for w in ws]
    teams = []
    for t, tv, queue in zip(cfg.teams, view["teams"], queues, strict=True):
        jobs, found = _jobs(cfg, snapshot, team_namespace(t.name), queue, nodes, hint)
        teams.append({**tv, "jobs": jobs})
        every += found
    top = first(every)
    healthy = view["healthy"] and all(g["healthy"] for g in groups)
    return {**view, "healthy": healthy, "ray_cluster": ray_cluster, "groups": groups,
            "teams": teams, "pending_pods": pending_pods, "why": top.as_dict() if top else None}
