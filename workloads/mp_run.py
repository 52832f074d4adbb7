"""The same trainer on N local processes over gloo, without Ray.

The launcher's baseline: what the simulated slice would do with Ray taken out (the
benchmark compares the two), and a check that the gloo gradient sync keeps every host's
parameters identical. Processes are spawned (not forked: torch_xla's runtime must not
be inherited) and each gets one intra-op thread, as the simulated hosts do.
"""

from __future__ import annotations

import os
import queue
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import TrainConfig


@dataclass(frozen=True)
class RankResult:
    rank: int
    records: list[dict[str, Any]]
    param_checksum: float
    wall_s: float
    compiles: int
    """XLA graphs compiled by this process (0 for eager)."""


def _worker(
    rank: int,
    world: int,
    port: int,
    cfg_dict: dict[str, Any],
    eager: bool,
    checkpoint_dir: str | None,
    out: Any,
) -> None:
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    try:
        import torch
        import torch.distributed as dist
        from raytpu.catalog import slice_shape

        from .metrics import MfuBasis
        from .trainer import HostPlace, InProcessHooks, make_parallelism, train

        torch.set_num_threads(1)
        cfg = TrainConfig.from_dict(cfg_dict)
        if world > 1:
            dist.init_process_group(
                "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
            )
        par = make_parallelism(eager=eager)
        hooks = InProcessHooks(Path(checkpoint_dir) if checkpoint_dir else None, rank)
        basis = MfuBasis.for_run(cfg.model, slice_shape(cfg.tpu), cfg.slices, simulated=True)
        summary = train(cfg, par, hooks, HostPlace(rank, world, rank), basis)
        compiles = 0
        if not eager:
            import torch_xla.debug.metrics as met

            compiles = int(met.metric_data("CompileTime")[0])  # before the checksum's graphs
        checksum = sum(float(p.detach().cpu().double().sum()) for p in summary.model.parameters())
        out.put(("ok", RankResult(rank, hooks.records, checksum, summary.wall_s, compiles)))
    except BaseException as e:
        out.put(("error", f"rank {rank}: {type(e).__name__}: {e}"))
        raise


def run_processes(
    cfg: TrainConfig,
    world: int,
    *,
    eager: bool = False,
    checkpoint_dir: Path | None = None,
    timeout_s: float = 900.0,
) -> list[RankResult]:
    """Train ``cfg`` on ``world`` spawned processes; returns each rank's result."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # One intra-op thread per process for torch and XLA:CPU, inherited by the spawned
    # interpreters, as the simulated hosts run (local_cluster).
    threads = {"OMP_NUM_THREADS": "1", "NPROC": "1"}
    env_before = {k: os.environ.get(k) for k in threads}
    os.environ.update(threads)
    try:
        procs = [
            ctx.Process(
                target=_worker,
                args=(r, world, port, cfg.to_dict(), eager,
                      str(checkpoint_dir) if checkpoint_dir else None, out),
                daemon=True,
            )
            for r in range(world)
        ]
        for p in procs:
            p.start()
    finally:
        for key, value in env_before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    results: list[RankResult] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(results) < world:
            try:
                kind, payload = out.get(timeout=1.0)
            except queue.Empty:
                dead = [p for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    raise RuntimeError(f"worker exited with {dead[0].exitcode}") from None
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no result after {timeout_s:.0f}s") from None
                continue
            if kind == "error":
                raise RuntimeError(payload)
            results.append(payload)
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    return sorted(results, key=lambda r: r.rank)
