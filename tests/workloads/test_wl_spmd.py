"""The TPU code path, :class:`SpmdDataParallel`, on XLA:CPU with four virtual devices.

XLA:CPU cannot form a multi-process mesh, but one process can run SPMD over
``CPU_NUM_DEVICES`` virtual devices: the same mesh, input sharding, partitioner-inserted
gradient all-reduce, bf16 autocast and optimizer step as on a TPU host, so a bug in any of
them fails here rather than on a slice.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch_xla")

from no_ray import run_on_xla_cpu
from raytpu.spec.training import ModelConfig

TINY = ModelConfig(n_layers=1, d_model=32, n_heads=2, seq_len=32)
DEVICES = 4


@pytest.mark.slow
def test_spmd_data_parallel_trains_on_virtual_devices(tmp_path: Path, text_dir: Path) -> None:
    script = textwrap.dedent(
        f"""
        import dataclasses, json, pathlib
        import numpy as np, torch, torch_xla
        import torch_xla.debug.metrics as met
        import torch_xla.runtime as xr
        from raytpu.facts.catalog import slice_shape
        from raytpu.spec.training import ModelConfig, TrainConfig
        from raytpu.workloads.metrics import MfuBasis
        from raytpu.workloads.parallel import SpmdDataParallel
        from raytpu.workloads.trainer import HostPlace, make_parallelism, train
        from no_ray import InProcessHooks

        spec = torch_xla._XLAC._get_xla_sharding_spec
        par = SpmdDataParallel(num_slices=1)
        out = {{"devices": xr.global_runtime_device_count(),
                "mesh": [list(par.mesh.mesh_shape), list(par.mesh.axis_names)],
                "compile_by_default": par.compile_by_default}}
        batch = par.to_device(np.zeros((8, 33), dtype=np.int64))
        out["batch"] = [list(batch.shape), spec(batch)]

        cfg = TrainConfig(steps=7, model=ModelConfig(**{TINY.__dict__!r}),
                          data={str(text_dir)!r}, batch_per_host=8, checkpoint_every=3,
                          log_every=3)
        basis = MfuBasis.for_run(cfg.model, slice_shape(cfg.tpu), 1, simulated=True)

        def run(cfg, par, folder=None):
            hooks = InProcessHooks(folder)
            summary = train(cfg, par, hooks, HostPlace(0, 1, 0), basis)
            return hooks, summary

        def compiles():
            return met.metric_data("CompileTime")[0]

        # Four steps build every graph of the loop: the step, and the loss reads of a full
        # (3 steps) and a partial logging window. A 7-step run through three checkpoints
        # at other learning rates must compile nothing new.
        run(dataclasses.replace(cfg, steps=4), par)
        before = compiles()
        hooks, summary = run(cfg, par)
        out["new_graphs"] = compiles() - before
        out["straight"] = [(r["step"], r["loss"]) for r in hooks.records]
        out["param_specs"] = sorted({{spec(p) for p in summary.model.parameters()}})
        ckpt = pathlib.Path({str(tmp_path / "ckpt")!r})
        first, _ = run(dataclasses.replace(cfg, steps=4), par, ckpt)
        second, _ = run(cfg, par, ckpt)
        out["resumed"] = [(r["step"], r["loss"]) for r in first.records + second.records]
        eager, _ = run(cfg, make_parallelism(eager=True))
        out["eager"] = [(r["step"], r["loss"]) for r in eager.records]
        print(json.dumps(out))
        """
    )
    out = run_on_xla_cpu(script, devices=DEVICES)
    assert out["devices"] == DEVICES
    assert out["mesh"] == [[1, DEVICES], ["data", "fsdp"]]
    # Each device holds a quarter of the host's batch rows; the sequence stays whole.
    assert out["batch"] == [[8, 33], f"{{devices=[{DEVICES},1]0,1,2,3}}"]
    # The weights stay replicated through the optimizer step: XLA all-reduced the grads.
    assert out["param_specs"] == ["{replicated}"]
    assert out["new_graphs"] == 0
    steps = list(range(1, 8))
    assert [s for s, _ in out["straight"]] == steps
    assert [s for s, _ in out["resumed"]] == steps
    assert [x for _, x in out["resumed"]] == pytest.approx(
        [x for _, x in out["straight"]], rel=1e-5
    )
    # bf16 autocast against eager fp32 on the same global batch.
    assert [x for _, x in out["straight"]] == pytest.approx(
        [x for _, x in out["eager"]], rel=2e-2
    )
