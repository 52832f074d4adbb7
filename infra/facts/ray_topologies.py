"""Which TPU topologies Ray accepts, per generation, as data (the core install has no Ray),
and a topology's chip count."""

from __future__ import annotations

import math
from dataclasses import dataclass


def topology_chips(topology: str) -> int:
    return math.prod(int(d) for d in topology.split("x"))


@dataclass(frozen=True)
class RayTopologies:
    """Ray's own TPU topology rule for one generation, as data (the core install has no Ray).

    Ray 2.60.0 ``python/ray/_private/accelerators/tpu.py``: ``VALID_TPU_TOPOLOGY[<gen>]`` is a
    fixed set plus, for 3-D generations, ``_get_larger_3d_topologies(max_x, max_y, max_z)``:
    every ``XxYxZ`` with each dimension a multiple of 4 from 4 up to its own maximum (in that
    order, not sorted). ``SlicePlacementGroup._validate_tpu_config`` -- and with it Ray Train's
    ``ScalingConfig(use_tpu=True, topology=...)`` -- raises "Invalid accelerator topology"
    for anything else. ``tests/test_catalog.py`` checks this copy against Ray's function.
    """

    fixed: frozenset[str]
    larger_3d_max: tuple[int, int, int] | None = None

    def accepts(self, topology: str) -> bool:
        t = topology.strip().lower()
        if t in self.fixed:
            return True
        if self.larger_3d_max is None:
            return False
        try:
            dims = [int(d) for d in t.split("x")]
        except ValueError:
            return False
        return len(dims) == 3 and all(
            d >= 4 and d % 4 == 0 and d <= top for d, top in zip(dims, self.larger_3d_max,
                                                                 strict=True))

    def describe(self) -> str:
        if self.larger_3d_max is None:
            return ", ".join(sorted(self.fixed, key=topology_chips))
        x, y, z = self.larger_3d_max
        return (f"{', '.join(sorted(self.fixed, key=topology_chips))} and multiples of 4 up to "
                f"{x}x{y}x{z}")


RAY_VERSION_OF_TOPOLOGIES = "2.60.0"
RAY_SMALL_3D = frozenset({"2x2x1", "2x2x2", "2x2x4", "2x4x4"})
# Ray 2.60's VALID_TPU_TOPOLOGY["v7x"]: a fixed set, no larger-3-D rule.
RAY_V7X = frozenset({"2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8",
                      "8x8x16", "8x16x16"})
RAY_2D = frozenset({"1x1", "2x2", "2x4", "2x8", "4x4", "4x8", "8x8", "8x16", "16x16"})
