"""The trainer hooks inside a Ray Train worker: Ray Train checkpoints, the driver's
metrics sink, and rank 0's attempt number broadcast to the worker group (over the gloo
group the torch backend forms; the JAX trainer overrides the broadcast and the checkpoint
format in :mod:`raytpu.workloads.jax_launch`)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import ray
import ray.train
from ray.train import Checkpoint, CheckpointConsistencyMode

from .goodput_log import GoodputLog

PUBLISH_S = 0.5  # rank 0: push step records this often


class RayHooks:
    """Trainer hooks backed by Ray Train checkpoints and the driver's metrics sink.

    Rank 0 writes the goodput events to ``run_dir`` (the run's checkpoint folder); the
    process's start and the end of its imports (``started``, ``time.time()`` values) are
    recorded once the attempt has its number.
    """

    def __init__(self, sink: Any, rank: int, run_dir: str | None = None,
                 started: tuple[float, float] | None = None) -> None:
        self._sink = sink
        self._rank = rank
        self._goodput: GoodputLog | None = None
        if run_dir is not None and rank == 0:
            self._goodput = GoodputLog(run_dir, f"host{rank}")
        self._started = started
        self._pending: list[Any] = []
        self._buffer: list[dict[str, Any]] = []
        self._last_send = 0.0
        self._attempt = 0

    def _broadcast(self, value: tuple[int, bool] | None) -> tuple[int, bool]:
        """Rank 0's value on every rank (over the gloo group the backend formed)."""
        import torch.distributed as dist

        box: list[Any] = [value]
        dist.broadcast_object_list(box, src=0)
        out: tuple[int, bool] = box[0]
        return out

    def _read(self, directory: Path) -> dict[str, Any]:
        from .trainer import read_checkpoint

        return read_checkpoint(directory)

    def _write(self, directory: Path, state: dict[str, Any]) -> None:
        from .trainer import write_checkpoint

        write_checkpoint(directory, state)

    def begin_attempt(self) -> tuple[int, bool]:
        mine = ray.get(self._sink.begin_attempt.remote()) if self._rank == 0 else None
        attempt, first = self._broadcast(mine)  # one number for the whole worker group
        self._attempt = int(attempt)
        if self._started is not None:
            began, imported = self._started
            self.goodput("group_start", t=began, attempt=self._attempt)
            self.goodput("imports_done", t=imported, attempt=self._attempt)
        return self._attempt, bool(first)

    def restore(self) -> dict[str, Any] | None:
        checkpoint = ray.train.get_checkpoint()
        if checkpoint is None:
            return None
        with checkpoint.as_directory() as d:
            return self._read(Path(d))

    def save(self, step: int, state: dict[str, Any] | None, metrics: dict[str, Any]) -> None:
        name = f"checkpoint_step{step:07d}_{time.strftime('%Y%m%d-%H%M%S')}"
        if state is None:
            ray.train.report(metrics, checkpoint_dir_name=name)
            return
        with tempfile.TemporaryDirectory(prefix="raytpu-ckpt-") as d:
            self._write(Path(d), state)
            ray.train.report(
                metrics, checkpoint=Checkpoint.from_directory(d), checkpoint_dir_name=name
            )
        self._pending.append(self._sink.checkpointed.remote(step))  # the saving rank only

    def publish(self, records: list[dict[str, Any]]) -> None:
        # Batched: one RPC per PUBLISH_S rather than per step (the sink and the driver
        # share the hosts' cores in the simulation).
        self._buffer.extend(records)
        if time.monotonic() - self._last_send >= PUBLISH_S:
            self._send()

    def _send(self) -> None:
        if self._buffer:
            self._pending.append(self._sink.push.remote(self._buffer))
            self._buffer = []
        self._last_send = time.monotonic()
        if len(self._pending) > 16:
            ray.get(self._pending[:8])
            del self._pending[:8]

    def flush(self) -> None:
        self._send()
        ray.get(self._pending)
        self._pending.clear()
        if self._goodput is not None:
            self._goodput.flush()

    def goodput(self, event: str, **fields: Any) -> None:
        if self._goodput is not None:
            self._goodput.record(event, **fields)

    def holding(self, step: int) -> None:
        if self._rank == 0:
            event = {"kind": "holding", "step": step, "attempt": self._attempt}
            ray.get(self._sink.event.remote(event))

    def settle(self) -> None:
        # The controller registers a reported checkpoint when it next polls the workers
        # (every 2 s); a worker group lost before that resumes from the one before.
        ray.train.get_all_reported_checkpoints(
            consistency_mode=CheckpointConsistencyMode.COMMITTED
        )
