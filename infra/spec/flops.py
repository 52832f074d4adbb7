"""Closed-form size and training FLOPs of both model families (no torch import).

One formula, used by the trainers' MFU, the fit estimate and the benchmark:

    FLOPs per trained token = 6 * N_matmul + 12 * n_layers * d_model * seq_len

``6 * N_matmul``: forward (2) + backward (4) multiply-adds of every weight matmul, where
N_matmul counts the attention and MLP weights of every layer plus the LM head once (tied or
not: the input embedding is a lookup, and so is the byte GPT's position table); norms and
biases do no matmul. ``12 * L * d * seq``: attention's scores and values, QK^T and AV, 2
FLOPs per multiply-add each, forward + backward (the PaLM paper's appendix B; causal
masking not discounted, activation recomputation not counted, as MFU's definition asks).
The parameter counts are tested against the modules, so MFU is only as wrong as this
approximation.
"""

from __future__ import annotations

from typing import TypeAlias

from .presets import LlamaConfig
from .training import ModelConfig

# Declared an alias: mypy took the bare union for a variable here (`mypy -p raytpu` failed).
AnyModel: TypeAlias = ModelConfig | LlamaConfig


def _byte_param_count(cfg: ModelConfig) -> int:
    d = cfg.d_model
    attention = (3 * d * d + 3 * d) + (d * d + d)  # qkv + output projection, with biases
    mlp = (4 * d * d + 4 * d) + (4 * d * d + d)
    norms = 2 * (2 * d)
    embeddings = cfg.vocab_size * d + cfg.seq_len * d
    return embeddings + cfg.n_layers * (attention + mlp + norms) + 2 * d  # + final norm


def llama_layer_matmul_params(cfg: LlamaConfig) -> int:
    """Weights of one decoder layer's matmuls: q, k, v, o and the SwiGLU gate, up, down."""
    d = cfg.d_model
    return 2 * d * d + 2 * d * cfg.kv_dim + 3 * d * cfg.ffn_dim


def _llama_param_count(cfg: LlamaConfig) -> int:
    d = cfg.d_model
    embeddings = cfg.vocab_size * d * (1 if cfg.tie_embeddings else 2)
    return embeddings + cfg.n_layers * (llama_layer_matmul_params(cfg) + 2 * d) + d


def param_count(cfg: AnyModel) -> int:
    """Every parameter of the module (a tied LM head adds none)."""
    if isinstance(cfg, LlamaConfig):
        return _llama_param_count(cfg)
    return _byte_param_count(cfg)


def matmul_params(cfg: AnyModel) -> int:
    """N_matmul of the module docstring's formula."""
    d = cfg.d_model
    if isinstance(cfg, LlamaConfig):
        return cfg.n_layers * llama_layer_matmul_params(cfg) + cfg.vocab_size * d
    per_layer = 3 * d * d + d * d + 8 * d * d
    return cfg.n_layers * per_layer + cfg.vocab_size * d


def train_flops_per_token(cfg: AnyModel, seq_len: int | None = None) -> float:
    """Model FLOPs per trained token (forward + backward), the module docstring's formula.

    ``seq_len``: the training context (the byte GPT's own ``seq_len`` when omitted)."""
    if seq_len is None:
        if isinstance(cfg, LlamaConfig):
            raise ValueError("a Llama preset's FLOPs need the training seq_len")
        seq_len = cfg.seq_len
    return 6.0 * matmul_params(cfg) + 12.0 * cfg.n_layers * cfg.d_model * seq_len


def train_flops_per_step(cfg: AnyModel, seq_len: int, global_batch: int) -> float:
    """FLOPs of one optimizer step over ``global_batch`` sequences of ``seq_len`` tokens."""
    return train_flops_per_token(cfg, seq_len) * seq_len * global_batch
