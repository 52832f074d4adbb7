"""MFU of both trainers on whatever accelerator this machine has.

    .venv/bin/python benchmarks/mfu.py                     # tiny preset, torch_xla and JAX
    .venv/bin/python benchmarks/mfu.py --model 1b --seq-len 2048 --batch 8 --steps 20
    .venv/bin/python benchmarks/mfu.py --framework jax --peak-flops 9.9e14 --json r.json

Each framework trains ``--model`` in a fresh process on every local device (one SPMD
mesh, FSDP), and the median step after the first two (compilation) gives tokens/s. MFU is
the trainers' own: ``raytpu.spec.flops`` (6 N_matmul + 12 L d T per token) against
the peak bf16 FLOP/s of the devices. On a TPU the peak is the catalog's (the generation
from JAX's ``device_kind``); anywhere else the catalog has none, so MFU is printed against
``--peak-flops`` if given, else against the peak of ``--tpu`` (a simulated slice's, the
figure the local trainer reports): on a CPU it is a figure, not a target.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from typing import Any

CHILD = """
import json, os, statistics, sys
framework, model, seq, batch, steps = sys.argv[1:6]
seq, batch, steps = int(seq), int(batch), int(steps)
from raytpu.facts.catalog import slice_shape
from raytpu.spec.training import ModelConfig, TrainConfig
from raytpu.workloads.loop import HostPlace, RecordingHooks
from raytpu.workloads.metrics import MfuBasis

cfg = TrainConfig(steps=steps, preset=model, model=ModelConfig(seq_len=seq), batch_per_host=batch,
                  checkpoint_every=10**9, log_every=1, framework=framework)
arch = cfg.architecture()
hooks = RecordingHooks()
if framework == "jax":
    import jax
    from raytpu.workloads.jax_trainer import train_jax
    devices, kind = len(jax.devices()), jax.devices()[0].device_kind
    platform = jax.default_backend()
    basis = MfuBasis.for_run(arch, slice_shape("v4-8"), 1, simulated=True, seq_len=seq)
    train_jax(cfg, hooks, HostPlace(0, 1, 0), basis)
else:
    import torch_xla.runtime as xr
    from raytpu.workloads.parallel import SpmdDataParallel
    from raytpu.workloads.trainer import train
    par = SpmdDataParallel(1, fsdp=True)
    devices, kind = xr.global_runtime_device_count(), xr.device_type()
    platform = kind
    basis = MfuBasis.for_run(arch, slice_shape("v4-8"), 1, simulated=True, seq_len=seq)
    train(cfg, par, hooks, HostPlace(0, 1, 0), basis)
steady = [r["step_time_s"] for r in hooks.records[2:]] or [hooks.records[-1]["step_time_s"]]
print(json.dumps({"devices": devices, "device_kind": str(kind), "platform": str(platform),
                  "step_time_s": statistics.median(steady),
                  "tokens_per_step": hooks.records[-1]["tokens"],
                  "flops_per_token": basis.flops_per_token,
                  "loss_first": hooks.records[0]["loss"], "loss_last": hooks.records[-1]["loss"]}))
"""

# JAX's device_kind on each generation -> the catalog's generation name.
_KINDS = {"TPU v4": "v4", "TPU v5 lite": "v5e", "TPU v5e": "v5e", "TPU v5p": "v5p",
          "TPU v5": "v5p", "TPU v6 lite": "v6e", "TPU v6e": "v6e"}


def peak_per_device(kind: str, fallback_tpu: str, given: float | None) -> tuple[float, str]:
    """(peak bf16 FLOP/s per device, where it comes from)."""
    from raytpu.facts.catalog import GENERATIONS, slice_shape

    if given is not None:
        return given, "--peak-flops"
    gen = _KINDS.get(kind)
    if gen is None and kind == "TPU" and os.environ.get("TPU_ACCELERATOR_TYPE"):
        gen = slice_shape(os.environ["TPU_ACCELERATOR_TYPE"]).generation.name  # GKE sets it
    if gen is not None:
        g = GENERATIONS[gen]
        # v4/v5p expose one JAX device per chip (megacore): the chip's peak.
        return g.peak_bf16_flops_per_chip, f"catalog {gen} ({g.source})"
    shape = slice_shape(fallback_tpu)
    return shape.generation.peak_bf16_flops_per_chip, (
        f"no catalog peak for {kind!r}: the simulated {fallback_tpu}'s per-chip peak")


def run(framework: str, args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ)
    if framework == "jax":
        env.setdefault("JAX_PLATFORMS", "")
    else:
        env.setdefault("PJRT_DEVICE", "TPU" if os.path.exists("/dev/accel0") else "CPU")
    if args.cpu_devices:
        env["CPU_NUM_DEVICES"] = str(args.cpu_devices)
        env["JAX_NUM_CPU_DEVICES"] = str(args.cpu_devices)
    cmd = [sys.executable, "-c", textwrap.dedent(CHILD), framework, args.model,
           str(args.seq_len), str(args.batch), str(args.steps)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        return {"framework": framework, "error": proc.stderr.strip().splitlines()[-1:]}
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    peak, source = peak_per_device(out["device_kind"], args.tpu, args.peak_flops)
    achieved = out["flops_per_token"] * out["tokens_per_step"] / out["step_time_s"]
    out.update(framework=framework, model=args.model, tokens_per_s=out["tokens_per_step"]
               / out["step_time_s"], model_flops_per_s=achieved,
               peak_flops=peak * out["devices"], peak_source=source,
               mfu=achieved / (peak * out["devices"]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--framework", choices=("torch", "jax", "both"), default="both")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8, help="sequences per step (all devices)")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--cpu-devices", type=int, default=0,
                        help="virtual devices on a CPU (default: 1 per process)")
    parser.add_argument("--tpu", default="v4-8",
                        help="off TPU: the slice whose per-chip peak MFU is reported against")
    parser.add_argument("--peak-flops", type=float, default=None,
                        help="peak bf16 FLOP/s per device, overriding the catalog")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    frameworks = ("torch", "jax") if args.framework == "both" else (args.framework,)
    results = [run(f, args) for f in frameworks]
    for r in results:
        if "error" in r:
            print(f"{r['framework']:5}  failed: {r['error']}")
            continue
        print(f"{r['framework']:5}  {r['model']} on {r['devices']} x {r['device_kind']}: "
              f"{r['tokens_per_s']:,.0f} tokens/s, {r['model_flops_per_s']:.3g} model FLOP/s, "
              f"MFU {r['mfu']:.3g} of {r['peak_flops']:.3g} ({r['peak_source']}); "
              f"loss {r['loss_first']:.3f} -> {r['loss_last']:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    print(f"(median step of {args.steps} after 2 warm-up steps; global batch {args.batch} x "
          f"{args.seq_len} tokens)")


if __name__ == "__main__":
    main()
