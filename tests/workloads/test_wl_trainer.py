"""The training loop without Ray: XLA compiles once, resume is exact, gloo keeps hosts equal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_xla")

from raytpu.catalog import slice_shape  # noqa: E402
from raytpu.workloads.config import ModelConfig, TrainConfig  # noqa: E402
from raytpu.workloads.metrics import MfuBasis  # noqa: E402
from raytpu.workloads.trainer import (  # noqa: E402
    HostPlace,
    InProcessHooks,
    make_parallelism,
    train,
)

TINY = ModelConfig(n_layers=1, d_model=32, n_heads=2, seq_len=32)


def _train_eager(cfg: TrainConfig, hooks: InProcessHooks) -> list[dict[str, object]]:
    basis = MfuBasis.for_run(cfg.model, slice_shape(cfg.tpu), 1, simulated=True)
    train(cfg, make_parallelism(eager=True), hooks, HostPlace(0, 1, 0), basis)
    return hooks.records


def test_resumed_run_continues_the_same_stream_exactly(tmp_path: Path, text_dir: Path) -> None:
    """4 steps, then resume to 7 == 7 steps straight (steps 1-4 are warmup, whose rate
    does not depend on the run length, so both runs see the same rates throughout)."""
    base = dict(model=TINY, data=str(text_dir), batch_per_host=2, checkpoint_every=3)
    ckpt = tmp_path / "ckpt"
    straight = _train_eager(TrainConfig(steps=7, **base), InProcessHooks())  # type: ignore[arg-type]
    first = _train_eager(TrainConfig(steps=4, **base), InProcessHooks(ckpt))  # type: ignore[arg-type]
    second = _train_eager(TrainConfig(steps=7, **base), InProcessHooks(ckpt))  # type: ignore[arg-type]
    assert [r["step"] for r in first] == [1, 2, 3, 4]
    assert [r["step"] for r in second] == [5, 6, 7]  # from the step-4 (final) checkpoint
    assert sorted(p.name for p in ckpt.iterdir()) == ["step_00000003", "step_00000004",
                                                          "step_00000006", "step_00000007"]
    assert [r["loss"] for r in first + second] == [r["loss"] for r in straight]


@pytest.mark.slow
def test_xla_step_compiles_once_and_matches_eager(tmp_path: Path, text_dir: Path) -> None:
    """Fresh interpreter: XLA's metrics are per process."""
    script = textwrap.dedent(
        f"""
        import json, torch_xla.debug.metrics as met
        from raytpu.catalog import slice_shape
        from raytpu.workloads.config import ModelConfig, TrainConfig
        from raytpu.workloads.metrics import MfuBasis
        from raytpu.workloads.trainer import HostPlace, InProcessHooks, make_parallelism, train
        cfg = TrainConfig(steps=8, data={str(text_dir)!r}, batch_per_host=2,
                          checkpoint_every=100, model=ModelConfig(**{TINY.__dict__!r}))
        out = {{}}
        # XLA first: a CPU backward before the XLA runtime exists sizes autograd's device
        # queues without it (INTERNAL ASSERT in engine.cpp).
        for eager in (False, True):
            hooks = InProcessHooks()
            basis = MfuBasis.for_run(cfg.model, slice_shape(cfg.tpu), 1, simulated=True)
            train(cfg, make_parallelism(eager=eager), hooks, HostPlace(0, 1, 0), basis)
            out["eager" if eager else "xla"] = [r["loss"] for r in hooks.records]
        out["compiles"] = met.metric_data("CompileTime")[0]
        # Losses fetched 3 steps at a time by async step closures (the TPU default is 10).
        hooks = InProcessHooks()
        windowed = TrainConfig(**{{**cfg.__dict__, "log_every": 3}})
        train(windowed, make_parallelism(), hooks, HostPlace(0, 1, 0), basis)
        out["windowed"] = [(r["step"], r["loss"]) for r in hooks.records]
        print(json.dumps(out))
        """
    )
    env = dict(os.environ, PJRT_DEVICE="CPU")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # One process, nothing to average: the whole step is one graph, compiled once whatever
    # the step's learning rate; the end-of-run checkpoint only transfers device data.
    assert out["compiles"] == 1
    assert len(out["xla"]) == 8
    for e, x in zip(out["eager"], out["xla"], strict=True):
        assert x == pytest.approx(e, rel=2e-3)
    assert [step for step, _ in out["windowed"]] == list(range(1, 9))  # 3 + 3 + flushed 2
    assert [loss for _, loss in out["windowed"]] == pytest.approx(out["xla"], rel=1e-5)


@pytest.mark.slow
def test_gloo_grad_sync_keeps_hosts_identical(text_dir: Path) -> None:
    from raytpu.workloads.mp_run import run_processes

    cfg = TrainConfig(steps=5, model=TINY, data=str(text_dir), batch_per_host=2,
                      checkpoint_every=100)
    results = run_processes(cfg, 2, timeout_s=300)
    assert [r.rank for r in results] == [0, 1]
    assert results[0].param_checksum == results[1].param_checksum
    # Forward/backward and optimizer graphs (the grads cross the host between them).
    assert [r.compiles for r in results] == [2, 2]
    assert [r["step"] for r in results[0].records] == [1, 2, 3, 4, 5]
    assert results[1].records == []  # only rank 0 reports
    # The reported loss is the mean over both hosts' (different) batches.
    alone = _train_eager(
        TrainConfig(steps=1, model=TINY, data=str(text_dir), batch_per_host=2), InProcessHooks()
    )
    assert results[0].records[0]["loss"] != pytest.approx(alone[0]["loss"], rel=1e-6)
