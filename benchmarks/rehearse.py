"""How long a warm rehearsal of a stack takes, from the command's start to every Ray pod
bound (``raytpu rehearse --stack prod``, binaries already built).

Each round runs the whole rehearsal in this process: the preview plan, the control plane
(etcd, kube-apiserver, KCM, scheduler, KWOK), the CRDs, the fake nodes, the KubeRay
operator, the stack's objects and the wait until the pods settle, then the teardown. The
median of the rounds is compared with the target (issue 29: under 60 s on the 2-core
development machine), and each phase's median is printed beside it, so a regression shows
where it is. ``--at-max`` fakes every node the pools can scale to.

    python benchmarks/rehearse.py [--stack prod] [--rounds 3] [--at-max] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

TARGET_S = 60.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", default="prod")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--at-max", action="store_true")
    parser.add_argument("--crds", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    from raytpu.plan.engine import run_plan
    from raytpu.rehearse.build import Cache
    from raytpu.rehearse.run import rehearse

    cache = Cache.default()
    if cache.missing():
        print(f"rehearsal binaries missing in {cache.root}: run `raytpu rehearse --build`",
              file=sys.stderr)
        return 1
    totals: list[float] = []
    to_bound: list[float] = []
    phases: dict[str, list[float]] = {}
    load_before = os.getloadavg()[0]
    for i in range(args.rounds):
        started = time.monotonic()
        r = rehearse(run_plan(args.stack, preview=True), cache, crds=args.crds,
                     at_max=args.at_max)
        total = time.monotonic() - started
        if not r.ok:
            print(f"round {i + 1}: the rehearsal failed; fix that first", file=sys.stderr)
            return 1
        bound = r.seconds - r.timings["teardown"]  # the teardown comes after every pod bound
        totals.append(total)
        to_bound.append(bound)
        for k, v in r.timings.items():
            phases.setdefault(k, []).append(v)
        print(f"round {i + 1}: {total:.1f} s ({len(r.pods)} Ray pods bound on "
              f"{sum(p.nodes for p in r.pools)} nodes)", file=sys.stderr)
    median = statistics.median(to_bound)
    result = {
        "stack": args.stack, "at_max": args.at_max, "rounds": args.rounds,
        "median_s": round(median, 2), "target_s": TARGET_S,
        "ratio_to_target": round(median / TARGET_S, 3),
        "phases_median_s": {k: round(statistics.median(v), 2) for k, v in phases.items()},
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }
    print(f"warm rehearsal of {args.stack}: median {median:.1f} s to every pod bound, "
          f"{median / TARGET_S:.2f}x the {TARGET_S:.0f} s target "
          f"({'met' if median < TARGET_S else 'missed'}); load {load_before:.1f} -> "
          f"{os.getloadavg()[0]:.1f}")
    for k, v in result["phases_median_s"].items():  # type: ignore[union-attr]
        print(f"  {k:24} {v:6.2f} s")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
