"""``raytpu plan``'s team tables: the teams and the quotas their ClusterQueues declare, read
from the planned objects (so the table shows what ``pulumi up`` would create)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raytpu.config.team_rules import nominal_slices, team_checkpoint_uri
from raytpu.config.teams import cluster_queue_name, team_namespace
from raytpu.plan.objects import objects
from raytpu.plan.ray_tables import charts_under
from raytpu.plan.tables import PlanTable
from raytpu.program.kueue_program import queues_args

if TYPE_CHECKING:
    from raytpu.plan.engine import PlanResult


def _chips_cell(chips: int, per_slice: int) -> str:
    slices = chips // per_slice
    return f"{chips} chips ({slices} slice{'' if slices == 1 else 's'})"


def team_tables(result: PlanResult) -> list[PlanTable]:
    """``raytpu plan``: the teams and, per team, the quotas its ClusterQueue declares (read
    from the planned objects, so the table shows what ``pulumi up`` would create)."""
    cfg = result.config
    if not cfg.teams:
        return []
    planned = objects(result)
    queues = {o["metadata"]["name"]: o for o in planned if o["kind"] == "ClusterQueue"}
    local = {o["metadata"]["namespace"]: o for o in planned if o["kind"] == "LocalQueue"}
    shape_of = {s.group.flavor_name: s.shape for s in cfg.slices}
    team_rows, quota_rows = [], []
    for t in cfg.teams:
        ns = team_namespace(t.name)
        lq = local.get(ns)
        team_rows.append([t.name, ns, ", ".join(t.members), t.priority,
                          team_checkpoint_uri(cfg, t),
                          f"{cluster_queue_name(t.name)} <- {ns}/{lq['metadata']['name']}"
                          if lq else "-"])
        cq = queues.get(cluster_queue_name(t.name))
        for group in (cq or {}).get("spec", {}).get("resourceGroups", []):
            for f in group["flavors"]:
                res = {r["name"]: r for r in f["resources"]}
                if "google.com/tpu" in res:
                    r, chips = res["google.com/tpu"], shape_of[f["name"]].chips
                    quota_rows.append([t.name, f["name"],
                                       _chips_cell(r["nominalQuota"], chips),
                                       _chips_cell(r["borrowingLimit"], chips)])
                else:
                    quota_rows.append([t.name, f["name"],
                                       f"cpu {res['cpu']['nominalQuota']}, memory "
                                       f"{res['memory']['nominalQuota']}",
                                       f"cpu {res['cpu']['borrowingLimit']}, memory "
                                       f"{res['memory']['borrowingLimit']}"])
    nominal = ", ".join(f"{g} {n} of {next(s.max_slices for s in cfg.slices if s.name == g)}"
                        for g, n in nominal_slices(cfg).items())
    return [
        PlanTable("Teams (Kueue ClusterQueue <- LocalQueue)",
                  ["team", "namespace", "members", "priority", "checkpoints", "queues"],
                  team_rows),
        PlanTable("Team quotas (ClusterQueue nominalQuota / borrowingLimit, cohort "
                  f"{queues_args(cfg).cohort})",
                  ["team", "flavor", "nominal", "may borrow"], quota_rows,
                  notes=[f"Nominal slices per slice group, all teams: {nominal}. Unused "
                         "quota is lent to the cohort and reclaimed by preemption.",
                         *_chart_notes(result)]),
    ]


def _chart_notes(result: PlanResult) -> list[str]:
    notes = []
    for c in charts_under(result, "raytpu:kueue:Kueue"):
        crds = "skipped" if c.inputs.get("skipCrds") else "managed"
        notes.append(f"Kueue chart {c.inputs.get('chart')} {c.inputs.get('version')} in "
                     f"{c.inputs.get('namespace')} (CRDs {crds})")
    return notes
