"""Throughput of the default model four ways, and the time a lost host costs.

    python benchmarks/train_local.py [--steps 50] [--warmup 10] [--rounds 3] [--[no-]compile]
                                     [--only resume] [--json FILE]

(a) eager PyTorch, one process            (b) torch_xla on XLA:CPU, one process
(b-) as (b) with lazy tracing every step (--no-compile), for reference
(c) 2-host simulated v4-16 via the Ray launcher
(d) the same 2 processes over gloo without Ray (torch.multiprocessing)
(e) a simulated host killed mid-run: seconds from the kill to the first resumed step,
    once with torch_xla's persistent compilation cache (``RAYTPU_XLA_CACHE`` on every
    simulated host, a folder per host on local disk) and once without, each on a fresh
    cluster; ``--only resume`` runs just this pair. torch_xla 2.9 cannot load its cache
    (pytorch/xla#9094): the workers' log line "XLA compile cache after the first step"
    counts the failed loads.

The trainer's defaults throughout: on XLA:CPU that is ``torch.compile`` (openxla) of the
forward/backward; ``--compile``/``--no-compile`` force it on or off for (b) to (e).

Tokens/s are measured the same way everywhere: the trainer's own per-step records
(rank 0), summed tokens over summed step time, after ``--warmup`` steps (compiles). (a)
and (b) run in fresh interpreters so neither inherits the other's threads or runtime.
(c) and (d) alternate for ``--rounds`` rounds (a fresh cluster each time, and no Ray
running during (d)) so that load drift on a shared machine hits both alike; their mean
is compared. On a shared 2-core machine single runs vary by +-20 %.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from raytpu.spec.training import LaunchOptions, TrainConfig
from raytpu.workloads.trainer import XLA_CACHE_ENV

# The no-Ray harness (in-process hooks, N processes over gloo) is test code, not package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "workloads"))

TARGETS = {
    "launcher_vs_no_ray": 0.9,  # (c) / (d)
    "xla_vs_eager": 0.7,  # (b) / (a)
    "kill_to_resume_s": 20.0,  # (e) with the compile cache, upper bound
    "resume_cache_speedup": 2.0,  # (e) without / with the cache
}


def steady_tokens_per_s(records: list[dict[str, Any]], warmup: int) -> float:
    rows = [r for r in records if r["step"] > warmup]
    if not rows:
        raise RuntimeError(f"no steps after the {warmup} warmup steps")
    return sum(r["tokens"] for r in rows) / sum(r["step_time_s"] for r in rows)


def single_process(kind: str, steps: int, compile: bool | None) -> list[dict[str, Any]]:
    """(a)/(b): the trainer in this process; ``kind`` is eager or xla."""
    from no_ray import InProcessHooks
    from raytpu.facts.catalog import slice_shape
    from raytpu.workloads.metrics import MfuBasis
    from raytpu.workloads.trainer import HostPlace, make_parallelism, train

    cfg = TrainConfig(steps=steps, checkpoint_every=10 * steps, compile=compile)
    hooks = InProcessHooks()
    basis = MfuBasis.for_run(cfg.model, slice_shape(cfg.tpu), 1, simulated=True)
    train(cfg, make_parallelism(eager=kind == "eager"), hooks, HostPlace(0, 1, 0), basis)
    if kind == "xla":
        import torch_xla.debug.metrics as met

        print(f"xla compiles: {met.metric_data('CompileTime')[0]}", file=sys.stderr)
    return hooks.records


def _compile_flag(compile: bool | None) -> list[str]:
    return [] if compile is None else ["--compile" if compile else "--no-compile"]


def _in_subprocess(kind: str, steps: int, compile: bool | None = None) -> list[dict[str, Any]]:
    env = dict(os.environ, PJRT_DEVICE="CPU")
    proc = subprocess.run(
        [sys.executable, __file__, "--single", kind, "--steps", str(steps),
         *_compile_flag(compile)],
        capture_output=True, text=True, env=env, timeout=900,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"({kind}) failed: {proc.stderr[-2000:]}")
    records: list[dict[str, Any]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return records


def resume_pair(fail_steps: int, compile: bool | None, scratch: str) -> dict[str, float]:
    """(e) with and without the compile cache: seconds from the kill to the first resumed
    step, and to the replacement node joining Ray."""
    from raytpu.workloads.local_mode import run_local

    fail_at = fail_steps // 2 + 1
    cfg = TrainConfig(steps=fail_steps, checkpoint_every=fail_steps // 2,
                      fail_host_at_step=fail_at, compile=compile)
    out: dict[str, float] = {}
    for suffix, cache in (("", True), ("_nocache", False)):
        env = {XLA_CACHE_ENV: f"{scratch}/xla-cache"} if cache else {}
        run = run_local(cfg, LaunchOptions(storage_path=f"{scratch}/e{suffix}", progress=False),
                        host_env=env)
        if run.kill_to_resume_s is None or run.replaced_at is None or run.killed_at is None:
            raise RuntimeError("the failure run never resumed")
        out[f"kill_to_resume{suffix}_s"] = run.kill_to_resume_s
        out[f"kill_to_replacement{suffix}_s"] = run.replaced_at - run.killed_at
        first_resumed = next(r["step"] for r in run.records if r["attempt"] > 1)
        label = "with" if cache else "without"
        print(f"{f'(e) host kill -> first resumed step, {label} cache':52s} "
              f"{run.kill_to_resume_s:6.1f} s (replacement node up after "
              f"{run.replaced_at - run.killed_at:.1f} s; resumed at step {first_resumed} "
              f"after the kill at {fail_at})", flush=True)
    out["resume_cache_speedup"] = out["kill_to_resume_nocache_s"] / out["kill_to_resume_s"]
    return out


def _verdicts(results: dict[str, float]) -> None:
    kill = results["kill_to_resume_s"]
    verdict = "PASS" if kill < TARGETS["kill_to_resume_s"] else "MISS"
    print(f"{'kill_to_resume_s':22s} {kill:6.1f}  (target < {TARGETS['kill_to_resume_s']:.0f} s)"
          f"  {verdict}")
    print(f"{'kill_to_resume_nocache_s':22s} {results['kill_to_resume_nocache_s']:6.1f}")
    speedup = results["resume_cache_speedup"]
    verdict = "PASS" if speedup >= TARGETS["resume_cache_speedup"] else "MISS"
    print(f"{'resume_cache_speedup':22s} {speedup:6.2f}  "
          f"(target >= {TARGETS['resume_cache_speedup']:.1f})  {verdict}")


def _line(label: str, value: float, extra: str = "") -> None:
    print(f"{label:40s} {value:10,.0f} tokens/s{extra}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    # The first (c) run starts Ray on cold caches; three alternations average that out.
    parser.add_argument("--rounds", type=int, default=3, help="alternations of (c) and (d)")
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                        help="force torch.compile on/off for (b) to (e) (default: the trainer's)")
    parser.add_argument("--fail-steps", type=int, default=20)
    parser.add_argument("--only", choices=["resume"],
                        help="resume: just (e), the host kill with and without the cache")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    parser.add_argument("--single", choices=["eager", "xla"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.single:
        print(json.dumps(single_process(args.single, args.steps, args.compile)))
        return 0

    from no_ray import run_processes
    from raytpu.workloads.local_mode import run_local

    t0 = time.perf_counter()
    tag = "".join(f" {f}" for f in _compile_flag(args.compile))
    results: dict[str, Any] = {"steps": args.steps, "warmup": args.warmup,
                               "compile": args.compile}
    if args.only == "resume":
        with tempfile.TemporaryDirectory(prefix="raytpu-bench-") as scratch:
            results.update(resume_pair(args.fail_steps, args.compile, scratch))
        print()
        _verdicts(results)
        print(f"\ntotal benchmark wall {time.perf_counter() - t0:.0f}s")
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
        return 0
    results["a_eager_1proc"] = steady_tokens_per_s(_in_subprocess("eager", args.steps),
                                                   args.warmup)
    _line("(a) eager PyTorch, 1 process", results["a_eager_1proc"])
    results["b_xla_1proc"] = steady_tokens_per_s(
        _in_subprocess("xla", args.steps, args.compile), args.warmup
    )
    _line(f"(b) torch_xla XLA:CPU, 1 process{tag}", results["b_xla_1proc"])
    if args.compile is None:
        results["b_minus_xla_lazy_1proc"] = steady_tokens_per_s(
            _in_subprocess("xla", args.steps, compile=False), args.warmup
        )
        _line("(b-) as (b) with --no-compile", results["b_minus_xla_lazy_1proc"])

    cfg = TrainConfig(steps=args.steps, checkpoint_every=10 * args.steps, compile=args.compile)
    c_runs: list[float] = []
    d_runs: list[float] = []
    with tempfile.TemporaryDirectory(prefix="raytpu-bench-") as scratch:
        for i in range(args.rounds):
            opts = LaunchOptions(storage_path=f"{scratch}/c{i}", progress=False)
            report = run_local(cfg, opts)
            c_runs.append(steady_tokens_per_s(report.records, args.warmup))
            _line(f"(c) 2-host v4-16, Ray launcher{tag} #{i + 1}", c_runs[-1],
                  f"  (run wall {report.wall_s:.0f}s)")
            d = run_processes(cfg, 2)
            d_runs.append(steady_tokens_per_s(d[0].records, args.warmup))
            _line(f"(d) 2 processes + gloo, no Ray{tag} #{i + 1}", d_runs[-1])
        results["c_launcher_2host"] = sum(c_runs) / len(c_runs)
        results["d_gloo_2proc"] = sum(d_runs) / len(d_runs)
        results["c_runs"], results["d_runs"] = c_runs, d_runs
        _line("(c) mean", results["c_launcher_2host"])
        _line("(d) mean", results["d_gloo_2proc"])

        results.update(resume_pair(args.fail_steps, args.compile, scratch))

    ratios = {
        "launcher_vs_no_ray": results["c_launcher_2host"] / results["d_gloo_2proc"],
        "xla_vs_eager": results["b_xla_1proc"] / results["a_eager_1proc"],
    }
    print()
    for name, value in ratios.items():
        verdict = "PASS" if value >= TARGETS[name] else "MISS"
        print(f"{name:22s} {value:6.2f}  (target >= {TARGETS[name]:.1f})  {verdict}")
    if "b_minus_xla_lazy_1proc" in results:
        extra = results["b_minus_xla_lazy_1proc"] / results["a_eager_1proc"]
        ratios["xla_lazy_vs_eager"] = extra
        print(f"{'xla_lazy_vs_eager':22s} {extra:6.2f}  (reference: (b-) / (a))")
    _verdicts(results)
    print(f"\ntotal benchmark wall {time.perf_counter() - t0:.0f}s")
    if args.json:
        args.json.write_text(json.dumps({**results, **ratios}, indent=2))
    return 0

if __name__ == "__main__":
    sys.exit(main())
