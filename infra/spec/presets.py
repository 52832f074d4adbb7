"""Llama-style decoder shapes by name: ``tiny`` and ``small`` for CPU, ``1b`` to ``70b`` as
Meta published them. Plain data (no torch, no jax): the fit estimate, the FLOPs formula and
both frameworks' models read the same :class:`LlamaConfig`.

The large presets are the Llama 3 architectures (``config.json`` of
meta-llama/Llama-3.2-1B, Llama-3.2-3B, Llama-3.1-8B and Llama-3.1-70B on the Hugging Face
Hub): their parameter counts are checked against the published totals in the tests. Llama
3.1's long-context RoPE rescaling is not reproduced: it changes no shape, FLOP or byte.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

BYTE_VOCAB = 256  # the byte tokenizer: no file, nothing to download
LLAMA3_VOCAB = 128_256


@dataclass(frozen=True)
class LlamaConfig:
    """RMSNorm, rotary positions, SwiGLU MLP and grouped-query attention."""

    name: str
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    tie_embeddings: bool
    rope_theta: float = 500_000.0
    norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "ffn_dim"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{self.name}: {name} must be positive, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ValueError(f"{self.name}: d_model {self.d_model} is not a multiple of "
                             f"n_heads {self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"{self.name}: n_heads {self.n_heads} is not a multiple of "
                             f"n_kv_heads {self.n_kv_heads}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.head_dim

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


PRESETS: dict[str, LlamaConfig] = {
    p.name: p
    for p in (
        # Every width a multiple of 8, so that 8-way FSDP shards each weight evenly.
        LlamaConfig("tiny", BYTE_VOCAB, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2,
                    ffn_dim=192, tie_embeddings=True, rope_theta=10_000.0),
        LlamaConfig("small", BYTE_VOCAB, d_model=256, n_layers=4, n_heads=8, n_kv_heads=4,
                    ffn_dim=768, tie_embeddings=True, rope_theta=10_000.0),
        LlamaConfig("1b", LLAMA3_VOCAB, d_model=2048, n_layers=16, n_heads=32, n_kv_heads=8,
                    ffn_dim=8192, tie_embeddings=True),
        LlamaConfig("3b", LLAMA3_VOCAB, d_model=3072, n_layers=28, n_heads=24, n_kv_heads=8,
                    ffn_dim=8192, tie_embeddings=True),
        LlamaConfig("8b", LLAMA3_VOCAB, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8,
                    ffn_dim=14336, tie_embeddings=False),
        LlamaConfig("70b", LLAMA3_VOCAB, d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8,
                    ffn_dim=28672, tie_embeddings=False),
    )
}
BYTE_MODEL = "byte"
"""The original 2-layer byte GPT (:class:`~raytpu.spec.training.ModelConfig`), sized by
``--n-layers``/``--d-model``/``--n-heads``: the default when no ``--model`` is given."""


class UnknownPreset(ValueError):
    pass


def preset(name: str) -> LlamaConfig:
    """The named preset; :class:`UnknownPreset` lists the valid names."""
    try:
        return PRESETS[name]
    except KeyError:
        valid = ", ".join([BYTE_MODEL, *PRESETS])
        raise UnknownPreset(f"{name!r} is not a model preset; valid: {valid}") from None


def llama_from_dict(raw: dict[str, Any]) -> LlamaConfig:
    return LlamaConfig(**raw)
