"""``raytpu plan`` for people: the resource tree, the plan's tables, policy results and a
one-line summary, readable at any terminal width and without colour.

Every value is shown whole: a table that does not fit the terminal is printed as one
key/value block per row instead of a grid whose cells would be cut, and a value too long
for its line gets a line of its own. Colour and styles come from rich, which drops them for
``NO_COLOR`` and for output that is not a terminal. Values are printed as text, never as
rich markup, so ``[secret]`` and the like print as they are.

Sections are data (:class:`raytpu.plan.tables.PlanTable`): to add one, write a table
source in your own module and list it in :data:`TABLE_SOURCES`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from raytpu.plan.cost import cost_of, money_at_count
from raytpu.plan.cost import summary_line as cost_line
from raytpu.plan.engine import PlanResult
from raytpu.plan.job_tables import job_tables
from raytpu.plan.kueue_tables import team_tables
from raytpu.plan.policies import Violation, mandatory
from raytpu.plan.ray_tables import ray_tables
from raytpu.plan.tables import PlanTable, TableSource, output_tables, tpu_slice_tables
from raytpu.policy.rules import PACK_NAME, POLICIES
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

# The plan's sections, in order. Add a module's table source here.
TABLE_SOURCES: tuple[TableSource, ...] = (tpu_slice_tables, ray_tables, job_tables,
                                          team_tables)

KV_INDENT = 4
"""Indent of a key/value line under its row's name."""


def plan_tree(result: PlanResult) -> Tree:
    """The resources under their real parents (by URN: two resources may share a name)."""
    tree = Tree(Text(f"stack {result.stack} — {len(result.resources)} resources",
                     style="bold"))
    nodes: dict[str, Tree] = {}
    for r in result.resources:  # a parent registers before its children
        label = Text(r.name)
        label.append(f" {r.type}", style="dim")
        if r.options.get("protect"):
            label.append(" (protected)", style="yellow")
        nodes[r.urn] = nodes.get(r.parent_urn or "", tree).add(label)
    return tree


def _grid(table: PlanTable) -> Table:
    grid = Table(title=Text(table.title, style="bold"), title_justify="left",
                 box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    for name in table.columns:
        grid.add_column(Text(name), no_wrap=True)
    for row in table.rows:
        grid.add_row(*(Text(cell) for cell in row))
    return grid


def _kv_lines(table: PlanTable, width: int) -> list[Text]:
    """One block per row: its first cell, then ``column  value`` lines (a two-column table:
    one ``name  value`` line per row); a value that does not fit beside its name goes on
    the next line, alone."""
    def pair(indent: int, label: str, label_width: int, value: str) -> list[Text]:
        line = f"{' ' * indent}{label:<{label_width}}  {value}"
        if len(line) <= width:
            return [Text(line)]
        return [Text(f"{' ' * indent}{label}:"), Text(f"{' ' * (indent + 2)}{value}")]

    lines = [Text(table.title, style="bold")]
    if len(table.columns) == 2:
        name_width = max(len(row[0]) for row in table.rows) if table.rows else 0
        for name, value in table.rows:
            lines += pair(2, name, name_width, value)
        return lines
    label_width = max(len(c) for c in table.columns[1:]) if len(table.columns) > 1 else 0
    for row in table.rows:
        lines.append(Text(f"  {table.columns[0]} {row[0]}", style="bold"))
        for name, cell in zip(table.columns[1:], row[1:], strict=True):
            if cell:  # an empty cell (a total row's) has nothing to say
                lines += pair(KV_INDENT, name, label_width, cell)
    return lines


def render_table(console: Console, table: PlanTable) -> None:
    grid = _grid(table)
    unbounded = console.options.update_width(10**6)  # the grid's natural width
    if Measurement.get(console, unbounded, grid).maximum <= console.width:
        console.print(grid)
    else:
        for line in _kv_lines(table, console.width):
            console.print(line, overflow="fold")
    for note in table.notes:
        console.print(Text(f"  {note}"), overflow="fold")


def render_warnings(console: Console, warnings: Sequence[str]) -> None:
    """Each warning once, wrapped at word boundaries to the console's width."""
    for w in warnings:
        line = Text("warning:", style="yellow")
        line.append(f" {w}")
        console.print(line, overflow="fold")


def policy_lines(violations: Sequence[Violation]) -> list[Text]:
    """The policy section: a header line per violation, its message on its own line."""
    if not violations:
        return [Text(f"policies: {len(POLICIES)} rules of {PACK_NAME}, no violation")]
    blocking = len(mandatory(list(violations)))
    lines = [Text(f"Policy violations ({blocking} mandatory, "
                  f"{len(violations) - blocking} advisory; {PACK_NAME})", style="bold")]
    for v in sorted(violations, key=lambda v: (v.level != "mandatory", v.policy, v.urn)):
        line = Text(v.level, style="red" if v.level == "mandatory" else "yellow")
        line.append(f" {v.policy} ")
        line.append(v.urn.rsplit("::", 1)[-1] if v.urn else "(stack)", style="dim")
        lines += [line, Text(f"    {v.message}")]
    return lines


def summary_line(result: PlanResult) -> str:
    """What ``pulumi preview`` ends with, plus the TPU fleet: resources to create by kind,
    slices and chips at the configured count and at the maximum, the monthly cost."""
    kinds = Counter(r.type.rsplit(":", 1)[-1] for r in result.resources if r.custom)
    by_kind = ", ".join(f"{n} {kind}" for kind, n in
                        sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
    components = sum(not r.custom for r in result.resources)
    slices = result.config.slices
    count = sum(s.initial_slices for s in slices)
    least, most = sum(s.min_slices for s in slices), sum(s.max_slices for s in slices)
    chips = sum(s.initial_slices * s.shape.chips for s in slices)
    min_chips = sum(s.min_slices * s.shape.chips for s in slices)
    max_chips = sum(s.max_slices * s.shape.chips for s in slices)
    cost = cost_of(result.config)
    monthly = money_at_count(cost["total"]["monthly"])
    if cost["unpriced"]:  # out of the total: say so beside it
        monthly += f" (not priced: {', '.join(cost['unpriced'])})"
    scaling = "" if least == most else (
        f" (autoscaling {least}..{most} slices, {min_chips}..{max_chips} chips)")
    return (f"Plan: {_n(count, 'TPU slice')}, {chips} chips at the configured count{scaling}, "
            f"{monthly} / month; + {len(result.resources)} to create: {by_kind}, "
            f"{components} components")


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def render_plan(result: PlanResult, violations: Sequence[Violation] | None = None,
                console: Console | None = None, show_secrets: bool = False) -> None:
    """The whole human plan. ``violations``: the policy results (None: policies off)."""
    console = console or Console()
    console.print(plan_tree(result))
    for source in TABLE_SOURCES:
        for table in source(result):
            render_table(console, table)
    for table in output_tables(result, show_secrets):
        render_table(console, table)
    console.print(Text(cost_line(cost_of(result.config))), overflow="fold")
    render_warnings(console, result.warnings)
    if violations is not None:
        for line in policy_lines(violations):
            console.print(line, overflow="fold")
    console.print(Text(summary_line(result), style="bold"), overflow="fold")
