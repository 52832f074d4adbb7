"""The tables of ``raytpu plan`` as plain data, and the TPU slices table.

A table is a title, column names, rows of strings and notes: no layout. Modules that add
a section to the plan write a *table source* (``PlanResult -> list[PlanTable]``) in their
own module and list it in :data:`raytpu.plan.render.TABLE_SOURCES`; the renderer decides
how the table fits the terminal (a grid when it fits, key/value blocks when not), so no
source has to care about widths, colour or truncation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from raytpu.facts.capacity import describe_seconds
from raytpu.plan.values import shown

if TYPE_CHECKING:
    from raytpu.facts.slice_group import SliceGroup
    from raytpu.plan.engine import PlanResult
    from raytpu.spec.gke_cluster import MaintenancePolicyArgs


@dataclass(frozen=True)
class PlanTable:
    title: str
    columns: list[str]
    rows: list[list[str]]
    """One list of cell strings per row, as many as ``columns``; the first cell names the
    row (it heads the row's block when the table is too wide for the terminal)."""
    notes: list[str] = field(default_factory=list)
    """Sentences printed under the table."""

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"table {self.title!r}: row {row} has {len(row)} cells for "
                                 f"{len(self.columns)} columns")


TableSource = Callable[["PlanResult"], list[PlanTable]]


def tpu_slice_tables(result: PlanResult) -> list[PlanTable]:
    """One row per slice group of ``raytpu:slices``: shape, hosts, chips, count."""
    cfg = result.config
    rows = []
    for s in cfg.slices:
        shape = s.shape
        scaling = f"{s.min_slices}..{s.max_slices}" if s.elastic else str(s.count)
        rows.append([s.name, shape.accelerator_type, shape.topology, str(shape.hosts),
                     str(shape.chips), str(shape.chips_per_vm), shape.machine_type, scaling,
                     str(s.initial_slices), _capacity_cell(s.group)])
    notes = ["min..max: the autoscaling range; count: the configured count, what runs from "
             "the first `up` until the autoscaler acts"]
    if any(s.count == 0 for s in cfg.slices):
        notes.append("count 0: the group's pools start empty and its slices are created when "
                     "a job asks for them (the shared RayCluster's group starts at 0 replicas)")
    if any(s.shape.hosts > 1 for s in cfg.slices):
        notes.append(_maintenance_note(cfg.cluster.maintenance))
    notes += _run_limit_notes(result)
    return [PlanTable(f"TPU slices (zone {cfg.zone})",
                      ["slice", "tpu", "topology", "hosts", "chips", "chips/host", "machine type",
                       "slices min..max", "count", "capacity"], rows, notes=notes)]


def _capacity_cell(g: SliceGroup) -> str:
    """``on-demand``, ``spot``, ``reservation <name>`` or ``flex-start, runs <= 7d``."""
    if g.capacity == "reservation":
        return f"reservation {g.reservation}"
    if g.capacity == "flex-start" and g.max_run_seconds is not None:
        return f"flex-start, runs <= {describe_seconds(g.max_run_seconds)}"
    return g.capacity


def _run_limit_notes(result: PlanResult) -> list[str]:
    """Flex-start VMs are reclaimed after their run limit: say so, and name the jobs whose
    deadline outlives it."""
    cfg = result.config
    limits = {s.name: s.group.max_run_seconds for s in cfg.slices
              if s.group.max_run_seconds is not None}
    if not limits:
        return []
    out = [f"flex-start: GKE reclaims a slice of {', '.join(sorted(limits))} when its run limit "
           "ends, and the slice is requested again; a run resumes from its last checkpoint"]
    for j in cfg.jobs:
        limit = limits.get(j.slice_group)
        if limit is None:
            continue
        deadline = j.active_deadline_seconds
        if deadline is None or deadline > limit:
            length = ("has no activeDeadlineSeconds" if deadline is None else
                      f"may run {describe_seconds(deadline)}")
            out.append(f"job {j.name} {length}, longer than {j.slice_group}'s flex-start limit "
                       f"({describe_seconds(limit)}): its slices are reclaimed mid-run and it "
                       "resumes from its checkpoints")
    return out


def _maintenance_note(policy: MaintenancePolicyArgs | None) -> str:
    """When GKE may upgrade the pools, which recreates a multi-host slice."""
    window = policy.window if policy else None
    if window is None:
        when = "at any time (no raytpu:cluster.maintenance.window)"
    else:
        days = ",".join(window.days) or "daily"
        when = f"only {days} from {window.start_time[11:16]} UTC for {window.hours:g} h"
    held = [f"{e.name} ({e.scope}, {e.start_time} to {e.end_time or 'end of support'})"
            for e in (policy.exclusions if policy else ())]
    # GKE "Maintenance windows and exclusions": they do not bound maintenance of the services
    # GKE runs on (Compute Engine), repairs, or fixes of critical vulnerabilities; and TPU
    # VMs are not live-migrated, so a host maintenance event stops the slice regardless.
    return ("GKE upgrades node pools, recreating a multi-host slice under its job, " + when
            + (f", except during {'; '.join(held)}" if held else "")
            + ". Not bounded by the window or exclusions: Compute Engine host maintenance "
            "(TPU VMs do not live-migrate), node auto-repair and critical security patches")


def output_tables(result: PlanResult, show_secrets: bool = False) -> list[PlanTable]:
    """The stack's outputs as ``pulumi preview`` lists them: ``[secret]`` and
    ``(known after up)`` where the value is a secret or computed by a provider."""
    rows = [[key, shown(value, show_secrets)] for key, value in sorted(result.raw_outputs.items())]
    return [PlanTable("Outputs", ["output", "value"], rows)] if rows else []
