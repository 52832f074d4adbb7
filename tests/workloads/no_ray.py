"""The trainer without Ray, for the tests and the benchmark's baselines.

:class:`InProcessHooks` stands in for the launcher's Ray hooks (checkpoints in a local
folder, records in memory). :func:`run_processes` runs the same trainer on N local
processes over gloo: what the simulated slice would do with Ray taken out (the benchmark
compares the two), and a check that the gloo gradient sync keeps every host's parameters
identical. Processes are spawned (not forked: torch_xla's runtime must not be inherited)
and each gets one intra-op thread, as the simulated hosts do.

Imported as ``no_ray``: pytest puts this folder on ``sys.path``; the benchmark adds it.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raytpu.spec.training import TrainConfig
from raytpu.workloads.trainer import META_FILE, read_checkpoint, write_checkpoint

HERE = str(Path(__file__).resolve().parent)


@dataclass
class InProcessHooks:
    """Hooks without Ray: checkpoints in a local folder, records kept in memory.

    ``rank`` 0 saves and keeps records.
    """

    checkpoint_dir: Path | None = None
    rank: int = 0
    records: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    def begin_attempt(self) -> tuple[int, bool]:
        return 1, True

    def _latest(self) -> Path | None:
        if self.checkpoint_dir is None or not self.checkpoint_dir.is_dir():
            return None
        done = sorted(self.checkpoint_dir.glob("step_*/" + META_FILE))
        return done[-1].parent if done else None

    def restore(self) -> dict[str, Any] | None:
        latest = self._latest()
        return read_checkpoint(latest) if latest else None

    def save(self, step: int, state: dict[str, Any] | None, metrics: dict[str, Any]) -> None:
        if state is None or self.checkpoint_dir is None:
            return
        target = self.checkpoint_dir / f"step_{step:08d}"
        target.mkdir(parents=True, exist_ok=True)
        write_checkpoint(target, state)

    def publish(self, records: list[dict[str, Any]]) -> None:
        self.records.extend(records)

    def flush(self) -> None:
        pass

    def settle(self) -> None:
        pass  # save() wrote the checkpoint synchronously

    def holding(self, step: int) -> None:
        pass  # nothing kills an in-process run: the hold times out

    def goodput(self, event: str, **fields: Any) -> None:
        if self.rank == 0:
            self.events.append({"event": event, "t": fields.pop("t", time.time()), **fields})


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
        from raytpu.facts.catalog import slice_shape
        from raytpu.workloads.metrics import MfuBasis
        from raytpu.workloads.trainer import HostPlace, make_parallelism, train

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


def run_on_xla_cpu(script: str, devices: int = 1, timeout_s: float = 600) -> dict[str, Any]:
    """Run ``script`` in a fresh XLA:CPU interpreter (XLA's metrics and runtime are per
    process) with ``devices`` virtual devices and this module importable; returns what it
    printed last, as JSON."""
    env = dict(
        os.environ,
        PJRT_DEVICE="CPU",
        CPU_NUM_DEVICES=str(devices),
        PYTHONPATH=os.pathsep.join(filter(None, [HERE, os.environ.get("PYTHONPATH")])),
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=timeout_s)
    if proc.returncode != 0:
        raise AssertionError(f"the script failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result
