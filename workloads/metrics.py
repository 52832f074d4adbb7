"""Per-step metrics: MFU arithmetic, the collector the hosts push to, and the driver's output.

Flow: the rank-0 host pushes one record per step to a :class:`MetricsSink` (a Ray actor
on the driver's node, so it survives the loss of any TPU host); the driver drains it,
writes JSON lines and draws a progress bar. The sink numbers the attempts and marks
steps that an earlier attempt (or an earlier run on the same checkpoints) already did
as ``retrained``. Nothing here imports torch or ray.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from raytpu.facts.catalog import SliceShape
from raytpu.facts.ray_metrics import (
    CHECKPOINT_STEP,
    RESTARTS,
    TAG_KEYS,
    TRAINER_METRICS,
)
from raytpu.spec.flops import AnyModel, train_flops_per_token

REQUIRED_FIELDS = ("step", "loss", "tokens_per_s", "step_time_s", "mfu", "attempt", "retrained",
                   "framework", "processes", "global_devices")




class Exporter(Protocol):
    """Where the sink forwards what it learns (Ray's metrics, or nothing)."""

    def steps(self, records: list[dict[str, Any]]) -> None: ...
    def checkpoint(self, step: int) -> None: ...
    def restart(self) -> None: ...


class RayMetricsExporter:
    """The trainer's metrics as ``ray.util.metrics`` Gauges and a Counter.

    Runs in the process that holds the :class:`MetricsSink` (an actor on the driver's
    node); Ray serves the values on that node's metrics port (8080 under KubeRay), which
    the stack's PodMonitoring scrapes. ``metrics`` is the ``ray.util.metrics`` module (a
    stand-in in tests).
    """

    def __init__(self, tags: dict[str, str], metrics: Any = None) -> None:
        if metrics is None:
            import ray.util.metrics as ray_metrics

            metrics = ray_metrics
        missing = set(TAG_KEYS) - set(tags)
        if missing:
            raise ValueError(f"RayMetricsExporter: tags {sorted(missing)} are required")
        self._metrics: dict[str, Any] = {}
        for spec in TRAINER_METRICS:
            cls = metrics.Gauge if spec.kind == "gauge" else metrics.Counter
            metric = cls(spec.name, description=spec.description, tag_keys=TAG_KEYS)
            metric.set_default_tags({k: str(tags[k]) for k in TAG_KEYS})
            self._metrics[spec.name] = metric

    def steps(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        last = max(records, key=lambda r: r["step"])  # gauges hold the latest value
        for spec in TRAINER_METRICS:
            if spec.record_field is not None:
                self._metrics[spec.name].set(float(last[spec.record_field]))

    def checkpoint(self, step: int) -> None:
        self._metrics[CHECKPOINT_STEP.name].set(float(step))

    def restart(self) -> None:
        self._metrics[RESTARTS.name].inc(1.0)


@dataclass(frozen=True)
class MfuBasis:
    """What MFU is measured against (every chip of every slice at peak bf16), and what ran:
    the framework, its processes (hosts) and the devices of its global mesh."""

    flops_per_token: float
    peak_flops: float
    simulated: bool
    framework: str = "torch"
    processes: int = 1
    global_devices: int = 1

    @classmethod
    def for_run(
        cls, model: AnyModel, shape: SliceShape, slices: int, simulated: bool,
        seq_len: int | None = None, *, framework: str = "torch", processes: int = 1,
        global_devices: int = 1,
    ) -> MfuBasis:
        """``raytpu.spec.flops``' formula against the catalog's peak of every chip."""
        return cls(
            flops_per_token=train_flops_per_token(model, seq_len),
            peak_flops=shape.peak_bf16_flops * slices,
            simulated=simulated,
            framework=framework,
            processes=processes,
            global_devices=global_devices,
        )

    def mfu(self, tokens_per_s: float) -> float:
        return self.flops_per_token * tokens_per_s / self.peak_flops


def step_record(
    *,
    step: int,
    loss: float,
    tokens: int,
    step_time_s: float,
    lr: float,
    attempt: int,
    basis: MfuBasis,
) -> dict[str, Any]:
    """One step's metrics as plain data (what goes over Ray and into the JSON file)."""
    tokens_per_s = tokens / step_time_s if step_time_s > 0 else 0.0
    return {
        "step": step,
        "loss": loss,
        "tokens": tokens,
        "tokens_per_s": tokens_per_s,
        "step_time_s": step_time_s,
        "mfu": basis.mfu(tokens_per_s),
        # MFU of a CPU simulation is against the *simulated* slice's TPU peak: tiny.
        "mfu_peak_flops": basis.peak_flops,
        "simulated": basis.simulated,
        "framework": basis.framework,
        "processes": basis.processes,
        "global_devices": basis.global_devices,
        "lr": lr,
        "attempt": attempt,
        "time": time.time(),
    }


class MetricsSink:
    """Collects step records from the hosts; numbers attempts; flags retrained steps.

    ``attempts_before`` / ``max_step_before`` carry the history of earlier runs on the
    same checkpoint folder (see :class:`ProgressFile`), so a resumed run keeps counting.
    """

    def __init__(
        self,
        attempts_before: int = 0,
        max_step_before: int = 0,
        *,
        export_tags: dict[str, str] | None = None,
        exporter: Exporter | None = None,
    ) -> None:
        """``export_tags``: publish through Ray's metrics API with these tags (the sink is
        a Ray actor then); ``exporter``: any other :class:`Exporter`."""
        if exporter is None and export_tags is not None:
            exporter = RayMetricsExporter(export_tags)
        self._exporter = exporter
        self._lock = threading.Lock()
        self._first_attempt = attempts_before + 1
        self._attempt = attempts_before
        self._max_step = max_step_before
        self._pending: list[dict[str, Any]] = []
        self._events: list[dict[str, Any]] = []

    def begin_attempt(self) -> tuple[int, bool]:
        """A new worker group started: its attempt number and whether it is this run's first."""
        with self._lock:
            self._attempt += 1
            attempt, first = self._attempt, self._attempt == self._first_attempt
        if not first and self._exporter is not None:
            self._exporter.restart()
        return attempt, first

    def push(self, records: list[dict[str, Any]]) -> None:
        with self._lock:
            for rec in records:
                rec["retrained"] = rec["step"] <= self._max_step
                self._max_step = max(self._max_step, rec["step"])
                self._pending.append(rec)
        if self._exporter is not None:
            self._exporter.steps(records)

    def checkpointed(self, step: int) -> None:
        """A checkpoint of ``step`` was reported."""
        if self._exporter is not None:
            self._exporter.checkpoint(step)

    def event(self, event: dict[str, Any]) -> None:
        """Something the driver should act on that is not a step (e.g. hosts holding)."""
        with self._lock:
            self._events.append(event)

    def drain(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Records and events received since the last drain."""
        with self._lock:
            records, self._pending = self._pending, []
            events, self._events = self._events, []
            return records, events

    def progress(self) -> dict[str, int]:
        with self._lock:
            return {"attempts": self._attempt, "max_step": self._max_step}


class ProgressFile:
    """``raytpu_progress.json`` next to the checkpoints: attempts and the highest step done.

    Ray's checkpoints say where to resume, not how far an earlier run got past its last
    checkpoint; this file does, so the retrained steps of a resumed run are flagged too.
    Written through fsspec so a ``gs://`` storage path works the same as a folder.
    """

    NAME = "raytpu_progress.json"

    def __init__(self, run_dir: str) -> None:
        self.path = f"{run_dir.rstrip('/')}/{self.NAME}"

    def read(self) -> dict[str, int]:
        import fsspec

        try:
            with fsspec.open(self.path, "r") as f:
                raw = json.load(f)
            return {"attempts": int(raw["attempts"]), "max_step": int(raw["max_step"])}
        except (FileNotFoundError, KeyError, ValueError):
            return {"attempts": 0, "max_step": 0}

    def write(self, progress: dict[str, int]) -> None:
        import fsspec

        fs, path = fsspec.core.url_to_fs(self.path)
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        with fs.open(path, "w") as f:
            json.dump(progress, f)


class MetricsWriter:
    """The driver's view: JSON lines to ``--metrics-out`` and a rich progress bar."""

    def __init__(self, path: Path | None, total_steps: int, show_progress: bool = True) -> None:
        self._file: IO[str] | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", encoding="utf-8")
        self._progress: Any = None
        self._task: Any = None
        if show_progress:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._progress = Progress(
                TextColumn("[bold]train"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"),
                transient=False,
            )
            self._task = self._progress.add_task("train", total=total_steps, info="starting")
            self._progress.start()
        self.records: list[dict[str, Any]] = []

    def write(self, records: Iterable[dict[str, Any]]) -> None:
        for rec in records:
            self.records.append(rec)
            if self._file is not None:
                self._file.write(json.dumps(rec) + "\n")
            if self._progress is not None:
                info = (
                    f"loss {rec['loss']:.3f}  {rec['tokens_per_s']:,.0f} tok/s  "
                    f"mfu {rec['mfu']:.2e}  attempt {rec['attempt']}"
                    + ("  (retrained)" if rec.get("retrained") else "")
                )
                self._progress.update(self._task, completed=rec["step"], info=info)
        if self._file is not None:
            self._file.flush()

    def note(self, message: str) -> None:
        """A line above the progress bar (host killed, attempt restarted...)."""
        if self._progress is not None:
            self._progress.console.print(message)
        else:
            print(message, flush=True)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
        if self._file is not None:
            self._file.close()
