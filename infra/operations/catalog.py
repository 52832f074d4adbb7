"""``raytpu catalog``'s table: the TPU slice shapes a stack file can name."""

from __future__ import annotations

import contextlib

from raytpu.facts.catalog import GENERATIONS, CatalogError, accelerator_types, slice_shape
from raytpu.plan.tables import PlanTable


def catalog_table(generation: str | None = None) -> PlanTable:
    """Every generation's (or one's) first shapes, with each machine type a shape can run
    on: the machine type and accelerator label are what a stack file's ``slices[]`` copy."""
    rows = []
    for gen in [generation] if generation else list(GENERATIONS):
        for name in accelerator_types(gen)[:12]:
            default = slice_shape(name)
            shapes = [default]
            multi_vm = GENERATIONS[gen].machine_types[GENERATIONS[gen].multi_host_chips_per_vm]
            if not default.multi_host and default.machine_type != multi_vm:
                with contextlib.suppress(CatalogError):  # v5e/v6e 2x4 is also two 4-chip VMs
                    shapes.append(slice_shape(name, machine_type=multi_vm))
            for s in shapes:
                rows.append([s.accelerator_type, s.topology, str(s.hosts), str(s.chips_per_vm),
                             s.machine_type, s.generation.accelerator_label])
    return PlanTable("TPU slice shapes", ["accelerator type", "topology", "hosts", "chips/host",
                                          "machine type", "accelerator label"], rows)
