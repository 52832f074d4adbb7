"""Where the time from a host kill to the first resumed step goes, on the simulated slice,
and the run's goodput (issue 48).

    python benchmarks/goodput.py [--steps 12] [--checkpoint-every 5] [--kill-at 8]
                                 [--framework torch|jax] [--json FILE]

One ``raytpu train --local`` run (a 2-host simulated v4-16) with one host killed after
step ``--kill-at``; then the run folder's goodput events (``raytpu goodput``) give the
badput table and the kill's timeline, each piece from the events that bound it:

    replacement_up    the local harness killed the node and started a new Ray node
    group_start       Ray Train noticed, reserved the slice again, started its new group
    imports_done      the new processes imported the trainer (torch came with Ray Train's
                      torch backend, before the group started)
    restore_done      the attempt's number, XLA, the gloo group, the model, the checkpoint
    first_step        the first step, its compile included
It is a measurement only: the chaos comparison (resident hosts against plain restarts,
a host killed every K steps) is not here yet.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from raytpu.spec.training import LaunchOptions, TrainConfig
from raytpu.workloads.goodput import compute
from raytpu.workloads.goodput_log import read_events


def kill_timeline(events: list[dict[str, Any]], killed_at: float) -> dict[str, float]:
    """Seconds from the kill to each milestone of the first attempt after it."""
    after = [e for e in events if e["t"] >= killed_at]  # the next attempt's

    def first(kind: str) -> float | None:
        return next((e["t"] for e in after if e["event"] == kind), None)

    out: dict[str, float] = {}
    for label, kind in (("group_start", "group_start"), ("imports_done", "imports_done"),
                        ("restore_done", "checkpoint_restore"), ("first_step", "first_step")):
        t = first(kind)
        if t is not None:
            out[label] = t - killed_at
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--checkpoint-every", type=int, default=5)
    parser.add_argument("--kill-at", type=int, default=8)
    parser.add_argument("--framework", default="torch", choices=("torch", "jax"))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    from raytpu.workloads.local_mode import run_local

    extra: dict[str, Any] = {"preset": "tiny"} if args.framework == "jax" else {}
    cfg = TrainConfig(steps=args.steps, checkpoint_every=args.checkpoint_every,
                      fail_host_at_step=args.kill_at, framework=args.framework, **extra)
    with tempfile.TemporaryDirectory(prefix="raytpu-goodput-") as scratch:
        opts = LaunchOptions(storage_path=scratch, run_name="bench", progress=False)
        report = run_local(cfg, opts)
        events = read_events(f"{scratch}/bench")
    g = compute(events)
    print(f"goodput {g.goodput:.1%} of {g.total_elapsed_time:.1f}s "
          f"({g.productive_steps} steps counted, {g.recomputed_steps} recomputed)")
    for kind, seconds in g.badput_time.items():
        print(f"  {kind:<16}{seconds:8.2f} s")
    result: dict[str, Any] = {"goodput": g.to_dict()}
    if report.killed_at is not None:
        timeline = kill_timeline(events, report.killed_at)
        if report.replaced_at is not None:
            timeline["replacement_up"] = report.replaced_at - report.killed_at
        print("host kill -> (seconds after the kill)")
        for label, seconds in sorted(timeline.items(), key=lambda kv: kv[1]):
            print(f"  {label:<16}{seconds:8.2f} s")
        result["kill_timeline_s"] = timeline
        result["kill_to_resume_s"] = report.kill_to_resume_s
    for incident in g.incidents:
        parts = ", ".join(f"{k} {v:.2f}s" for k, v in incident.by_kind.items())
        print(f"incident {incident.kind} after step {incident.step}: {incident.seconds:.2f}s "
              f"({parts})")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
