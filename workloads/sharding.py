"""The FSDP layout rule both trainers use (plain Python: no torch, no jax).

The mesh is ``(data, fsdp)``: ``fsdp`` spans the chips of one slice (ICI), ``data`` the
slices (DCN). The batch is split over both axes; each weight along its largest dimension
over ``fsdp`` and replicated across slices, so only the gradient all-reduce crosses DCN.
"""

from __future__ import annotations

DATA, FSDP = "data", "fsdp"
BATCH_AXES = (DATA, FSDP)


def partition_spec(shape: tuple[int, ...], fsdp_size: int) -> tuple[str | None, ...]:
    """The FSDP spec of a tensor: its largest dimension over ``fsdp`` where that divides
    evenly (the first such dimension on a tie); replicated otherwise (scalars, odd sizes)."""
    spec: list[str | None] = [None] * len(shape)
    if fsdp_size > 1 and shape:
        candidates = [i for i, n in enumerate(shape) if n % fsdp_size == 0]
        if candidates:
            spec[max(candidates, key=lambda i: (shape[i], -i))] = FSDP
    return tuple(spec)
