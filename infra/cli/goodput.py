"""``raytpu goodput PATH``: a run folder's goodput, badput by kind and incidents.

PATH is what a run's checkpoints live in (``<storage path>/<run name>``, a folder or
``gs://``); the events come from its ``goodput/`` log (:mod:`raytpu.workloads.goodput`).
"""

from __future__ import annotations

import json
import math
import sys
from typing import TYPE_CHECKING, Annotated

import typer
from raytpu.cli.exits import exit_bad
from raytpu.spec.checkpoint_interval import DEFAULT_MTBF_HOURS, IntervalChoice, choose
from raytpu.workloads.goodput import GOOGLE_BADPUT_TYPE

if TYPE_CHECKING:
    from raytpu.workloads.goodput import Goodput


def goodput_command(
    path: Annotated[str, typer.Argument(help="The run folder: <storage path>/<run name>")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    mtbf_hours: Annotated[float, typer.Option(
        "--mtbf-hours", help="Expected hours between failures, for the checkpoint interval "
                             "(Young/Daly) from the measured save and step times")
    ] = DEFAULT_MTBF_HOURS,
) -> None:
    """A run's goodput (productive share of its wall time), its badput by kind and each
    incident's cost, from the events in the run folder (local or gs://)."""
    from raytpu.workloads.goodput import GoodputError, compute
    from raytpu.workloads.goodput_log import read_events

    try:
        result = compute(read_events(path))
    except (GoodputError, OSError) as e:
        raise exit_bad([f"goodput {path}: {e}"]) from None
    if not (math.isfinite(mtbf_hours) and mtbf_hours > 0):
        raise exit_bad([f"--mtbf-hours: {mtbf_hours} must be a positive number of hours"])
    interval = measured_interval(result, mtbf_hours)
    if as_json:
        out = {"path": path, **result.to_dict(),
               "checkpoint_interval": interval.to_dict() if interval else None}
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return
    print(render_goodput(path, result))
    if interval is not None:
        print(f"checkpoint every {interval.configured_steps} steps (overhead "
              f"{interval.configured_overhead:.2%}); Young/Daly: {interval.young_daly_steps} "
              f"(overhead {interval.young_daly_overhead:.2%}) from the measured save "
              f"{interval.save_s:.2f}s, step {interval.step_s:.3f}s and an MTBF of "
              f"{interval.mtbf_hours:g} h")


def measured_interval(g: Goodput, mtbf_hours: float) -> IntervalChoice | None:
    """Young/Daly's interval from the run's measured save cost and median step (None
    before a save or a step)."""
    if not g.checkpoint_saves or g.median_step_s <= 0:
        return None
    return choose(configured_steps=g.checkpoint_every, save_s=g.checkpoint_save_s,
                  step_s=g.median_step_s, mtbf_hours=mtbf_hours, source="measured")


def render_goodput(path: str, g: Goodput) -> str:
    """The report as text: the headline, the badput table, the incidents."""
    wall = g.total_elapsed_time
    state = " so far (running)" if g.running else ""
    lines = [
        f"goodput {g.goodput:.1%} of {wall:.1f}s wall time{state}  ({path})",
        f"  {'productive':<16}{g.goodput_time:>10.1f}s  {g.goodput:6.1%}  "
        f"{g.productive_steps} steps, last {g.max_productive_step}",
    ]
    for kind, seconds in g.badput_time.items():
        share = seconds / wall if wall else 0.0
        lines.append(f"  {kind:<16}{seconds:>10.1f}s  {share:6.1%}  ({GOOGLE_BADPUT_TYPE[kind]})")
    lines.append(f"incidents: {g.disruption_count}; steps recomputed: {g.recomputed_steps}")
    for i in g.incidents:
        implied = " (implied by a restart)" if i.implied else ""
        lines.append(f"  {i.kind:<11} after step {i.step}: {i.seconds:.1f}s, "
                     f"{i.lost_steps} steps lost{implied}")
    return "\n".join(lines)


def goodput_summary(run_dir: str) -> str | None:
    """One line for the end of a run: its goodput and what each incident cost, by kind
    (None where the run recorded no events)."""
    from raytpu.workloads.goodput import GoodputError, compute
    from raytpu.workloads.goodput_log import read_events

    try:
        g = compute(read_events(run_dir))
    except (GoodputError, OSError):
        return None
    line = f"goodput {g.goodput:.1%} of {g.total_elapsed_time:.1f}s"
    for i in g.incidents:
        parts = ", ".join(f"{k} {v:.1f}s" for k, v in i.by_kind.items())
        line += f"; {i.kind} loss after step {i.step} cost {i.seconds:.1f}s ({parts})"
    return f"{line} (raytpu goodput {run_dir})"
