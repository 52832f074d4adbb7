"""Model size, FLOPs formula, LR schedule and optimizer state (eager PyTorch, fast)."""

from __future__ import annotations

import itertools
import math

import pytest

torch = pytest.importorskip("torch")

from raytpu.spec.flops import param_count, train_flops_per_token  # noqa: E402
from raytpu.spec.training import ModelConfig, OptimConfig  # noqa: E402
from raytpu.workloads.model import ByteLM  # noqa: E402
from raytpu.workloads.optim import build_optimizer, lr_at, materialize_state  # noqa: E402


@pytest.mark.parametrize(
    "cfg",
    [
        ModelConfig(),
        ModelConfig(n_layers=3, d_model=64, n_heads=2, seq_len=32),
        ModelConfig(n_layers=1, d_model=96, n_heads=3, seq_len=200),
    ],
)
def test_param_count_matches_the_module(cfg: ModelConfig) -> None:
    assert param_count(cfg) == sum(p.numel() for p in ByteLM(cfg).parameters())


def test_default_model_size() -> None:
    assert param_count(ModelConfig()) == 445_952


def test_flops_per_token_formula() -> None:
    cfg = ModelConfig(n_layers=2, d_model=128, n_heads=4, seq_len=128)
    # Weight matmuls only: qkv, projection and the 4x MLP per layer, plus the tied LM head
    # (the position table is a lookup; biases and norms do no matmul).
    n = 2 * (3 + 1 + 8) * 128 * 128 + 256 * 128
    assert train_flops_per_token(cfg) == 6 * n + 12 * 2 * 128 * 128
    # Doubling the context only adds attention FLOPs (and the position table's none).
    longer = ModelConfig(n_layers=2, d_model=128, n_heads=4, seq_len=256)
    assert train_flops_per_token(longer) - train_flops_per_token(cfg) == 12 * 2 * 128 * 128


def test_forward_shapes_and_initial_loss() -> None:
    torch.manual_seed(0)
    cfg = ModelConfig(n_layers=1, d_model=32, n_heads=2, seq_len=16)
    model = ByteLM(cfg)
    batch = torch.randint(0, 256, (3, 17))
    assert model(batch[:, :-1]).shape == (3, 16, 256)
    # A fresh model predicts ~uniformly over 256 bytes.
    assert abs(model.loss(batch).item() - math.log(256)) < 0.2


def test_model_is_causal() -> None:
    torch.manual_seed(0)
    cfg = ModelConfig(n_layers=2, d_model=32, n_heads=2, seq_len=16)
    model = ByteLM(cfg).eval()
    x = torch.randint(0, 256, (1, 16))
    y = x.clone()
    y[0, 10] = (y[0, 10] + 1) % 256
    with torch.no_grad():
        a, b = model(x), model(y)
    torch.testing.assert_close(a[0, :10], b[0, :10])
    assert not torch.allclose(a[0, 10:], b[0, 10:])


def test_lr_schedule_warmup_then_cosine_to_floor() -> None:
    cfg = OptimConfig(lr=1e-3, warmup_steps=10, min_lr_ratio=0.1)
    lrs = [lr_at(s, 100, cfg) for s in range(1, 101)]
    assert lrs[0] == pytest.approx(1e-4)
    assert lrs[9] == pytest.approx(1e-3)  # peak at the end of warmup
    assert all(a < b for a, b in itertools.pairwise(lrs[:10]))
    assert all(a > b for a, b in itertools.pairwise(lrs[9:]))
    assert lrs[-1] == pytest.approx(1e-4)  # min_lr_ratio * lr
    assert lrs[54] == pytest.approx(1e-4 + 0.9e-3 * 0.5)  # cosine midpoint, step 55
    assert lr_at(500, 100, cfg) == pytest.approx(1e-4)  # past the end: the floor


def test_lr_without_warmup_starts_at_peak() -> None:
    assert lr_at(1, 10, OptimConfig(lr=2e-3, warmup_steps=0)) == pytest.approx(2e-3)


def test_no_weight_decay_on_biases_norms_and_positions() -> None:
    model = ByteLM(ModelConfig(n_layers=1, d_model=32, n_heads=2, seq_len=8))
    opt = build_optimizer(model, OptimConfig(weight_decay=0.1))
    decayed = {id(p) for p in opt.param_groups[0]["params"]}
    names = {n for n, p in model.named_parameters() if id(p) in decayed}
    assert "tok.weight" in names and "blocks.0.qkv.weight" in names
    assert not any(n.endswith(".bias") or "ln" in n or n.startswith("pos.") for n in names)


def test_materialized_state_trains_exactly_like_lazy_state() -> None:
    cfg = ModelConfig(n_layers=1, d_model=32, n_heads=2, seq_len=16)
    batches = [torch.randint(0, 256, (2, 17), generator=torch.Generator().manual_seed(i))
               for i in range(3)]
    results = []
    for early in (False, True):
        torch.manual_seed(0)
        model = ByteLM(cfg)
        opt = build_optimizer(model, OptimConfig())
        if early:
            materialize_state(opt)
        for b in batches:
            opt.zero_grad()
            model.loss(b).backward()
            opt.step()
        results.append(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
    torch.testing.assert_close(results[0], results[1], rtol=0, atol=0)
