"""The checkpoint interval: Young/Daly's sqrt(2 x save x MTBF), the interval of least
overhead, and the estimate `raytpu submit --dry-run` and the plan's job table show."""

from __future__ import annotations

import math

import pytest
from raytpu.spec.checkpoint_interval import (
    choose,
    overhead,
    young_daly_interval_s,
    young_daly_steps,
)


def test_young_daly() -> None:
    assert math.isclose(young_daly_interval_s(30.0, 86_400.0), math.sqrt(2 * 30 * 86_400))
    assert young_daly_steps(30.0, 86_400.0, step_s=2.0) == round(math.sqrt(2 * 30 * 86_400) / 2)
    assert young_daly_steps(0.0, 3600.0, step_s=1.0) == 1
    with pytest.raises(ValueError, match="mtbf_s=0"):
        young_daly_interval_s(1.0, 0.0)


def test_young_daly_is_the_interval_of_least_overhead() -> None:
    c = choose(configured_steps=10, save_s=30.0, step_s=2.0, mtbf_hours=24, source="measured")
    best = min(range(1, 5000), key=lambda k: overhead(k, save_s=30.0, step_s=2.0,
                                                      mtbf_s=86_400.0))
    assert abs(c.young_daly_steps - best) <= 1
    assert c.young_daly_overhead < c.configured_overhead


