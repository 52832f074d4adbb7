"""The Llama-style decoder: parameter counts (against the module and Meta's published totals),
the FLOPs formula, GQA, causality and activation checkpointing (eager PyTorch, fast)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from raytpu.spec.flops import (  # noqa: E402
    matmul_params,
    param_count,
    train_flops_per_step,
    train_flops_per_token,
)
from raytpu.spec.presets import PRESETS, UnknownPreset, preset  # noqa: E402
from raytpu.workloads.llama import Llama  # noqa: E402

# Totals of the Hugging Face checkpoints (safetensors metadata / model cards).
PUBLISHED = {"1b": 1_235_814_400, "3b": 3_212_749_824, "8b": 8_030_261_248,
             "70b": 70_553_706_496}


@pytest.mark.parametrize("name", list(PRESETS))
def test_param_count_matches_the_module(name: str) -> None:
    with torch.device("meta"):  # shapes only: the 70b module allocates nothing
        model = Llama(PRESETS[name], max_seq_len=16)
    assert param_count(PRESETS[name]) == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(("name", "total"), PUBLISHED.items())
def test_large_presets_are_the_published_llama3_shapes(name: str, total: int) -> None:
    assert param_count(preset(name)) == total


def test_unknown_preset_names_the_valid_ones() -> None:
    with pytest.raises(UnknownPreset, match=r"'9b' is not a model preset; valid: byte, tiny"):
        preset("9b")


def test_flops_formula() -> None:
    cfg = preset("8b")
    layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336
    assert matmul_params(cfg) == 32 * layer + 128_256 * 4096  # the head; the lookup does none
    assert train_flops_per_token(cfg, 8192) == 6 * matmul_params(cfg) + 12 * 32 * 4096 * 8192
    assert train_flops_per_step(cfg, 8192, 4) == train_flops_per_token(cfg, 8192) * 8192 * 4
    with pytest.raises(ValueError, match="seq_len"):
        train_flops_per_token(cfg)


def test_initial_loss_causality_and_gqa() -> None:
    torch.manual_seed(0)
    cfg = preset("tiny")
    assert cfg.n_kv_heads < cfg.n_heads  # grouped-query attention is exercised
    model = Llama(cfg, max_seq_len=32).eval()
    batch = torch.randint(0, 256, (2, 17))
    assert model(batch[:, :-1]).shape == (2, 16, 256)
    assert abs(model.loss(batch).item() - math.log(256)) < 0.2
    x = torch.randint(0, 256, (1, 16))
    y = x.clone()
    y[0, 10] = (y[0, 10] + 1) % 256
    with torch.no_grad():
        a, b = model(x), model(y)
    assert torch.allclose(a[0, :10], b[0, :10], atol=1e-6)  # the past ignores the future
    assert not torch.allclose(a[0, 10:], b[0, 10:], atol=1e-6)


def test_activation_checkpointing_gives_the_same_gradients() -> None:
    torch.manual_seed(0)
    plain = Llama(preset("tiny"), max_seq_len=32)
    remat = Llama(preset("tiny"), max_seq_len=32, remat=True)
    remat.load_state_dict(plain.state_dict())
    batch = torch.randint(0, 256, (2, 17))
    plain.loss(batch).backward()
    remat.loss(batch).backward()
    for (name, p), q in zip(plain.named_parameters(), remat.parameters(), strict=True):
        assert p.grad is not None and q.grad is not None
        assert torch.allclose(p.grad, q.grad, atol=1e-6), name


def test_a_preset_trains_in_eager_pytorch(text_dir: Path) -> None:
    from no_ray import InProcessHooks
    from raytpu.facts.catalog import slice_shape
    from raytpu.spec.training import ModelConfig, TrainConfig
    from raytpu.workloads.metrics import MfuBasis
    from raytpu.workloads.trainer import HostPlace, make_parallelism, train

    cfg = TrainConfig(steps=8, preset="tiny", model=ModelConfig(seq_len=32), batch_per_host=4,
                      data=str(text_dir), checkpoint_every=100)
    basis = MfuBasis.for_run(cfg.architecture(), slice_shape(cfg.tpu), 1, simulated=True,
                             seq_len=32)
    hooks = InProcessHooks()
    summary = train(cfg, make_parallelism(eager=True), hooks, HostPlace(0, 1, 0), basis)
    assert isinstance(summary.model, Llama)
    losses = [r["loss"] for r in hooks.records]
    assert len(losses) == 8 and losses[-1] < losses[0] - 0.5
    expected = train_flops_per_token(preset("tiny"), 32) * 4 * 32
    assert hooks.records[-1]["mfu"] == pytest.approx(
        expected / hooks.records[-1]["step_time_s"] / slice_shape(cfg.tpu).peak_bf16_flops)
