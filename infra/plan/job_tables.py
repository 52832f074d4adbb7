"""``raytpu plan``'s job table: each ``raytpu:jobs`` entry, the slices its RayJob runs on and
whether its model fits them, by the estimate ``raytpu submit`` refuses a job by
(:func:`raytpu.config.job_rules.job_fit`; ``raytpu plan --json`` lists the same objects as
``jobs``), so a job the plan calls fitting is one submit would accept on the same slices."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from raytpu.config.job_rules import job_fits
from raytpu.plan.tables import PlanTable
from raytpu.spec.checkpoint_interval import (
    ASSUMED_MFU,
    DEFAULT_MTBF_HOURS,
    WRITE_BYTES_PER_S,
)
from raytpu.spec.memory_fit import gib, shape_name

if TYPE_CHECKING:
    from raytpu.plan.engine import PlanResult

COLUMNS = ["job", "slices", "batch/host x context", "bytes per chip", "usable HBM per chip",
           "fits", "smallest that fits", "checkpoint every (Young/Daly)"]


def _row(name: str, fit: dict[str, Any], interval: dict[str, Any]) -> list[str]:
    per_chip = fit["bytes_per_chip"]["total"]
    usable = int(fit["hbm_per_chip"] * fit["usable_fraction"])
    return [
        name,
        f"{shape_name(fit['accelerator_type'], fit['slices'])} ({fit['topology']}, "
        f"{fit['chips']} chips)",
        f"{fit['batch_per_host']} x {fit['seq_len']}",
        gib(per_chip),
        f"{gib(usable)} of {gib(fit['hbm_per_chip'])}",
        "yes" if fit["fits"] else "no",
        fit["smallest_fitting"] or "none",
        f"{interval['configured_steps']} ({interval['young_daly_steps']})",
    ]


def job_tables(result: PlanResult) -> list[PlanTable]:
    """One row per ``raytpu:jobs`` entry; none when the stack declares no job."""
    jobs = job_fits(result.config)
    if not jobs:
        return []
    notes = []
    for job in jobs:
        fit = job["fit"]
        if not fit["fits"]:
            b = fit["bytes_per_chip"]
            notes.append(
                f"{job['name']} does not fit: per chip params {gib(b['params'])}, grads "
                f"{gib(b['grads'])}, optimizer {gib(b['optimizer'])}, activations "
                f"{gib(b['activations'])} ({fit['hbm_source']}); raytpu submit would refuse it")
    notes.append(f"bytes per chip as raytpu submit estimates them (raytpu.spec.memory_fit); "
                 f"{round(100 * jobs[0]['fit']['usable_fraction'])} % of HBM is planned for; "
                 f"smallest that fits: the fewest chips of any TPU offered in zone "
                 f"{result.config.zone}, at the job's slice count")
    notes.append("checkpoint every: the job's train.checkpointEvery steps and, in brackets, "
                 "Young/Daly's sqrt(2 x save cost x MTBF) in steps, from an estimated save "
                 "(the checkpoint's bytes at "
                 f"{WRITE_BYTES_PER_S / 2**20:.0f} MiB/s) and step ({ASSUMED_MFU:.0%} MFU) "
                 "and the job's mtbfHours (default "
                 f"{DEFAULT_MTBF_HOURS:g} h); raytpu goodput gives the measured ones")
    return [PlanTable("Jobs (raytpu:jobs RayJobs: fit per chip)", COLUMNS,
                      [_row(j["name"], j["fit"], j["checkpoint_interval"]) for j in jobs],
                      notes)]
