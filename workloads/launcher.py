"""The Ray launcher: one worker per TPU host, gang-scheduled per slice
(:mod:`raytpu.workloads.gang`), with Ray's own checkpointing, failure handling and resume.
With a command after ``--`` it runs that command on every host instead of the bundled
trainer, through the same path (:mod:`raytpu.workloads.command`).

Checkpoints go through ``ray.train.report(checkpoint=...)`` to ``RunConfig.storage_path``
(a folder or ``gs://``); ``ray.train.get_checkpoint()`` resumes after a worker-group
restart (``FailureConfig.max_failures``) and also when a new run names the same storage
path and run name. Run as ``python -m raytpu.workloads.launcher [...] [-- CMD ARG...]`` on the
cluster.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
import ray.train
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from raytpu.spec.scaling import TrainScaling
from raytpu.spec.training import LaunchOptions, TrainConfig, from_argv

from .gang import TpuGlooConfig as TpuGlooConfig
from .gang import fit_on_slices
from .gang import slice_ids as slice_ids
from .goodput_log import GoodputLog, run_folder
from .metrics import MetricsSink, MetricsWriter, ProgressFile
from .ray_hooks import RayHooks
from .resident import NAMESPACE, HostsCallback, fit_resident

POLL_S = 0.5  # driver: drain the metrics sink this often
PROGRESS_WRITE_S = 5.0


# -- the per-host loop, inside each Ray Train worker ------------------------------------


def ray_train_loop(config: dict[str, Any]) -> None:
    """Ray Train entry point on each host."""
    began = time.time()
    from .trainer import train_host  # torch, torch_xla: most of a new process's start

    ctx = ray.train.get_context()
    rank = ctx.get_world_rank()
    train_host(TrainConfig.from_dict(config["train"]), rank, ctx.get_world_size(),
               RayHooks(config["sink"], rank, config.get("run_dir"), (began, time.time())))


# -- the driver ----------------------------------------------------------------------------


class Recomputed:
    """Records a goodput ``steps_recomputed`` event for each attempt's retrained steps
    (the sink flags them), when the attempt's first non-retrained step arrives."""

    def __init__(self, log: GoodputLog) -> None:
        self._log = log
        self._open: dict[int, list[int]] = {}
        self._done: set[int] = set()

    def note(self, records: list[dict[str, Any]]) -> None:
        for rec in records:
            attempt = int(rec["attempt"])
            if attempt in self._done:
                continue
            if rec.get("retrained"):
                span = self._open.setdefault(attempt, [rec["step"], rec["step"]])
                span[1] = max(span[1], rec["step"])
            else:
                self._done.add(attempt)
                if attempt in self._open:
                    first, last = self._open.pop(attempt)
                    self._log.record("steps_recomputed", attempt=attempt, first=first,
                                     last=last)


@dataclass
class LaunchResult:
    records: list[dict[str, Any]]
    attempts: int
    last_step: int
    wall_s: float


# Called with the step records and the events (see MetricsSink) of each drain.
ProgressCallback = Callable[[list[dict[str, Any]], list[dict[str, Any]]], None]


def launch(
    cfg: TrainConfig,
    opts: LaunchOptions,
    *,
    on_progress: ProgressCallback | None = None,
    writer: MetricsWriter | None = None,
    on_hosts: HostsCallback | None = None,
) -> LaunchResult:
    """Run the job on the connected Ray cluster; returns once step ``cfg.steps`` is done.

    ``on_progress`` sees every batch of step records and events as the driver receives
    them (the local mode's preemption rehearsal hooks in here); ``on_hosts``, with
    ``opts.resident``, each time the run gets its hosts.
    """
    t0 = time.perf_counter()
    shape = cfg.shape()
    run_dir = run_folder(opts.storage_path, opts.run_name)
    goodput = GoodputLog(run_dir, "driver")
    goodput.record("job_start")
    goodput.flush()  # a driver lost before its first flush still started the job
    progress_file = ProgressFile(run_dir)
    before = progress_file.read()
    here = ray.get_runtime_context().get_node_id()
    sink: Any = (
        ray.remote(num_cpus=0)(MetricsSink)
        .options(scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False))
        .remote(before["attempts"], before["max_step"],
                export_tags={"run": opts.run_name, "tpu": shape.accelerator_type})
    )
    own_writer = writer is None
    writer = writer or MetricsWriter(
        Path(opts.metrics_out) if opts.metrics_out else None, cfg.steps, opts.progress
    )
    if cfg.framework == "jax":
        from .jax_launch import ray_jax_loop

        loop: Callable[[dict[str, Any]], None] = ray_jax_loop
    else:
        loop = ray_train_loop

    stop = threading.Event()
    errors: list[BaseException] = []
    recomputed = Recomputed(goodput)

    def pump() -> None:
        last_write = 0.0
        while True:
            done = stop.is_set()
            try:
                records, events = ray.get(sink.drain.remote())
                if records:
                    writer.write(records)
                    recomputed.note(records)
                if on_progress is not None and (records or events):
                    on_progress(records, events)
                if done or time.monotonic() - last_write > PROGRESS_WRITE_S:
                    progress_file.write(ray.get(sink.progress.remote()))
                    last_write = time.monotonic()
            except BaseException as e:  # surfaced after fit()
                errors.append(e)
                return
            if done:
                return
            stop.wait(POLL_S)

    pump_thread = threading.Thread(target=pump, name="raytpu-metrics", daemon=True)
    pump_thread.start()
    try:
        if opts.resident:
            fit_resident(cfg, opts, sink, on_hosts=on_hosts)
        else:
            fit_on_slices(loop, {"train": cfg.to_dict(), "sink": sink, "run_dir": run_dir},
                          cfg, opts, jax=cfg.framework == "jax")
    finally:
        stop.set()
        pump_thread.join(timeout=30)
        goodput.record("job_end")
        goodput.flush()
        if own_writer:
            writer.close()
        ray.kill(sink)
    if errors:
        raise errors[0]
    progress = progress_file.read()
    return LaunchResult(
        records=writer.records,
        attempts=progress["attempts"] - before["attempts"],
        last_step=progress["max_step"],
        wall_s=time.perf_counter() - t0,
    )


HOLDING = "hosts holding after step"
"""What the launcher prints once every host of a rehearsal (``--fail-host-at-step K``) has
registered its checkpoints and waits to be killed: a harness outside waits for it."""


RESIDENT_HOSTS = "resident hosts"
"""What the launcher prints when a ``--resident`` run gets its hosts: ``resident hosts
started|taken over: pids P,...`` (the head-loss rehearsal reads the pids)."""


def _announce_hosts(found: bool, pids: list[int]) -> None:
    verb = "taken over" if found else "started"
    print(f"{RESIDENT_HOSTS} {verb}: pids {','.join(map(str, pids))}", flush=True)


def _announce_holds(records: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
    for event in events:
        if event.get("kind") == "holding":
            print(f"{HOLDING} {event['step']} (attempt {event['attempt']})", flush=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m raytpu.workloads.launcher [trainer flags] --storage-path gs://...``."""
    cfg, opts = from_argv(sys.argv[1:] if argv is None else argv)
    if opts.dry_run:  # contacts nothing: no ray.init
        print(json.dumps(TrainScaling.of(cfg, opts.slice_group).to_dict()))
        return 0
    # Resident hosts and their placement group are found by name in one namespace.
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"),
             namespace=NAMESPACE if opts.resident else None)
    if opts.command:  # a user's command on every host, through the same gang path
        from .command import launch_command

        return launch_command(cfg, opts).exit_code
    result = launch(cfg, opts, on_progress=_announce_holds, on_hosts=_announce_hosts)
    print(
        f"done: step {result.last_step}/{cfg.steps} in {result.wall_s:.0f}s, "
        f"{result.attempts} attempt(s); checkpoints in {opts.storage_path}/{opts.run_name}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
