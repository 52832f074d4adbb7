"""``raytpu status --stack S [--json]``: the stack's fleet as the Kubernetes API sees it now.

Per slice group: its node pools with nodes Ready / expected (nodes carry
``cloud.google.com/gke-nodepool``), the Ray worker pods Running per slice (KubeRay labels
``ray.io/group`` and ``ray.io/worker-group-replica-index``), and the RayCluster's
``status``. Per team (``raytpu:teams``): Kueue workloads admitted / pending in the team's
namespace (named after the team) and the quota its ClusterQueue uses
(``kueue.x-k8s.io/v1beta2``; the ClusterQueue named after the team, or selecting its
namespace).

The official ``kubernetes`` client is imported only here, inside the command, so
``raytpu plan`` never pays for it. Credentials: ``--kubeconfig``, else the stack output
``kubeconfig`` (``pulumi stack output kubeconfig --show-secrets``, when the Pulumi CLI is
installed and the stack selected), else the current kubectl context.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from raytpu.facts.names import NODEPOOL_LABEL

if TYPE_CHECKING:
    from raytpu.config.stack import StackConfig, TeamConfig
    from raytpu.facts.slice_group import SliceGroup
    from raytpu.plan.tables import PlanTable
    from rich.console import Console

RAY_CLUSTER_LABEL = "ray.io/cluster"
RAY_GROUP_LABEL = "ray.io/group"
RAY_NODE_TYPE_LABEL = "ray.io/node-type"
REPLICA_INDEX_LABEL = "ray.io/worker-group-replica-index"
REPLICA_NAME_LABEL = "ray.io/worker-group-replica-name"
RAY_API = ("ray.io", "v1", "rayclusters")
KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta2"
TPU_RESOURCE = "google.com/tpu"
TIMEOUT_S = 15


class StatusError(Exception):
    """The cluster could not be reached or read (one sentence for the user)."""


class NoKubeconfig(StatusError):
    """No credentials were found at all: the message says how to get them."""


def credentials_hint(cfg: StackConfig) -> str:
    """What to do when no kubeconfig names the cluster (README "Reaching the control plane")."""
    flag = " --dns-endpoint" if cfg.cluster.dns_endpoint else ""
    return (f"pass --kubeconfig FILE, or fetch credentials with `gcloud container clusters "
            f"get-credentials {cfg.cluster.name} --location {cfg.cluster_location} "
            f"--project {cfg.project}{flag}`")


class ClusterReader(Protocol):
    """What ``raytpu status`` reads; objects as the ``kubernetes`` client returns them
    (models for core kinds, dicts for custom resources)."""

    def nodes(self) -> list[Any]: ...
    def ray_pods(self, namespace: str, cluster: str) -> list[Any]: ...
    def ray_cluster(self, namespace: str, name: str) -> dict[str, Any] | None: ...
    def workloads(self, namespace: str) -> list[dict[str, Any]]: ...
    def cluster_queues(self) -> list[dict[str, Any]]: ...


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
    used = sum(_chips(r.get("total")) for f in status.get("flavorsUsage") or []
               for r in f.get("resources") or [] if r.get("name") == TPU_RESOURCE)
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


def fleet_status(cfg: StackConfig, reader: ClusterReader) -> dict[str, Any]:
    """The status object (documented in README "Status"); raises StatusError."""
    nodes_by_pool: dict[str, list[Any]] = defaultdict(list)
    for n in reader.nodes():
        pool = (n.metadata.labels or {}).get(NODEPOOL_LABEL)
        if pool:
            nodes_by_pool[pool].append(n)
    ns, name = cfg.ray.namespace, cfg.ray.cluster_name
    pods_by_group: dict[str, list[Any]] = defaultdict(list)
    for p in reader.ray_pods(ns, name):
        labels = p.metadata.labels or {}
        if labels.get(RAY_NODE_TYPE_LABEL) == "worker":
            pods_by_group[labels.get(RAY_GROUP_LABEL, "")].append(p)
    rc = reader.ray_cluster(ns, name)
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

    queues = reader.cluster_queues() if cfg.teams else []
    teams = [_team_view(t, reader.workloads(team_namespace(t.name)), queue_of(t, queues))
             for t in cfg.teams]
    return {
        "stack": cfg.stack,
        "cluster": cfg.cluster.name,
        "ray_cluster": ray_cluster,
        "groups": groups,
        "teams": teams,
        "healthy": all(g["healthy"] for g in groups) and ray_cluster is not None,
    }


# -- the real reader ----------------------------------------------------------------------


@dataclass
class KubeReader:
    """Reads through the official client; any transport/auth failure is a StatusError."""

    api_client: Any
    _core: Any = field(init=False)
    _custom: Any = field(init=False)

    def __post_init__(self) -> None:
        from kubernetes import client

        self._core = client.CoreV1Api(self.api_client)
        self._custom = client.CustomObjectsApi(self.api_client)

    def _call(self, what: str, fn: Any, *args: Any, missing_ok: bool = False,
              **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            return fn(*args, _request_timeout=TIMEOUT_S, **kwargs)
        except ApiException as e:
            if missing_ok and e.status == 404:
                return None
            raise StatusError(f"reading {what}: HTTP {e.status} {e.reason}") from None
        except Exception as e:  # urllib3/socket/exec-plugin errors: the cluster is out of reach
            raise StatusError(f"reading {what}: {type(e).__name__}: {e}") from None

    def nodes(self) -> list[Any]:
        return list(self._call("nodes", self._core.list_node,
                               label_selector=NODEPOOL_LABEL).items)

    def ray_pods(self, namespace: str, cluster: str) -> list[Any]:
        return list(self._call(f"pods in {namespace}", self._core.list_namespaced_pod,
                               namespace, label_selector=f"{RAY_CLUSTER_LABEL}={cluster}").items)

    def ray_cluster(self, namespace: str, name: str) -> dict[str, Any] | None:
        group, version, plural = RAY_API
        found: dict[str, Any] | None = self._call(
            f"RayCluster {namespace}/{name}", self._custom.get_namespaced_custom_object,
            group, version, namespace, plural, name, missing_ok=True)
        return found

    def workloads(self, namespace: str) -> list[dict[str, Any]]:
        found = self._call(f"Kueue workloads in {namespace}",
                           self._custom.list_namespaced_custom_object, KUEUE_GROUP,
                           KUEUE_VERSION, namespace, "workloads", missing_ok=True)
        return list((found or {}).get("items") or [])

    def cluster_queues(self) -> list[dict[str, Any]]:
        found = self._call("Kueue ClusterQueues", self._custom.list_cluster_custom_object,
                           KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", missing_ok=True)
        return list((found or {}).get("items") or [])


def _stack_kubeconfig(stack: str) -> str | None:
    """The stack output ``kubeconfig``, when the Pulumi CLI can give it."""
    from raytpu.operations.stack_outputs import stack_output

    text = stack_output(stack, "kubeconfig", secret=True)
    return text if text is not None and text.startswith(("apiVersion", "{")) else None


def connect(stack: str, kubeconfig: Path | None, context: str | None) -> tuple[Any, str]:
    """An ApiClient and where its credentials came from; raises StatusError."""
    from kubernetes import config as kube_config

    try:
        if kubeconfig is not None:
            return (kube_config.new_client_from_config(str(kubeconfig), context=context),
                    f"--kubeconfig {kubeconfig}")
        text = _stack_kubeconfig(stack)
        if text is not None:
            with tempfile.TemporaryDirectory(prefix="raytpu-status-") as d:
                path = Path(d) / "kubeconfig"
                path.write_text(text)
                return (kube_config.new_client_from_config(str(path), context=context),
                        f"pulumi stack output kubeconfig (stack {stack})")
        return kube_config.new_client_from_config(context=context), "the current kubectl context"
    except Exception as e:  # ConfigException, missing file, bad YAML
        raise NoKubeconfig(f"no usable kubeconfig ({e})") from None


# -- the command --------------------------------------------------------------------------


def _mark(ok: bool) -> str:
    return "ok" if ok else "degraded"


def status_tables(view: dict[str, Any]) -> list[PlanTable]:
    """The slice groups (and teams) as the plan's tables: rendered whole at any width."""
    from raytpu.plan.tables import PlanTable

    rows = []
    for g in view["groups"]:
        s = g["slices"]
        pools = ", ".join(f"{p['name']} {p['ready']}/{p['expected']}" for p in g["node_pools"])
        replicas = ", ".join(f"#{r['replica']} {r['running']}/{r['hosts']}"
                             for r in g["ray_slices"]) or "-"
        scaling = str(s["min"]) if s["min"] == s["max"] else f"{s['min']}..{s['max']}"
        rows.append([g["name"], g["tpu"], scaling, str(s["count"]),
                     f"{s['nodes_ready']} | {s['ray_running']} of {s['expected']}",
                     pools, replicas, _mark(g["healthy"])])
    tables = [PlanTable("slice groups", [
        "group", "tpu", "slices min..max", "count", "slices up (nodes | Ray)",
        "node pools (Ready)", "Ray slices (Running)", "health"], rows)]
    if view["teams"]:
        team_rows = []
        for t in view["teams"]:
            q = t["cluster_queue"]
            quota = (f"{q['tpu_chips']['used']} / {q['tpu_chips']['nominal']}" if q
                     else "no ClusterQueue")
            team_rows.append([t["name"], str(t["workloads"]["admitted"]),
                              str(t["workloads"]["pending"]), quota])
        tables.append(PlanTable("teams", ["team", "admitted", "pending",
                                          "TPU chips used / nominal"], team_rows))
    return tables


def render_status(view: dict[str, Any], source: str, console: Console | None = None) -> None:
    from raytpu.plan.render import render_table
    from rich.console import Console
    from rich.text import Text

    console = console or Console()
    rc = view["ray_cluster"]
    head = Text(f"stack {view['stack']}", style="bold")
    head.append(f" (cluster {view['cluster']}, via {source}): ")
    head.append(_mark(view["healthy"]), style="green" if view["healthy"] else "red")
    console.print(head)
    if rc is None:
        console.print(Text("RayCluster not found", style="red"))
    else:
        console.print(Text(f"RayCluster {rc['namespace']}/{rc['name']}: state {rc['state']}, "
                           f"workers ready {rc['ready_workers']}/{rc['desired_workers']}"))
    for table in status_tables(view):
        render_table(console, table)
