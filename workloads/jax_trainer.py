"""The JAX training loop every host runs: the torch trainer's loop, step for step.

Same data (:class:`~raytpu.workloads.data.ShardedBatches`, by step and host), the same
schedule, the same :class:`~raytpu.workloads.trainer.Hooks` (checkpoints, metrics,
rehearsal hold) and the same MFU formula; the model, its sharding and AdamW are
:mod:`raytpu.workloads.jax_model`. Each host is one JAX process; ``jax.distributed``
(initialised by Ray Train's ``JaxTrainer``, or by the caller) joins every host's devices
into one global mesh, so the gradient reductions are XLA collectives across hosts: ICI
and DCN on TPU, gloo on the CPU simulation (``JAX_CPU_COLLECTIVES_IMPLEMENTATION=gloo``).

Checkpoints are gathered to every host (``process_allgather``, a collective) and written
by the saving host as one ``.npz``: simple and enough for the CPU presets; a multi-GB
model wants per-host shards (orbax), which this trainer does not do.
"""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from raytpu.spec.presets import LlamaConfig
from raytpu.spec.training import TrainConfig

from .data import ShardedBatches
from .loop import Hooks, HostPlace, hold, record_restore, record_steps, state_bytes
from .metrics import MfuBasis, step_record
from .schedule import lr_at
from .sharding import BATCH_AXES
from .tokens import load_tokens

STATE_FILE = "state.npz"
META_FILE = "meta.json"
FRAMEWORK = "jax"


def simulation_env(devices_per_host: int) -> dict[str, str]:
    """What a simulated host's JAX needs: CPU devices standing for its chips, and gloo for
    the collectives between hosts (XLA:CPU's default has none across processes)."""
    return {
        "JAX_PLATFORMS": "cpu",
        "JAX_NUM_CPU_DEVICES": str(devices_per_host),
        "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "gloo",
    }


def write_checkpoint(directory: Path, state: dict[str, Any]) -> None:
    arrays = {f"params/{k}": v for k, v in state["params"].items()}
    arrays |= {f"{m}/{k}": v for m in ("m", "v") for k, v in state["opt"][m].items()}
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    (directory / STATE_FILE).write_bytes(buf.getvalue())
    (directory / META_FILE).write_text(json.dumps({"step": state["step"],
                                                   "framework": FRAMEWORK}))


def read_checkpoint(directory: Path) -> dict[str, Any]:
    meta = json.loads((directory / META_FILE).read_text())
    if meta.get("framework") != FRAMEWORK:
        raise RuntimeError(f"{directory} is not a JAX checkpoint (framework "
                           f"{meta.get('framework', 'torch')!r})")
    out: dict[str, Any] = {"step": int(meta["step"]), "params": {}, "opt": {"m": {}, "v": {}}}
    with np.load(directory / STATE_FILE) as z:
        for key in z.files:
            kind, name = key.split("/", 1)
            target = out["params"] if kind == "params" else out["opt"][kind]
            target[name] = z[key]
    return out


@dataclass(frozen=True)
class JaxSummary:
    first_step: int
    last_step: int
    attempt: int
    wall_s: float
    processes: int
    global_devices: int
    params: dict[str, Any] = field(repr=False)


def _local_value(x: Any) -> float:
    """A replicated scalar's value: every process holds a copy on its own devices."""
    return float(np.asarray(x.addressable_data(0)))


def _place(tree: dict[str, np.ndarray], shards: dict[str, Any]) -> dict[str, Any]:
    import jax

    def placed(name: str, value: np.ndarray) -> Any:
        return jax.make_array_from_callback(value.shape, shards[name], lambda idx: value[idx])

    return {k: placed(k, v) for k, v in tree.items()}


def train_jax(cfg: TrainConfig, hooks: Hooks, place: HostPlace, basis: MfuBasis,
              *, compute_dtype: Any = None) -> JaxSummary:
    """Train from the latest checkpoint (if any) to ``cfg.steps``; every host calls it."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from . import jax_model as jm

    t0 = time.perf_counter()
    arch = cfg.architecture()
    if not isinstance(arch, LlamaConfig):
        raise ValueError("--framework jax trains the Llama presets (--model tiny ...), not the "
                         "byte GPT")
    if compute_dtype is None:  # bf16 where the MXU has it; XLA:CPU emulates bf16 slowly
        compute_dtype = jnp.bfloat16 if jax.default_backend() == "tpu" else jnp.float32
    attempt, first_attempt = hooks.begin_attempt()
    mesh = jm.make_mesh(cfg.slices)
    shards = jm.shardings(arch, mesh, cfg.use_fsdp)
    replicated = NamedSharding(mesh, P())
    restore_t0 = time.perf_counter()
    state = hooks.restore()
    record_restore(hooks, state, attempt=attempt, started=restore_t0)
    if state is not None:
        params = _place(state["params"], shards)
        opt = {m: _place(state["opt"][m], shards) for m in ("m", "v")}
        start = int(state["step"]) + 1
    else:
        key = jax.random.PRNGKey(cfg.seed)  # same weights on every host and mesh
        params = jax.jit(lambda k: jm.init_params(arch, k), out_shardings=shards)(key)
        zeros = jax.jit(lambda p: {k: jnp.zeros_like(v) for k, v in p.items()},
                        out_shardings=shards)
        opt = {"m": zeros(params), "v": zeros(params)}
        start = 1

    def step_fn(params: Any, opt: Any, batch: Any, step: Any, lr: Any) -> Any:
        loss, grads = jax.value_and_grad(jm.loss_fn)(
            params, batch, arch, mesh=mesh if cfg.use_fsdp else None, remat=cfg.remat,
            compute_dtype=compute_dtype)
        new_params, new_opt = jm.adamw(params, grads, opt, step, lr, cfg.optim)
        return new_params, new_opt, loss

    opt_shards = {"m": shards, "v": shards}
    train_step = jax.jit(step_fn, donate_argnums=(0, 1),
                         out_shardings=(shards, opt_shards, replicated))
    batch_sharding = NamedSharding(mesh, P(BATCH_AXES, None))
    tokens = load_tokens(cfg.data, cfg.tokenizer, arch.vocab_size)
    batches = ShardedBatches(tokens, cfg.model.seq_len, cfg.batch_per_host, place.num_hosts,
                             cfg.seed)
    tokens_per_step = batches.global_batch * cfg.model.seq_len
    window: list[tuple[int, float, Any]] = []
    last = time.perf_counter()

    def flush_window() -> None:
        nonlocal window, last
        if not window:
            return
        losses = [_local_value(loss) for _, _, loss in window]  # blocks until computed
        now = time.perf_counter()
        per_step = (now - last) / len(window)
        last = now
        if place.rank == 0:
            record_steps(hooks, [s for s, _, _ in window], attempt=attempt,
                         per_step_s=per_step, first=start)
            hooks.publish([
                step_record(step=s, loss=loss, tokens=tokens_per_step, step_time_s=per_step,
                            lr=lr, attempt=attempt, basis=basis)
                for (s, lr, _), loss in zip(window, losses, strict=True)])
        window = []

    for step in range(start, cfg.steps + 1):
        local = batches.batch(step, place.data_index).astype(np.int32)
        batch = jax.make_array_from_process_local_data(batch_sharding, local)
        lr = lr_at(step, cfg.steps, cfg.optim)
        params, opt, loss = train_step(params, opt, batch, jnp.float32(step), jnp.float32(lr))
        window.append((step, lr, loss))
        if len(window) >= max(1, cfg.log_every):
            flush_window()
        if step % cfg.checkpoint_every == 0 or step == cfg.steps:
            flush_window()
            if place.rank == 0:
                hooks.flush()
            save_t0 = time.perf_counter()
            host = multihost_utils.process_allgather({"params": params, "opt": opt},
                                                     tiled=True)  # every host: a collective
            snapshot = {"step": step, **host} if place.rank == 0 else None
            hooks.save(step, snapshot, {"step": step})
            hooks.goodput("checkpoint_save", step=step, seconds=time.perf_counter() - save_t0,
                          bytes=state_bytes(snapshot), every=cfg.checkpoint_every)
        if step == cfg.fail_host_at_step and first_attempt and step < cfg.steps:
            hooks.settle()
            flush_window()
            if place.rank == 0:
                hooks.flush()
            hooks.holding(step)
            hold(cfg.hold_timeout_s)
    flush_window()
    if place.rank == 0:
        hooks.flush()
    host_params = multihost_utils.process_allgather(params, tiled=True)
    return JaxSummary(start, cfg.steps, attempt, time.perf_counter() - t0,
                      jax.process_count(), len(jax.devices()), host_params)
