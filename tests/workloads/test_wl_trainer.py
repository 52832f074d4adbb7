"""The training loop without Ray: XLA compiles once, resume is exact, gloo keeps hosts equal."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_xla")

import numpy as np  # noqa: E402
from no_ray import InProcessHooks, run_on_xla_cpu, run_processes  # noqa: E402
from raytpu.facts.catalog import slice_shape  # noqa: E402
from raytpu.spec.training import ModelConfig, TrainConfig  # noqa: E402
from raytpu.workloads.metrics import MfuBasis  # noqa: E402
from raytpu.workloads.trainer import HostPlace, make_parallelism, train  # noqa: E402
from tokenizer_files import sentencepiece_model, word_level  # noqa: E402

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


def _user_data(kind: str, tmp_path: Path, text_dir: Path) -> tuple[str, str | None]:
    """``--data`` and ``--tokenizer`` for each kind of data a user brings."""
    text = text_dir / "a.txt"
    if kind == "text file":
        return str(text), None
    if kind == "folder":
        return str(text_dir), None
    if kind == "shards":
        (tmp_path / "shards").mkdir()
        for i in range(2):
            np.save(tmp_path / "shards" / f"{i}.npy", np.arange(i, 3000 + i) % 256)
        return str(tmp_path / "shards"), None
    if kind == "tokenizers":
        return str(text), str(word_level(tmp_path / "tokenizer.json"))
    sentencepiece_model(tmp_path / "x.model", text.read_text())
    return str(text), str(tmp_path / "x.model")


@pytest.mark.parametrize("kind", ["text file", "folder", "shards", "tokenizers",
                                  "sentencepiece"])
def test_each_kind_of_user_data_trains(tmp_path: Path, text_dir: Path, kind: str) -> None:
    data, tokenizer = _user_data(kind, tmp_path, text_dir)
    cfg = TrainConfig(steps=2, model=TINY, data=data, tokenizer=tokenizer, batch_per_host=2,
                      checkpoint_every=100)
    records = _train_eager(cfg, InProcessHooks())
    assert [r["step"] for r in records] == [1, 2]
    assert all(math.isfinite(float(r["loss"])) for r in records)  # type: ignore[arg-type]


@pytest.mark.slow
def test_xla_step_compiles_once_and_matches_eager(tmp_path: Path, text_dir: Path) -> None:
    """Both XLA paths: lazy tracing (the TPU default) and the dynamo-compiled forward/backward
    (the XLA:CPU default). Fresh interpreter: XLA's metrics are per process."""
    script = textwrap.dedent(
        f"""
        import dataclasses, json, torch_xla.debug.metrics as met
        from raytpu.facts.catalog import slice_shape
        from raytpu.spec.training import ModelConfig, TrainConfig
        from raytpu.workloads.metrics import MfuBasis
        from raytpu.workloads.trainer import HostPlace, make_parallelism, train
        from no_ray import InProcessHooks
        cfg = TrainConfig(steps=8, data={str(text_dir)!r}, batch_per_host=2,
                          checkpoint_every=100, model=ModelConfig(**{TINY.__dict__!r}),
                          compile=False)
        basis = MfuBasis.for_run(cfg.model, slice_shape(cfg.tpu), 1, simulated=True)

        def compiles():
            return met.metric_data("CompileTime")[0]

        def run(cfg, eager=False):
            hooks = InProcessHooks()
            train(cfg, make_parallelism(eager=eager), hooks, HostPlace(0, 1, 0), basis)
            return [(r["step"], r["loss"]) for r in hooks.records]

        out = {{}}
        # XLA first: a CPU backward before the XLA runtime exists sizes autograd's device
        # queues without it (INTERNAL ASSERT in engine.cpp).
        out["xla"] = run(cfg)
        out["compiles"] = compiles()
        # The XLA:CPU default. A 2-step run builds every graph; 8 steps at other learning
        # rates (a new model, so dynamo traces again) must find them all in XLA's cache.
        dynamo = dataclasses.replace(cfg, compile=None)
        run(dataclasses.replace(dynamo, steps=2))
        before = compiles()
        out["compiled_graphs"] = before - out["compiles"]
        out["compiled"] = run(dynamo)
        out["compiled_new_graphs"] = compiles() - before
        out["eager"] = run(cfg, eager=True)
        # Losses fetched 3 steps at a time by async step closures (the TPU default is 10).
        out["windowed"] = run(dataclasses.replace(cfg, log_every=3))
        print(json.dumps(out))
        """
    )
    out = run_on_xla_cpu(script)
    # One process, nothing to average: the whole step is one graph, compiled once whatever
    # the step's learning rate; the end-of-run checkpoint only transfers device data.
    assert out["compiles"] == 1
    # Dynamo's forward and backward (plus its constant seed gradient), the lazy optimizer.
    assert out["compiled_graphs"] == 4
    assert out["compiled_new_graphs"] == 0
    eager = [loss for _, loss in out["eager"]]
    for path in ("xla", "compiled"):
        assert [step for step, _ in out[path]] == list(range(1, 9))
        for e, (_, x) in zip(eager, out[path], strict=True):
            assert x == pytest.approx(e, rel=2e-3)
    assert [step for step, _ in out["windowed"]] == list(range(1, 9))  # 3 + 3 + flushed 2
    assert [loss for _, loss in out["windowed"]] == pytest.approx(
        [loss for _, loss in out["xla"]], rel=1e-5
    )


@pytest.mark.slow
def test_sync_free_adamw_matches_torch_adamw_and_resumes_exactly(
    tmp_path: Path, text_dir: Path
) -> None:
    """torch_xla's sync-free AdamW (the optimizer on XLA devices) against torch's AdamW,
    also taking over torch's state mid-run (a checkpoint from the eager path), and a
    compiled XLA:CPU run resumed from its checkpoint against the same run straight through."""
    script = textwrap.dedent(
        f"""
        import json, pathlib, torch, torch_xla
        from raytpu.facts.catalog import slice_shape
        from raytpu.spec.training import ModelConfig, OptimConfig, TrainConfig
        from raytpu.workloads.metrics import MfuBasis
        from raytpu.workloads.model import ByteLM
        from raytpu.workloads.optim import (
            build_optimizer, materialize_state, optimizer_step, set_lr)
        from raytpu.workloads.trainer import HostPlace, make_parallelism, train
        from no_ray import InProcessHooks
        tiny = ModelConfig(**{TINY.__dict__!r})
        dev = torch_xla.device()
        out = {{}}
        batches = [torch.randint(0, 256, (2, 33), generator=torch.Generator().manual_seed(i))
                   for i in range(4)]
        # Which optimizer runs steps 1-2 and which 3-4 (the second loads the first's state).
        for kind, first, then in (("torch", "torch", "torch"), ("xla", "xla", "xla"),
                                  ("mixed", "torch", "xla")):
            torch.manual_seed(0)
            model = ByteLM(tiny).to(dev)

            def make(which, state=None):
                opt = build_optimizer(model, OptimConfig())
                out["picked"] = type(opt).__module__ + "." + type(opt).__name__
                if which == "torch":
                    opt = torch.optim.AdamW(opt.param_groups, foreach=True)
                if state is not None:
                    opt.load_state_dict(state)
                materialize_state(opt)
                return opt

            opt = make(first)
            for i, b in enumerate(batches):
                if i == 2 and then != first:
                    opt = make(then, opt.state_dict())
                set_lr(opt, 1e-3 * (i + 1))
                opt.zero_grad(set_to_none=True)
                model.loss(b.to(dev)).backward()
                optimizer_step(opt)
                torch_xla.sync()
            out[kind] = torch.cat([p.detach().cpu().reshape(-1) for p in model.parameters()]
                                  ).tolist()
            state = opt.state_dict()["state"][0]
            out[kind + "_state"] = sorted(state), float(state["step"])
        basis = MfuBasis.for_run(tiny, slice_shape("v4-16"), 1, simulated=True)
        base = dict(model=tiny, data={str(text_dir)!r}, batch_per_host=2, checkpoint_every=3)
        ckpt = pathlib.Path({str(tmp_path / "ckpt")!r})
        for name, steps, folder in (("straight", 7, None), ("first", 4, ckpt),
                                    ("second", 7, ckpt)):
            hooks = InProcessHooks(folder)
            train(TrainConfig(steps=steps, **base), make_parallelism(), hooks,
                  HostPlace(0, 1, 0), basis)
            out[name] = [(r["step"], r["loss"]) for r in hooks.records]
        print(json.dumps(out))
        """
    )
    out = run_on_xla_cpu(script)
    assert out["picked"] == "torch_xla.amp.syncfree.adamw.AdamW"
    # Up to float32 rounding (XLA computes the bias corrections on the device).
    assert out["xla"] == pytest.approx(out["torch"], rel=1e-4, abs=1e-5)
    assert out["mixed"] == pytest.approx(out["torch"], rel=1e-4, abs=1e-5)
    # The same moments and count; the sync-free one adds its (empty) amsgrad buffer.
    assert out["torch_state"] == [["exp_avg", "exp_avg_sq", "step"], 4.0]
    assert out["xla_state"] == out["mixed_state"] == [
        ["exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"], 4.0
    ]
    assert [s for s, _ in out["first"]] == [1, 2, 3, 4]
    assert [s for s, _ in out["second"]] == [5, 6, 7]
    resumed = [loss for _, loss in out["first"] + out["second"]]
    assert resumed == pytest.approx([loss for _, loss in out["straight"]], rel=1e-5)


@pytest.mark.slow
def test_gloo_grad_sync_keeps_hosts_identical(text_dir: Path) -> None:
    cfg = TrainConfig(steps=5, model=TINY, data=str(text_dir), batch_per_host=2,
                      checkpoint_every=100)
    results = run_processes(cfg, 2, timeout_s=300)
    assert [r.rank for r in results] == [0, 1]
    assert results[0].param_checksum == results[1].param_checksum
    # The XLA:CPU default: dynamo's forward and backward graphs (and the backward's seed
    # gradient, a constant 1), then the lazy optimizer graph after the grads crossed the host.
    assert [r.compiles for r in results] == [4, 4]
    assert [r["step"] for r in results[0].records] == [1, 2, 3, 4, 5]
    assert results[1].records == []  # only rank 0 reports
    # The reported loss is the mean over both hosts' (different) batches.
    alone = _train_eager(
        TrainConfig(steps=1, model=TINY, data=str(text_dir), batch_per_host=2), InProcessHooks()
    )
    assert results[0].records[0]["loss"] != pytest.approx(alone[0]["loss"], rel=1e-6)
