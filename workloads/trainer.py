"""The training loop every host runs, independent of how it was launched.

The launcher (Ray) or a test/benchmark supplies :class:`Hooks` for what differs:
numbering attempts, restoring and saving checkpoints, publishing step metrics. The
:class:`~raytpu.workloads.parallel.Parallelism` supplies the device and the gradient
sync. One step is: batch to device, forward, backward, grad sync, clip, AdamW,
``torch_xla.sync()`` once. On TPU no value leaves the device in the hot loop: losses are
fetched every ``log_every`` steps by an asynchronous step closure.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from raytpu.spec.presets import LlamaConfig
from raytpu.spec.training import TrainConfig

from .data import ShardedBatches
from .llama import Llama
from .loop import Hooks, HostPlace, hold, record_restore, record_steps, state_bytes
from .metrics import MfuBasis, step_record
from .model import ByteLM
from .optim import build_optimizer, lr_at, materialize_state, optimizer_step, set_lr
from .parallel import Parallelism
from .tokens import load_tokens

STATE_FILE = "state.pt"
META_FILE = "meta.json"


def write_checkpoint(directory: Path, state: dict[str, Any]) -> None:
    torch.save(state, directory / STATE_FILE)
    (directory / META_FILE).write_text(json.dumps({"step": state["step"]}))


def read_checkpoint(directory: Path) -> dict[str, Any]:
    state: dict[str, Any] = torch.load(directory / STATE_FILE, map_location="cpu")
    return state


def _to_cpu(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_to_cpu(v) for v in obj]
    return obj


class StepLogger:
    """Turns per-step losses into records without stalling the device.

    A loss that is already a float (the CPU gloo path has it on the host) is recorded at
    once. A device tensor is buffered; every ``log_every`` steps the buffer is stacked and
    read by an asynchronous ``xm.add_step_closure`` after the step's graph has run, and
    the window's wall time is split evenly over its steps. Every host builds the same
    stack op (an SPMD program must be identical on all hosts); only ``report`` publishes.
    """

    def __init__(
        self,
        hooks: Hooks,
        *,
        report: bool,
        attempt: int,
        tokens_per_step: int,
        basis: MfuBasis,
        log_every: int,
        first_step: int | None = None,
    ) -> None:
        self._hooks = hooks
        self._first = first_step
        self._report = report
        self._attempt = attempt
        self._tokens = tokens_per_step
        self._basis = basis
        self._log_every = max(1, log_every)
        self._last = time.perf_counter()
        self._window: list[tuple[int, float, torch.Tensor]] = []
        self._outstanding = 0  # async closures not yet run
        self._done = threading.Condition()

    def _emit(self, steps: list[tuple[int, float]], losses: list[float]) -> None:
        now = time.perf_counter()
        per_step = (now - self._last) / len(steps)
        self._last = now
        if not self._report:
            return
        record_steps(self._hooks, [s for s, _ in steps], attempt=self._attempt,
                     per_step_s=per_step, first=self._first)
        records = [
            step_record(
                step=s, loss=loss, tokens=self._tokens, step_time_s=per_step, lr=lr,
                attempt=self._attempt, basis=self._basis,
            )
            for (s, lr), loss in zip(steps, losses, strict=True)
        ]
        self._hooks.publish(records)

    def step_done(self, step: int, lr: float, loss: float | torch.Tensor) -> None:
        """Call before the step's ``mark_step`` so a closure rides on that execution."""
        if isinstance(loss, float):
            self._emit([(step, lr)], [loss])
            return
        self._window.append((step, lr, loss.detach()))
        if len(self._window) >= self._log_every:
            self._schedule()

    def _schedule(self) -> None:
        import torch_xla.core.xla_model as xm

        window, self._window = self._window, []
        stacked = torch.stack([t for _, _, t in window])

        def fetch(values: torch.Tensor) -> None:
            try:
                self._emit([(s, lr) for s, lr, _ in window], values.cpu().tolist())
            finally:
                with self._done:
                    self._outstanding -= 1
                    self._done.notify_all()

        with self._done:
            self._outstanding += 1
        xm.add_step_closure(fetch, args=(stacked,), run_async=True)

    def flush(self, par: Parallelism) -> None:
        """Record any buffered losses now (end of run, or before a rehearsed host kill)."""
        if self._window:
            self._schedule()
            par.mark_step()
        par.wait()
        with self._done:
            if not self._done.wait_for(lambda: self._outstanding == 0, timeout=300):
                raise RuntimeError("step closures did not finish within 300 s")
        if self._report:
            self._hooks.flush()


@dataclass(frozen=True)
class TrainSummary:
    first_step: int
    last_step: int
    attempt: int
    wall_s: float
    model: torch.nn.Module = field(repr=False)
    optimizer: torch.optim.Optimizer | None = field(default=None, repr=False)


def train(
    cfg: TrainConfig,
    par: Parallelism,
    hooks: Hooks,
    place: HostPlace,
    basis: MfuBasis,
) -> TrainSummary:
    """Train from the latest checkpoint (if any) to ``cfg.steps``."""
    t0 = time.perf_counter()
    attempt, first_attempt = hooks.begin_attempt()
    torch.manual_seed(cfg.seed)  # same initial weights on every host
    model = build_model(cfg)
    restore_t0 = time.perf_counter()
    state = hooks.restore()
    record_restore(hooks, state, attempt=attempt, started=restore_t0)
    start = 1
    if state is not None:
        model.load_state_dict(state["model"])
        start = int(state["step"]) + 1
    model.to(par.device)
    par.shard_model(model)
    optimizer = build_optimizer(model, cfg.optim)
    if state is not None:
        optimizer.load_state_dict(state["optim"])  # moves the moments to the device
    materialize_state(optimizer)
    par.shard_optimizer(optimizer)
    params = list(model.parameters())
    loss_fn = model.loss
    if use_compile(cfg, par):
        loss_fn = torch.compile(model.loss, backend="openxla")

    corpus = load_tokens(cfg.data, cfg.tokenizer, cfg.architecture().vocab_size)
    batches = ShardedBatches(
        corpus, cfg.model.seq_len, cfg.batch_per_host, place.num_hosts, cfg.seed
    )
    logger = StepLogger(
        hooks,
        report=place.rank == 0,
        attempt=attempt,
        tokens_per_step=batches.global_batch * cfg.model.seq_len,
        basis=basis,
        log_every=cfg.log_every,
        first_step=start,
    )
    for step in range(start, cfg.steps + 1):
        batch = par.to_device(batches.batch(step, place.data_index))
        lr = lr_at(step, cfg.steps, cfg.optim)
        set_lr(optimizer, lr)
        optimizer.zero_grad(set_to_none=True)
        with par.autocast():
            loss = loss_fn(batch)
        loss.backward()
        host_loss = par.sync_grads(params, loss)
        torch.nn.utils.clip_grad_norm_(params, cfg.optim.grad_clip)
        optimizer_step(optimizer)
        logger.step_done(step, lr, host_loss if host_loss is not None else loss)
        par.mark_step()
        if step == start and (loads := compile_cache_loads()) is not None:
            print(f"XLA compile cache after the first step: {loads}", flush=True)

        if step % cfg.checkpoint_every == 0 or step == cfg.steps:
            logger.flush(par)
            save_t0 = time.perf_counter()
            snapshot = None
            # Sharded weights are gathered by a program every host must run.
            if place.rank == 0 or par.sharded:
                snapshot = {
                    "step": step,
                    "model": _to_cpu(model.state_dict()),
                    "optim": _to_cpu(optimizer.state_dict()),
                }
            hooks.save(step, snapshot if place.rank == 0 else None, {"step": step})
            hooks.goodput("checkpoint_save", step=step, seconds=time.perf_counter() - save_t0,
                          bytes=state_bytes(snapshot), every=cfg.checkpoint_every)
        if step == cfg.fail_host_at_step and first_attempt and step < cfg.steps:
            # The rehearsed preemption strikes after step K with every checkpoint so far
            # registered, so which steps get retrained does not depend on timing.
            hooks.settle()
            logger.flush(par)
            hooks.holding(step)
            hold(cfg.hold_timeout_s)
    logger.flush(par)
    return TrainSummary(start, cfg.steps, attempt, time.perf_counter() - t0, model, optimizer)


def train_host(cfg: TrainConfig, rank: int, world: int, hooks: Hooks) -> TrainSummary:
    """One host's part of a run whose ``world`` hosts already share a gloo group: check the
    slice's TPU environment, order the data shards, then :func:`train`."""
    import torch.distributed as dist

    from .parallel import SpmdDataParallel
    from .tpu_env import TpuEnvError, check_host_indices, host_identity

    shape = cfg.shape()
    real_tpu = os.environ.get("PJRT_DEVICE", "").upper() == "TPU"
    ident = host_identity(os.environ, shape, real_tpu=real_tpu, num_slices=cfg.slices)
    if world != ident.num_hosts:
        raise TpuEnvError(f"{world} Ray workers for {ident.num_hosts} TPU hosts")
    par = make_parallelism(cfg.slices, fsdp=cfg.use_fsdp)
    data_index = ident.data_index
    if isinstance(par, SpmdDataParallel):
        import torch_xla.runtime as xr

        # The runtime's process index orders the global batch's shards: use it, not Ray's.
        if xr.process_count() != ident.num_hosts:
            raise TpuEnvError(
                f"the TPU runtime sees {xr.process_count()} processes, the slice has "
                f"{ident.num_hosts} hosts: check TPU_WORKER_HOSTNAMES"
            )
        data_index = xr.process_index()
    indices: list[Any] = [None] * world
    dist.all_gather_object(indices, data_index)
    check_host_indices(indices)
    basis = MfuBasis.for_run(cfg.architecture(), shape, cfg.slices, simulated=not real_tpu,
                             seq_len=cfg.model.seq_len, processes=world,
                             global_devices=par.global_devices)
    place = HostPlace(data_index=data_index, num_hosts=ident.num_hosts, rank=rank)
    return train(cfg, par, hooks, place, basis)


def build_model(cfg: TrainConfig) -> ByteLM | Llama:
    """The byte GPT, or the Llama-style decoder of ``cfg.preset``."""
    arch = cfg.architecture()
    if isinstance(arch, LlamaConfig):
        return Llama(arch, max_seq_len=cfg.model.seq_len, remat=cfg.remat)
    return ByteLM(arch)


def use_compile(cfg: TrainConfig, par: Parallelism) -> bool:
    """Whether the forward/backward runs through ``torch.compile(backend="openxla")``."""
    if par.name == "eager-cpu":
        return False
    return par.compile_by_default if cfg.compile is None else cfg.compile


def make_parallelism(num_slices: int = 1, eager: bool = False, fsdp: bool = False) -> Parallelism:
    """The strategy for this process's platform (``PJRT_DEVICE``); ``fsdp`` shards the
    model on TPU (the CPU simulation's one device per host has nothing to shard over)."""
    if eager:
        from .parallel import EagerCpu

        return EagerCpu()
    device = os.environ.get("PJRT_DEVICE", "CPU").upper()
    if device not in ("TPU", "CPU"):
        raise RuntimeError(f"PJRT_DEVICE={device!r}: this trainer runs on TPU or CPU")
    init_compile_cache()
    if device == "TPU":
        from .parallel import SpmdDataParallel

        return SpmdDataParallel(num_slices, fsdp=fsdp)
    from .parallel import HostGlooSync

    return HostGlooSync()


XLA_CACHE_ENV = "RAYTPU_XLA_CACHE"


def init_compile_cache() -> Path | None:
    """torch_xla's persistent compilation cache in ``$RAYTPU_XLA_CACHE/<host>``, if set.

    Before any XLA tensor exists. One folder per host: the cache writes entries in place,
    so hosts sharing a mount (the simulation's disk, a bucket mounted on every pod) must
    not write the same file. torch_xla 2.9 writes entries but cannot load them on CPU or
    TPU (pytorch/xla#9094, fix in PR #9759): the metrics then count
    ``PersistentCacheDeserializeFailure``, and the program compiles as without a cache.
    """
    root = os.environ.get(XLA_CACHE_ENV)
    if not root:
        return None
    import torch_xla.runtime as xr

    host = f"{os.environ.get('TPU_NAME', 'local')}-w{os.environ.get('TPU_WORKER_ID', '0')}"
    folder = Path(root) / host
    xr.initialize_cache(str(folder), readonly=False)
    return folder


def compile_cache_loads() -> dict[str, int] | None:
    """This process's persistent-cache lookups so far (None with the cache off): ``Hit``
    (loaded), ``Miss`` (compiled and stored), ``DeserializeFailure`` (could not load,
    compiled again). Compilation is synchronous in ``sync()``, so after a step's
    ``mark_step`` its graphs are counted."""
    if not os.environ.get(XLA_CACHE_ENV):
        return None
    import torch_xla.debug.metrics as met

    return {
        kind: int(met.counter_value(f"PersistentCache{kind}") or 0)
        for kind in ("Hit", "Miss", "DeserializeFailure")
    }

