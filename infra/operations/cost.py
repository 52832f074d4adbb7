"""``raytpu cost``'s table: :func:`raytpu.plan.cost.cost_of`'s view, rendered by the plan's
table renderer (every value whole at any width: key/value blocks when the grid is too wide)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from raytpu.plan.cost import _money, money_span
from raytpu.plan.render import render_table
from raytpu.plan.tables import PlanTable

if TYPE_CHECKING:
    from rich.console import Console

COLUMNS = ["group", "tpu", "chips/slice", "slices min..max", "count", "capacity",
           "per chip-hour", "hourly at count", "monthly at count", "monthly min..max"]


def _span(r: dict[str, Any]) -> str:
    return str(r["min"]) if r["min"] == r["max"] else f"{r['min']}..{r['max']}"


def cost_table(cost: dict[str, Any]) -> PlanTable:
    rows = []
    for g in cost["groups"]:
        rows.append([g["name"], g["tpu"], str(g["chips"]), _span(g["slices"]),
                     str(g["slices"]["count"]), g["capacity"], _money(g["price_per_chip_hour"]),
                     _money(g["hourly"]["count"]), _money(g["monthly"]["count"]),
                     money_span(g["monthly"])])
    sp = cost["system_pool"]
    rows.append([sp["name"], sp["machine_type"], "-", f"{_span(sp['nodes'])} VMs",
                 str(sp["nodes"]["count"]), sp["capacity"], "-", _money(sp["hourly"]["count"]),
                 _money(sp["monthly"]["count"]), money_span(sp["monthly"])])
    redis = cost.get("gcs_redis")
    if redis:  # GCS fault tolerance's Memorystore instance
        rows.append([redis["name"], f"Memorystore {redis['tier']}", "-",
                     f"{redis['memory_size_gb']} GB", "1", "on-demand", "-",
                     _money(redis["hourly"]["count"]), _money(redis["monthly"]["count"]),
                     money_span(redis["monthly"])])
    total = cost["total"]
    rows.append(["total", "", "", "", "", "", "", _money(total["hourly"]["count"]),
                 _money(total["monthly"]["count"]), money_span(total["monthly"])])
    notes = [f"note: {part['name']}: {part['price_source']}"
             for part in [*cost["groups"], sp, *([redis] if redis else [])]
             if part["price_source"] != "list"]
    notes.append(f"prices: {cost['prices']['source']} (read {cost['prices']['date']}); min and "
                 "max = the autoscaling range, count = the configured count (what runs until "
                 f"the autoscaler acts); not included: {cost['excludes']}")
    return PlanTable(f"fleet cost ({cost['currency']}, {cost['region']})", COLUMNS, rows, notes)


def render_cost(cost: dict[str, Any], console: Console | None = None) -> None:
    from rich.console import Console

    render_table(console or Console(), cost_table(cost))
