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

from raytpu.plan.values import shown

if TYPE_CHECKING:
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
                     str(s.initial_slices), "yes" if s.spot else "no"])
    notes = ["min..max: the autoscaling range; count: the configured count, what runs from "
             "the first `up` until the autoscaler acts"]
    if any(s.shape.hosts > 1 for s in cfg.slices):
        notes.append(_maintenance_note(cfg.cluster.maintenance))
    return [PlanTable(f"TPU slices (zone {cfg.zone})",
                      ["slice", "tpu", "topology", "hosts", "chips", "chips/host", "machine type",
                       "slices min..max", "count", "spot"], rows, notes=notes)]


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
