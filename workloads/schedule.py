"""Linear warmup then cosine decay: a pure function of the step (no torch, no jax).

Because the learning rate depends on nothing but the step, a resumed run needs no
scheduler state: the checkpoint's step number is enough. Both trainers use it.
"""

from __future__ import annotations

import math

from raytpu.spec.training import OptimConfig


def lr_at(step: int, total_steps: int, cfg: OptimConfig) -> float:
    """Learning rate for 1-based ``step`` of a ``total_steps`` run.

    Linear from ``lr / warmup`` to ``lr`` at step ``warmup``, then a half cosine down to
    ``min_lr_ratio * lr`` at ``total_steps`` (and flat after it).
    """
    if step < cfg.warmup_steps:
        return cfg.lr * step / cfg.warmup_steps
    peak = max(1, cfg.warmup_steps)
    progress = min(1.0, (step - peak) / max(1, total_steps - peak))
    floor = cfg.lr * cfg.min_lr_ratio
    return floor + (cfg.lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
