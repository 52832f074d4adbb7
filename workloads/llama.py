"""A Llama-style decoder in plain ``torch.nn``: RMSNorm, rotary positions, SwiGLU MLP and
grouped-query attention, sized by a :class:`~raytpu.spec.presets.LlamaConfig`.

The same module runs in eager PyTorch, on XLA:CPU and on TPU. Weight names follow Meta's
checkpoints (``attention.wq``, ``feed_forward.w1``...), so the FSDP rules and a future
weight import can key on them. Activation checkpointing (``remat``) recomputes each layer
in the backward pass; on XLA it goes through ``torch_xla.utils.checkpoint``, whose
optimization barriers stop the compiler from merging the recomputation back into the
forward pass (which would silently undo it).
"""

from __future__ import annotations

import math
from typing import Any, cast

import torch
import torch.nn.functional as F
from raytpu.spec.presets import LlamaConfig
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalised in fp32 whatever the compute dtype, as Meta's reference does.
        xf = x.float()
        out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return out.type_as(x) * self.weight


def rope_tables(head_dim: int, seq_len: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of every (position, frequency), each ``[seq_len, head_dim]``."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` ``[batch, seq, heads, head_dim]`` (the rotate-half convention)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    c, s = cos[None, :, None, :].to(x.dtype), sin[None, :, None, :].to(x.dtype)
    return x * c + rotated * s


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.n_heads, self.n_kv, self.hd = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.wq = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.wk = nn.Linear(cfg.d_model, cfg.kv_dim, bias=False)
        self.wv = nn.Linear(cfg.d_model, cfg.kv_dim, bias=False)
        self.wo = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = apply_rope(self.wq(x).view(b, t, self.n_heads, self.hd), cos, sin)
        k = apply_rope(self.wk(x).view(b, t, self.n_kv, self.hd), cos, sin)
        v = self.wv(x).view(b, t, self.n_kv, self.hd)
        if self.n_kv != self.n_heads:  # GQA: each kv head serves n_heads / n_kv query heads
            k = k.repeat_interleave(self.n_heads // self.n_kv, dim=2)
            v = v.repeat_interleave(self.n_heads // self.n_kv, dim=2)
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        return self.wo(out.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    """SwiGLU: ``w2(silu(w1 x) * w3 x)``."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.w1 = nn.Linear(cfg.d_model, cfg.ffn_dim, bias=False)
        self.w3 = nn.Linear(cfg.d_model, cfg.ffn_dim, bias=False)
        self.w2 = nn.Linear(cfg.ffn_dim, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Layer(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attention = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.feed_forward = FeedForward(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), cos, sin)
        return h + self.feed_forward(self.ffn_norm(h))


def _checkpoint(fn: Any, *args: torch.Tensor) -> torch.Tensor:
    if args[0].device.type == "xla":
        from torch_xla.utils.checkpoint import checkpoint as xla_checkpoint

        out: torch.Tensor = xla_checkpoint(fn, *args, use_reentrant=True)  # XLA: only this
        return out
    from torch.utils.checkpoint import checkpoint

    result: torch.Tensor = checkpoint(fn, *args, use_reentrant=False)
    return result


class Llama(nn.Module):
    """Token embedding, ``n_layers`` decoder layers, final RMSNorm, LM head."""

    def __init__(self, cfg: LlamaConfig, max_seq_len: int, remat: bool = False) -> None:
        super().__init__()
        self.cfg = cfg
        self.remat = remat
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.output = None if cfg.tie_embeddings else nn.Linear(
            cfg.d_model, cfg.vocab_size, bias=False
        )
        cos, sin = rope_tables(cfg.head_dim, max_seq_len, cfg.rope_theta)
        # Not parameters and not in the checkpoint: a function of the config.
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                nn.init.ones_(p)
            elif name.endswith(("wo.weight", "w2.weight")):
                # GPT-2's scaled init of the residual projections keeps early losses stable.
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * self.cfg.n_layers))
            else:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """``tokens`` [batch, seq] int64 -> logits [batch, seq, vocab]."""
        t = tokens.shape[1]
        cos = cast(torch.Tensor, self.rope_cos)[:t]
        sin = cast(torch.Tensor, self.rope_sin)[:t]
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = _checkpoint(layer, x, cos, sin) if self.remat and self.training else layer(
                x, cos, sin
            )
        x = self.norm(x)
        head = self.tok_embeddings.weight if self.output is None else self.output.weight
        return x @ head.t()

    def loss(self, batch: torch.Tensor) -> torch.Tensor:
        """Next-token cross-entropy of a [batch, seq+1] window."""
        inputs, targets = batch[:, :-1], batch[:, 1:]
        logits = self(inputs)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))
