"""The same Llama-style decoder in plain JAX, sharded with ``jax.sharding``; and AdamW.

One :class:`~raytpu.spec.presets.LlamaConfig` sizes both frameworks' models; the
parameter count is the same closed form (tested). Parameters are a dict of arrays with
the layers stacked on a leading axis (one ``lax.scan`` over them: the compile time does
not grow with depth). Sharding follows the torch trainer's rule
(:func:`raytpu.workloads.fsdp.partition_spec`): each weight's largest dimension over the
mesh's ``fsdp`` axis, the batch over ``(data, fsdp)``; XLA's partitioner inserts the
all-gathers and reduce-scatters, across processes too (``jax.distributed``).

Master weights and AdamW's moments are fp32; the matmuls run in ``compute_dtype`` (bf16
on TPU). No flax or optax: AdamW is the dozen lines below, the same update as torch's
(decoupled weight decay, bias correction, global-norm clipping).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from raytpu.spec.presets import LlamaConfig
from raytpu.spec.training import OptimConfig

from .sharding import BATCH_AXES, FSDP, partition_spec

Params = dict[str, Any]


def param_shapes(cfg: LlamaConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter's shape; ``layers.*`` carry the layer axis first. ``x @ W`` layout."""
    d, kv, f, n = cfg.d_model, cfg.kv_dim, cfg.ffn_dim, cfg.n_layers
    shapes = {
        "tok_embeddings": (cfg.vocab_size, d),
        "layers.attention_norm": (n, d), "layers.ffn_norm": (n, d),
        "layers.wq": (n, d, d), "layers.wk": (n, d, kv), "layers.wv": (n, d, kv),
        "layers.wo": (n, d, d),
        "layers.w1": (n, d, f), "layers.w3": (n, d, f), "layers.w2": (n, f, d),
        "norm": (d,),
    }
    if not cfg.tie_embeddings:
        shapes["output"] = (d, cfg.vocab_size)
    return shapes


def param_specs(cfg: LlamaConfig, fsdp_size: int) -> dict[str, P]:
    """The FSDP spec of each parameter (the layer axis itself is never split)."""
    specs = {}
    for name, shape in param_shapes(cfg).items():
        if name.startswith("layers."):
            specs[name] = P(None, *partition_spec(shape[1:], fsdp_size))
        else:
            specs[name] = P(*partition_spec(shape, fsdp_size))
    return specs


def init_params(cfg: LlamaConfig, key: jax.Array) -> Params:
    """Normal(0.02) weights, the residual projections scaled by 1/sqrt(2 layers), unit norms
    (the torch model's initialisation; the random draws differ)."""
    out: Params = {}
    shapes = param_shapes(cfg)
    keys = jax.random.split(key, len(shapes))
    for k, (name, shape) in zip(keys, shapes.items(), strict=True):
        if name.endswith("norm"):
            out[name] = jnp.ones(shape, jnp.float32)
            continue
        std = 0.02 / math.sqrt(2 * cfg.n_layers) if name.endswith(("wo", "w2")) else 0.02
        out[name] = std * jax.random.normal(k, shape, jnp.float32)
    return out


def _rms_norm(x: jax.Array, weight: jax.Array, eps: float) -> jax.Array:
    xf = x.astype(jnp.float32)
    out = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    return out.astype(x.dtype) * weight.astype(x.dtype)


def _rope(x: jax.Array, theta: float) -> jax.Array:
    """Rotate ``x`` [batch, seq, heads, head_dim] (rotate-half, as the torch model)."""
    t, hd = x.shape[1], x.shape[3]
    inv = 1.0 / theta ** (jnp.arange(0, hd, 2, dtype=jnp.float32) / hd)
    angles = jnp.outer(jnp.arange(t, dtype=jnp.float32), inv)
    angles = jnp.concatenate([angles, angles], axis=-1)
    cos, sin = jnp.cos(angles)[None, :, None, :], jnp.sin(angles)[None, :, None, :]
    half = hd // 2
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos.astype(x.dtype) + rotated * sin.astype(x.dtype)


def forward(
    params: Params, tokens: jax.Array, cfg: LlamaConfig, *, mesh: Mesh | None = None,
    remat: bool = False, compute_dtype: Any = jnp.bfloat16,
) -> jax.Array:
    """``tokens`` [batch, seq] -> fp32 logits [batch, seq, vocab]."""
    b, t = tokens.shape
    h_, kv_, hd = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    batch_sharding = NamedSharding(mesh, P(BATCH_AXES, None, None)) if mesh else None
    x = params["tok_embeddings"].astype(compute_dtype)[tokens]
    mask = jnp.tril(jnp.ones((t, t), dtype=bool))

    def layer(x: jax.Array, p: Params) -> tuple[jax.Array, None]:
        w = {k: v.astype(compute_dtype) for k, v in p.items()}
        h = _rms_norm(x, w["attention_norm"], cfg.norm_eps)
        q = _rope((h @ w["wq"]).reshape(b, t, h_, hd), cfg.rope_theta)
        k = _rope((h @ w["wk"]).reshape(b, t, kv_, hd), cfg.rope_theta)
        v = (h @ w["wv"]).reshape(b, t, kv_, hd)
        k, v = jnp.repeat(k, h_ // kv_, axis=2), jnp.repeat(v, h_ // kv_, axis=2)
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / math.sqrt(hd)
        probs = jax.nn.softmax(jnp.where(mask, scores, -jnp.inf), axis=-1)
        att = jnp.einsum("bhqk,bkhd->bqhd", probs.astype(compute_dtype), v)
        x = x + att.reshape(b, t, h_ * hd) @ w["wo"]
        h = _rms_norm(x, w["ffn_norm"], cfg.norm_eps)
        x = x + (jax.nn.silu(h @ w["w1"]) * (h @ w["w3"])) @ w["w2"]
        if batch_sharding is not None:  # FSDP: keep activations split over the batch
            x = jax.lax.with_sharding_constraint(x, batch_sharding)
        return x, None

    step = jax.checkpoint(layer) if remat else layer
    layers = {k.removeprefix("layers."): v for k, v in params.items() if k.startswith("layers.")}
    x, _ = jax.lax.scan(step, x, layers)
    x = _rms_norm(x, params["norm"], cfg.norm_eps)
    head = params["tok_embeddings"].T if cfg.tie_embeddings else params["output"]
    return (x @ head.astype(compute_dtype)).astype(jnp.float32)


def loss_fn(params: Params, batch: jax.Array, cfg: LlamaConfig, **kw: Any) -> jax.Array:
    """Next-token cross-entropy of a [batch, seq+1] window (mean over tokens)."""
    logits = forward(params, batch[:, :-1], cfg, **kw)
    logp = jax.nn.log_softmax(logits, axis=-1)
    picked = jnp.take_along_axis(logp, batch[:, 1:, None], axis=-1)
    return -jnp.mean(picked)


def decays(name: str) -> bool:
    """Weight decay on the matrices, not on the norms (the torch trainer's rule)."""
    return not name.endswith("norm")


def adamw(
    params: Params, grads: Params, opt: dict[str, Params], step: jax.Array, lr: jax.Array,
    cfg: OptimConfig,
) -> tuple[Params, dict[str, Params]]:
    """One clipped AdamW step (torch.optim.AdamW's update); ``step`` is 1-based."""
    norm = jnp.sqrt(sum(jnp.sum(g * g) for g in grads.values()))
    scale = jnp.minimum(1.0, cfg.grad_clip / (norm + 1e-6))
    new_p, new_m, new_v = {}, {}, {}
    c1 = 1 - cfg.beta1 ** step
    c2 = 1 - cfg.beta2 ** step
    for name, p in params.items():
        g = grads[name] * scale
        m = cfg.beta1 * opt["m"][name] + (1 - cfg.beta1) * g
        v = cfg.beta2 * opt["v"][name] + (1 - cfg.beta2) * g * g
        if decays(name):
            p = p * (1 - lr * cfg.weight_decay)
        new_p[name] = p - lr * (m / c1) / (jnp.sqrt(v / c2) + 1e-8)
        new_m[name], new_v[name] = m, v
    return new_p, {"m": new_m, "v": new_v}


def make_mesh(num_slices: int = 1) -> Mesh:
    """``(data, fsdp)`` over every device of every process: slices x chips per slice."""
    devices = jax.devices()
    if len(devices) % num_slices:
        raise RuntimeError(f"{len(devices)} devices do not split into {num_slices} slices")
    per_slice = len(devices) // num_slices
    if num_slices > 1:
        from jax.experimental import mesh_utils

        grid = mesh_utils.create_hybrid_device_mesh((1, per_slice), (num_slices, 1), devices)
    else:
        grid = np.array(devices).reshape(1, per_slice)
    return Mesh(grid, ("data", FSDP))


def shardings(cfg: LlamaConfig, mesh: Mesh, fsdp: bool) -> dict[str, NamedSharding]:
    size = int(mesh.shape[FSDP]) if fsdp else 1
    return {k: NamedSharding(mesh, spec) for k, spec in param_specs(cfg, size).items()}
