"""Closed-form size and FLOPs of :class:`~raytpu.workloads.model.ByteLM` (no torch import).

The parameter count is tested against the module, so the MFU figure the driver reports
is only as wrong as the 6N + attention approximation itself.
"""

from __future__ import annotations

from .config import ModelConfig


def param_count(cfg: ModelConfig) -> int:
    """Parameters of ``ByteLM`` (the LM head is tied to the embedding, so it adds none)."""
    d = cfg.d_model
    attention = (3 * d * d + 3 * d) + (d * d + d)  # qkv + output projection, with biases
    mlp = (4 * d * d + 4 * d) + (4 * d * d + d)
    norms = 2 * (2 * d)
    embeddings = cfg.vocab_size * d + cfg.seq_len * d
    return embeddings + cfg.n_layers * (attention + mlp + norms) + 2 * d  # + final norm


def train_flops_per_token(cfg: ModelConfig) -> float:
    """Model FLOPs per trained token: forward + backward, no recomputation.

    ``6 * N`` for the weight matmuls, where N is every parameter but the position table
    (the tied embedding counts once, for the LM head; biases and norms are a <2% over-
    count at the default size), plus ``12 * layers * d_model * seq_len`` for attention
    scores and values (the PaLM paper's appendix B formula, causal mask not discounted).
    """
    n_matmul = param_count(cfg) - cfg.seq_len * cfg.d_model
    return 6.0 * n_matmul + 12.0 * cfg.n_layers * cfg.d_model * cfg.seq_len
