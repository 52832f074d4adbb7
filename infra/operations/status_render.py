"""``raytpu status``'s text: the view of :func:`raytpu.operations.status.status_view` as the
plan's tables (every value whole at any width) under a one-line verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from raytpu.plan.tables import PlanTable
    from rich.console import Console


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
    ft = view.get("gcs_fault_tolerance")
    if ft is not None:
        console.print(Text("GCS fault tolerance: " + ("on (RayCluster kept its options, head "
                           "annotated and given the Redis address)" if ft["ok"] else
                           "NOT on: " + "; ".join(ft["problems"])),
                           style="" if ft["ok"] else "red"))
    for table in status_tables(view):
        render_table(console, table)
