"""Seconds from a Ray head kill to the first resumed training step, with and without GCS
fault tolerance, measured in one run on the same machine.

    python benchmarks/head_failover.py [--rounds 1] [--json FILE]

Each round runs :func:`raytpu.workloads.head_failover.rehearse_head_failover` on a fresh
simulated 2-host v4-16 slice, training on ``--resident`` hosts: with the GCS in a real
Redis (the hosts' raylets reconnect to the new head and the resubmitted run takes the
training processes over) and without (the raylets give up, new nodes start, the run starts
new processes). Both resubmit the run once the new head is up, and it resumes from its last
checkpoint. A third case, GCS FT with Ray Train's own workers (no ``--resident``), shows
what the nodes alone save. Printed: each time, the head back with all hosts (which
overlaps the resubmitted driver's start), and the ratio with/without GCS FT (target: at
most 0.5, and under 20 s with GCS FT). On a shared 2-core machine single runs vary
widely: compare within a run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from raytpu.workloads.head_failover import rehearse_head_failover


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    cases = (("gcs_ft", True, True), ("no_gcs_ft", False, True),
             ("gcs_ft_ray_train", True, False))
    times: dict[str, list[float]] = {key: [] for key, _, _ in cases}
    restarts: dict[str, list[float]] = {key: [] for key, _, _ in cases}
    for _ in range(args.rounds):
        for key, on, resident in cases:
            with tempfile.TemporaryDirectory(prefix="rtpu-hfb-") as d:
                r = rehearse_head_failover(gcs_ft=on, scratch=Path(d), resident=resident)
            assert r.steps_lost == [] and r.head_kill_to_first_resumed_step_s is not None
            assert r.workers_kept is on, f"{key}: workers kept = {r.workers_kept}"
            assert r.trainers_kept is (on and resident), f"{key}: {r.trainers_after}"
            times[key].append(r.head_kill_to_first_resumed_step_s)
            restarts[key].append(r.head_restart_s)
    out: dict[str, Any] = {
        key: {"kill_to_first_resumed_step_s": statistics.mean(v),
              "head_restart_s": statistics.mean(restarts[key]), "runs": len(v)}
        for key, v in times.items()
    }
    ratio = out["gcs_ft"]["kill_to_first_resumed_step_s"] / out["no_gcs_ft"][
        "kill_to_first_resumed_step_s"]
    out["ratio_gcs_ft_over_without"] = ratio
    for key, _, _ in cases:
        o = out[key]
        print(f"{key:16s} head kill -> first resumed step {o['kill_to_first_resumed_step_s']:6.1f}"
              f" s  (head back with all hosts: {o['head_restart_s']:5.1f} s)")
    print(f"ratio with/without GCS FT: {ratio:.2f} (target <= 0.50); with GCS FT "
          f"{out['gcs_ft']['kill_to_first_resumed_step_s']:.1f} s (target < 20 s)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
