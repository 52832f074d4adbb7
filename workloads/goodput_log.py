"""The goodput event log in a run folder (local or ``gs://``, through fsspec as the
checkpoints are): :class:`GoodputLog` writes one process's events, :func:`read_events`
reads every writer's. The events are :mod:`raytpu.workloads.goodput`'s."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .goodput import GoodputError, check_event

LOG_DIR = "goodput"
"""The event log's folder in the run folder: one ``<writer>-<n>.jsonl`` chunk per flush
(object stores have no append, so each flush writes a new object)."""
FLUSH_S = 5.0


def run_folder(storage_path: str, run_name: str) -> str:
    """The run's folder (its checkpoints, progress and goodput log): local or ``gs://``."""
    return f"{storage_path.rstrip('/')}/{run_name}"


@dataclass
class GoodputLog:
    """Buffers events from one process and writes them to ``<run_dir>/goodput/`` through
    fsspec: on :meth:`flush`, and on :meth:`record` once :data:`FLUSH_S` have passed."""

    run_dir: str
    writer: str
    flush_s: float = FLUSH_S
    _buffer: list[dict[str, Any]] = field(default_factory=list)
    _chunk: int = 0
    _last_flush: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, event: str, *, t: float | None = None, **fields: Any) -> None:
        item = {"event": event, "t": time.time() if t is None else t, **fields}
        check_event(item)
        with self._lock:
            self._buffer.append(item)
            due = time.monotonic() - self._last_flush >= self.flush_s
        if due:
            self.flush()

    def flush(self) -> None:
        import fsspec

        with self._lock:
            items, self._buffer = self._buffer, []
            self._last_flush = time.monotonic()
            if not items:
                return
            self._chunk += 1
            chunk = self._chunk
        fs, root = fsspec.core.url_to_fs(f"{self.run_dir.rstrip('/')}/{LOG_DIR}")
        fs.makedirs(root, exist_ok=True)
        name = f"{root}/{self.writer}-{os.getpid()}-{int(time.time() * 1000)}-{chunk:05d}.jsonl"
        with fs.open(name, "w") as f:
            f.write("".join(json.dumps(i) + "\n" for i in items))


def read_events(run_dir: str) -> list[dict[str, Any]]:
    """Every event under ``<run_dir>/goodput/`` (every writer's chunks), in time order."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(f"{run_dir.rstrip('/')}/{LOG_DIR}")
    if not fs.exists(root):
        raise GoodputError(f"{run_dir}: no {LOG_DIR}/ folder (a run recorded by this "
                           "version of raytpu has one)")
    out: list[dict[str, Any]] = []
    for name in sorted(fs.find(root)):
        if not str(name).endswith(".jsonl"):
            continue
        with fs.open(name, "r") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    out.append(json.loads(line))
                except ValueError as e:
                    raise GoodputError(f"{name}:{n}: not JSON ({e})") from e
    out.sort(key=lambda e: e.get("t", 0.0))
    return out
