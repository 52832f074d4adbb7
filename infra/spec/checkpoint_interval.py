"""The checkpoint interval as a decision: the one that maximises goodput given what a save
costs and how often the job fails (Young 1974, Daly 2006), beside the configured one.

Checkpointing every ``tau`` seconds costs ``save_s / tau`` of the time in saves and, per
failure, half an interval of recomputed steps on average: ``tau / (2 x MTBF)``. The sum
is smallest at ``tau = sqrt(2 x save_s x MTBF)`` (to first order, for ``save_s`` much
below the MTBF). Before a run, the save cost is an estimate (the checkpoint's bytes over
:data:`WRITE_BYTES_PER_S`) and the step time the step's FLOPs at :data:`ASSUMED_MFU`; after
one, ``raytpu goodput`` gives the measured ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from .flops import param_count

if TYPE_CHECKING:
    from .training import TrainConfig

DEFAULT_MTBF_HOURS = 24.0
"""The expected time between a job's failures when nothing names it (``raytpu submit
--mtbf-hours``, a job's ``mtbfHours``): a day. Set it from the fleet's own history: a job
on more hosts fails more often (each host's interruptions add up)."""

WRITE_BYTES_PER_S = 200 * 2**20
"""The estimate's checkpoint write rate: the trainer gathers the state to one host, which
writes it as one object stream (to GCS, of the order of 100-300 MiB/s per stream)."""

ASSUMED_MFU = 0.4
"""The estimate's model FLOPs utilisation, to turn a step's FLOPs into seconds."""

CHECKPOINT_BYTES_PER_PARAM = 12
"""fp32 weights and AdamW's two fp32 moments: what the trainer's checkpoint holds."""


def young_daly_interval_s(save_s: float, mtbf_s: float) -> float:
    """sqrt(2 x save cost x MTBF): the checkpoint interval that maximises goodput."""
    if save_s < 0 or mtbf_s <= 0:
        raise ValueError(f"young_daly_interval_s: save_s={save_s!r} must be >= 0 and "
                         f"mtbf_s={mtbf_s!r} > 0")
    return math.sqrt(2.0 * save_s * mtbf_s)


def young_daly_steps(save_s: float, mtbf_s: float, step_s: float) -> int:
    """:func:`young_daly_interval_s` in whole steps of ``step_s`` (at least 1)."""
    if step_s <= 0:
        raise ValueError(f"young_daly_steps: step_s={step_s!r} must be > 0")
    return max(1, round(young_daly_interval_s(save_s, mtbf_s) / step_s))


def overhead(every_steps: int, *, save_s: float, step_s: float, mtbf_s: float) -> float:
    """The share of time lost to saves and recomputation, checkpointing every
    ``every_steps``: save_s / tau + tau / (2 x MTBF), tau the interval in seconds."""
    tau = every_steps * step_s
    return save_s / tau + tau / (2.0 * mtbf_s)


@dataclass(frozen=True)
class IntervalChoice:
    """The configured interval and Young/Daly's, with what each costs."""

    configured_steps: int
    young_daly_steps: int
    save_s: float
    step_s: float
    mtbf_hours: float
    source: str  # "estimate" (before a run) or "measured" (from its goodput log)

    @property
    def configured_overhead(self) -> float:
        return overhead(self.configured_steps, save_s=self.save_s, step_s=self.step_s,
                        mtbf_s=self.mtbf_hours * 3600)

    @property
    def young_daly_overhead(self) -> float:
        return overhead(self.young_daly_steps, save_s=self.save_s, step_s=self.step_s,
                        mtbf_s=self.mtbf_hours * 3600)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "configured_overhead": round(self.configured_overhead, 5),
                "young_daly_overhead": round(self.young_daly_overhead, 5)}

    def cell(self) -> str:
        """The plan's job table cell: configured, then Young/Daly's."""
        return (f"{self.configured_steps} (Young/Daly {self.young_daly_steps}: "
                f"save ~{self.save_s:.3g}s, step ~{self.step_s:.3g}s, MTBF "
                f"{self.mtbf_hours:g} h)")


def choose(*, configured_steps: int, save_s: float, step_s: float,
           mtbf_hours: float = DEFAULT_MTBF_HOURS, source: str) -> IntervalChoice:
    if mtbf_hours <= 0:
        raise ValueError(f"mtbf_hours={mtbf_hours!r} must be > 0")
    steps = young_daly_steps(save_s, mtbf_hours * 3600, step_s)
    return IntervalChoice(configured_steps, steps, save_s, step_s, mtbf_hours, source)


def estimate(*, configured_steps: int, params: int, flops_per_step: float,
             peak_flops: float, mtbf_hours: float = DEFAULT_MTBF_HOURS) -> IntervalChoice:
    """Before a run: the save cost from the checkpoint's size, the step time from its
    FLOPs at :data:`ASSUMED_MFU` of the slices' peak."""
    save_s = params * CHECKPOINT_BYTES_PER_PARAM / WRITE_BYTES_PER_S
    step_s = flops_per_step / (peak_flops * ASSUMED_MFU)
    return choose(configured_steps=configured_steps, save_s=save_s, step_s=step_s,
                  mtbf_hours=mtbf_hours, source="estimate")


def estimate_for(train: TrainConfig, fit: Mapping[str, Any],
                 mtbf_hours: float | None = None) -> IntervalChoice:
    """:func:`estimate` for a run of ``train`` whose ``fit`` object
    (:func:`raytpu.spec.memory_fit.check_run`) has the step's FLOPs and the slices' peak."""
    return estimate(configured_steps=train.checkpoint_every,
                    params=param_count(train.architecture()),
                    flops_per_step=float(fit["flops_per_step"]),
                    peak_flops=float(fit["peak_flops"]),
                    mtbf_hours=DEFAULT_MTBF_HOURS if mtbf_hours is None else mtbf_hours)
