"""How `raytpu plan --json` scales with the number of TPU slice pools, against xpk.

Each measurement is a fresh process (as a user runs it): wall time from spawn to exit and
the child's own peak RSS (``os.wait4`` rusage). Stacks with 1, 8 and 64 multi-host
v5litepod-16 slices (= node pools of 4 nodes) are generated into a temporary folder; runs
are interleaved and repeated, and the median is compared.

The peer is Google's xpk: ``xpk cluster create --dry-run --tpu-type v5litepod-16
--num-slices 64 ...`` prints the gcloud/kubectl commands that would create the same 64 node
pools. xpk lives in its own throwaway venv (default ``/tmp/xpkvenv``, created on demand
with ``pip install xpk``), never in the project's venv; pass ``--xpk PATH`` to use an
existing executable. Without xpk the comparison is skipped, saying why.

Each plan runs the policy pack too, as ``raytpu plan`` does, with ``maxChips`` raised so
that the 1024 chips of 64 slices pass (the shipped limit is 256; a blocked plan exits 3).

Targets (issue 19): 64 pools within 1.3x the time of 1 pool; the 64-slice plan under 0.8x
of xpk's 64-slice dry run; peak RSS under 500 MB. Both ratios come from this run's
wall-time medians (interleaved runs, so background load hits every measurement alike); the
load average before and after is printed with them, because the machine may be shared, and
the children's own CPU time beside them, which load disturbs less.

    python benchmarks/plan_scaling.py [--repeat 9] [--xpk /path/to/xpk] [--importtime]
        [--profile 64]   # cProfile of one in-process 64-slice plan, top functions
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SIZES = (1, 8, 64)
TPU = "v5litepod-16"
ZONE = "us-west4-a"
XPK_VENV = Path("/tmp/xpkvenv")
TIME_RATIO_TARGET = 1.3
XPK_RATIO_TARGET = 0.8
RSS_TARGET_MB = 500.0
POLICY_CONFIG = {"max-tpu-chips": {"maxChips": 4096}}


@dataclass
class Samples:
    label: str
    wall_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.wall_s)

    @property
    def best(self) -> float:
        return min(self.wall_s)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu_s)

    @property
    def peak_rss(self) -> float:
        return max(self.rss_mb)


# Children may write bytecode caches: pip precompiled xpk at install, and the warm-up run
# gives raytpu's own modules the same (some sandboxes set PYTHONDONTWRITEBYTECODE=1).
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

def measure(cmd: list[str], cwd: Path, check_stdout: str | None = None
            ) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds (user + system), peak RSS (MB) of the child itself, and its
    stdout."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                env=CHILD_ENV)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        if proc.returncode != 0:
            raise RuntimeError(
                f"{' '.join(cmd)} exited {proc.returncode}:\n{err.read().decode()[-2000:]}"
            )
    if check_stdout is not None and check_stdout not in stdout:
        raise RuntimeError(f"{' '.join(cmd)}: expected {check_stdout!r} in its output")
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss / 1024.0, stdout  # ru_maxrss is KiB on Linux


def write_stacks(folder: Path) -> None:
    for n in SIZES:
        config = {
            "gcp:project": "bench-project",
            "raytpu:zone": ZONE,
            "raytpu:slices": [{"name": "v5e-16", "tpu": TPU, "count": n, "spot": True}],
            "raytpu:cluster": {"name": "bench", "deletionProtection": False},
        }
        (folder / f"Pulumi.scale{n}.yaml").write_text(yaml.safe_dump({"config": config}))
    (folder / "policy.json").write_text(json.dumps(POLICY_CONFIG))


def plan_args(stacks: Path, n: int) -> list[str]:
    """``raytpu plan`` of the n-slice stack, as a user runs it (policies on)."""
    return ["plan", "--stack", f"scale{n}", "--json", "--stacks-dir", str(stacks),
            "--policy-config", str(stacks / "policy.json")]


def profile_plan(stacks: Path, n: int, top: int = 25) -> None:
    """cProfile of one plan of the n-slice stack in this process, after a warm-up plan (so
    imports are not counted): where the time of the plan itself goes."""
    import cProfile
    import io
    import pstats

    from raytpu.plan.engine import run_plan
    from raytpu.plan.policies import plan_policies

    def once() -> None:
        result = run_plan(f"scale{n}", stacks, preview=True)
        plan_policies(result, config=POLICY_CONFIG)
        result.to_json()

    once()
    prof = cProfile.Profile()
    prof.enable()
    once()
    prof.disable()
    for key in ("cumulative", "tottime"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(top)
        print(f"\n--- plan of {n} slices, by {key} ---")
        print("\n".join(buf.getvalue().splitlines()[4:]))


def raytpu_command() -> list[str]:
    script = Path(sys.executable).with_name("raytpu")
    return [str(script)] if script.exists() else [sys.executable, "-m", "raytpu"]


def check_plan(stdout: str, n: int) -> None:
    plan = json.loads(stdout)
    pools = [r for r in plan["resources"] if r["type"] == "gcp:container/nodePool:NodePool"
             and r["inputs"].get("placementPolicy")]
    if len(pools) != n:
        raise RuntimeError(f"plan for {n} slices has {len(pools)} TPU node pools")


def find_xpk(explicit: str | None, install: bool) -> tuple[Path | None, str]:
    if explicit:
        path = Path(explicit)
        return (path, "given") if path.exists() else (None, f"--xpk {explicit} does not exist")
    candidate = XPK_VENV / "bin" / "xpk"
    if candidate.exists():
        return candidate, f"found in {XPK_VENV}"
    if not install:
        return None, f"no xpk in {XPK_VENV} and --no-install-xpk given"
    print(f"installing xpk into a throwaway venv {XPK_VENV} ...", flush=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(XPK_VENV)], check=True,
                       capture_output=True, timeout=120)
        subprocess.run([str(XPK_VENV / "bin" / "pip"), "install", "-q", "xpk"], check=True,
                       capture_output=True, timeout=600)
    except (subprocess.SubprocessError, OSError) as e:
        detail = getattr(e, "stderr", b"") or b""
        return None, f"pip install xpk failed: {e} {detail.decode(errors='replace')[-300:]}"
    return (candidate, "installed") if candidate.exists() else (None, "xpk missing after install")


def xpk_command(xpk: Path, slices: int) -> list[str]:
    return [str(xpk), "cluster", "create", "--dry-run", "--tpu-type", TPU,
            "--num-slices", str(slices), "--spot", "--cluster", "x", "--project", "p",
            "--zone", ZONE]


def import_report(cmd: list[str], cwd: Path, top: int = 12) -> list[tuple[str, float]]:
    """Cumulative import time per top-level package (``python -X importtime``)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *cmd[1:]] if cmd[0] ==
                          sys.executable else [sys.executable, "-X", "importtime", "-m",
                                               "raytpu.cli.app", *cmd[1:]],
                          cwd=cwd, capture_output=True, text=True, check=False)
    totals: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", line)
        if m:
            parts = m.group(2).split(".")
            key = ".".join(parts[:2]) if parts[0] in ("pulumi_gcp", "pulumi_kubernetes",
                                                      "raytpu") else parts[0]
            totals[key] = totals.get(key, 0.0) + int(m.group(1)) / 1e6
    return sorted(totals.items(), key=lambda kv: -kv[1])[:top]


def verdict(ok: bool | None) -> str:
    return "SKIP" if ok is None else ("PASS" if ok else "MISS")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=9, help="runs per measurement (median used)")
    ap.add_argument("--xpk", help="path of an xpk executable (default: /tmp/xpkvenv/bin/xpk)")
    ap.add_argument("--no-install-xpk", action="store_true",
                    help="do not create /tmp/xpkvenv when xpk is missing")
    ap.add_argument("--importtime", action="store_true",
                    help="also print where the 64-slice plan spends its import time")
    ap.add_argument("--profile", type=int, metavar="N", choices=SIZES,
                    help="also print a cProfile of one in-process plan of N slices")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    opts = ap.parse_args()
    load_before = os.getloadavg()

    xpk, xpk_note = find_xpk(opts.xpk, install=not opts.no_install_xpk)
    raytpu = raytpu_command()
    results = {n: Samples(f"raytpu plan, {n} pools") for n in SIZES}
    xpk_samples = Samples("xpk dry run, 64 slices")
    xpk_error = ""

    with tempfile.TemporaryDirectory(prefix="raytpu-bench-") as tmp:
        stacks = Path(tmp) / "stacks"
        stacks.mkdir()
        write_stacks(stacks)
        xpk_cwd = Path(tmp) / "xpk"
        xpk_cwd.mkdir()
        for n in SIZES:  # warm-up: .pyc files, page cache
            *_, out = measure([*raytpu, *plan_args(stacks, n)], REPO)
            check_plan(out, n)
        if xpk is not None:
            try:
                measure(xpk_command(xpk, 64), xpk_cwd, check_stdout="node-pools create")
            except RuntimeError as e:
                xpk_error, xpk = str(e)[-500:], None
        for _ in range(opts.repeat):  # interleaved, so background load hits all alike
            for n in SIZES:
                wall, cpu, rss, _ = measure([*raytpu, *plan_args(stacks, n)], REPO)
                results[n].wall_s.append(wall)
                results[n].cpu_s.append(cpu)
                results[n].rss_mb.append(rss)
            if xpk is not None:
                wall, cpu, rss, _ = measure(xpk_command(xpk, 64), xpk_cwd)
                xpk_samples.wall_s.append(wall)
                xpk_samples.cpu_s.append(cpu)
                xpk_samples.rss_mb.append(rss)
        imports = (import_report([*raytpu, *plan_args(stacks, 64)], REPO)
                   if opts.importtime else [])
        if opts.profile:
            profile_plan(stacks, opts.profile)
        shutil.rmtree(xpk_cwd, ignore_errors=True)

    load_after = os.getloadavg()
    print(f"\nraytpu plan --json ({TPU} slices, one node pool each; {opts.repeat} runs, "
          f"fresh process per run, {os.cpu_count()} CPUs)")
    print("load average (1/5/15 min) before: " + "/".join(f"{x:.1f}" for x in load_before)
          + ", after: " + "/".join(f"{x:.1f}" for x in load_after))
    print(f"{'measurement':32s} {'median s':>9s} {'best s':>8s} {'CPU s':>7s} "
          f"{'peak RSS MB':>12s}")
    rows = [*results.values(), *([xpk_samples] if xpk_samples.wall_s else [])]
    for s in rows:
        print(f"{s.label:32s} {s.median:9.2f} {s.best:8.2f} {s.cpu_median:7.2f} "
              f"{s.peak_rss:12.0f}")

    t1, t64 = results[1].median, results[64].median
    ratio = t64 / t1
    print(f"\nratio 8/1 pools:  {results[8].median / t1:.2f}x")
    print(f"ratio 64/1 pools: {ratio:.2f}x (CPU time: "
          f"{results[64].cpu_median / results[1].cpu_median:.2f}x)")
    peak = max(s.peak_rss for s in results.values())
    xpk_ok: bool | None = None
    xpk_ratio = 0.0
    if xpk_samples.wall_s:
        xpk_ratio = t64 / xpk_samples.median
        xpk_ok = xpk_ratio <= XPK_RATIO_TARGET
        print(f"raytpu 64 / xpk 64: {xpk_ratio:.2f}x "
              f"(best-of: {results[64].best / xpk_samples.best:.2f}x; CPU time: "
              f"{results[64].cpu_median / xpk_samples.cpu_median:.2f}x)")
    else:
        print(f"xpk comparison skipped: {xpk_error or xpk_note}")

    checks = [
        (f"64 pools within {TIME_RATIO_TARGET:.1f}x the time of 1 pool ({ratio:.2f}x)",
         ratio <= TIME_RATIO_TARGET),
        (f"peak RSS under {RSS_TARGET_MB:.0f} MB ({peak:.0f} MB)", peak < RSS_TARGET_MB),
        (f"64-slice plan under {XPK_RATIO_TARGET:.1f}x of xpk's dry run "
         + (f"({xpk_ratio:.2f}x: {t64:.2f} s vs {xpk_samples.median:.2f} s)"
            if xpk_samples.wall_s else ""), xpk_ok),
    ]
    print()
    for text, ok in checks:
        print(f"{verdict(ok):4s}  {text}")
    if imports:
        print("\nimport time of the 64-slice plan by package (python -X importtime, self s):")
        for name, secs in imports:
            print(f"  {name:32s} {secs:.3f}")
    missed = any(ok is False for _, ok in checks)
    return 1 if (missed and opts.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
