"""``raytpu cost``'s table: :func:`raytpu.plan.cost.cost_of`'s view, rendered."""

from __future__ import annotations

from typing import Any

from raytpu.plan.cost import _money, money_span


def render_cost(cost: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("group", "tpu", "chips/slice", "slices", "capacity", "per chip-hour",
                  "hourly", "monthly", title=f"fleet cost ({cost['currency']}, {cost['region']})")
    for g in cost["groups"]:
        slices = g["slices"]
        n = str(slices["min"]) if slices["min"] == slices["max"] else \
            f"{slices['min']}..{slices['max']}"
        table.add_row(g["name"], g["tpu"], str(g["chips"]), n, g["capacity"],
                      _money(g["price_per_chip_hour"]), money_span(g["hourly"]),
                      money_span(g["monthly"]))
    sp = cost["system_pool"]
    nodes = sp["nodes"]
    table.add_row(sp["name"], sp["machine_type"], "-", f"{nodes['min']}..{nodes['max']} VMs",
                  sp["capacity"], "-", money_span(sp["hourly"]), money_span(sp["monthly"]))
    table.add_row("[bold]total[/]", "", "", "", "", "", money_span(cost["total"]["hourly"]),
                  money_span(cost["total"]["monthly"]))
    console = Console()
    console.print(table)
    for part in [*cost["groups"], sp]:
        if part["price_source"] != "list":
            console.print(f"[yellow]note:[/] {part['name']}: {part['price_source']}")
    console.print(f"prices: {cost['prices']['source']} (read {cost['prices']['date']}); "
                  f"min = the configured count, max = the autoscaling maximum; "
                  f"not included: {cost['excludes']}")
