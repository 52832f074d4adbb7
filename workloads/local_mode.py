"""``raytpu train --local``: the cluster launcher, unchanged, on simulated slices.

Adds the preemption rehearsal: when the driver sees step K, one simulated host's node is
SIGKILLed (its whole process group, as a reclaimed TPU VM disappears) and a new node
with the same TPU identity is started, as GKE recreates the VM. Ray Train notices the
lost worker, restarts the worker group on the restored slice and resumes from the
last checkpoint; the metrics mark the steps that were done twice.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from raytpu.facts.catalog import slice_shape
from raytpu.spec.training import LaunchOptions, TrainConfig

from .goodput_log import GoodputLog, run_folder

if TYPE_CHECKING:
    from .command import CommandResult
from .local_cluster import LocalSlices, SimHost
from .metrics import MetricsWriter


@dataclass
class HostKiller:
    """Kills and replaces one simulated host once every host holds after ``at_step``.

    The hosts announce the hold only after Ray has registered their last checkpoint, so
    the steps retrained do not depend on timing.
    """

    cluster: LocalSlices
    host: SimHost
    at_step: int
    writer: MetricsWriter
    killed_at: float | None = None
    replaced_at: float | None = None
    resumed_at: float | None = None
    killed_attempt: int | None = None
    error: BaseException | None = None
    goodput: GoodputLog | None = None  # where the kill is recorded as a host incident
    _thread: threading.Thread | None = field(default=None, repr=False)

    def __call__(self, records: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
        for event in events:
            if (
                self.killed_attempt is None
                and event.get("kind") == "holding"
                and event.get("step") == self.at_step
            ):
                self.killed_attempt = int(event["attempt"])
                self._thread = threading.Thread(target=self._kill_and_replace, daemon=True)
                self._thread.start()
        for rec in records:
            if (
                self.killed_attempt is not None
                and self.resumed_at is None
                and rec["attempt"] > self.killed_attempt
            ):
                self.resumed_at = rec["time"]
                assert self.killed_at is not None
                self.writer.note(
                    f"resumed at step {rec['step']} (attempt {rec['attempt']}), "
                    f"{self.resumed_at - self.killed_at:.1f}s after the kill"
                )

    def _kill_and_replace(self) -> None:
        try:
            self.writer.note(f"step {self.at_step}: killing simulated host {self.host.name}")
            self.killed_at = time.time()
            self.cluster.kill_host(self.host)
            if self.goodput is not None:
                self.goodput.record("failure", t=self.killed_at, incident="host",
                                    step=self.at_step)
                self.goodput.flush()
            self.cluster.replace_host(self.host)
            self.replaced_at = time.time()
            self.writer.note(
                f"replacement {self.host.name} up after {self.replaced_at - self.killed_at:.1f}s"
            )
        except BaseException as e:  # reported by run_local
            self.error = e

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join(timeout=120)


@dataclass
class LocalRunReport:
    """What a local run did, for the CLI summary, the tests and the benchmark."""

    records: list[dict[str, Any]]
    attempts: int
    last_step: int
    wall_s: float
    killed_at: float | None = None
    replaced_at: float | None = None
    resumed_at: float | None = None

    @property
    def kill_to_resume_s(self) -> float | None:
        if self.killed_at is None or self.resumed_at is None:
            return None
        return self.resumed_at - self.killed_at


def run_local(
    cfg: TrainConfig,
    opts: LaunchOptions,
    *,
    scratch: Path | None = None,
    host_env: dict[str, str] | None = None,
) -> LocalRunReport:
    """Start simulated slices, run the launcher on them, stop every process started.

    ``host_env`` is added to every simulated node's environment, as a RayCluster's pod
    env (e.g. ``RAYTPU_XLA_CACHE``); the training workers inherit it.
    """
    from .launcher import launch

    shape = slice_shape(cfg.tpu)
    if cfg.framework == "jax":
        from .jax_trainer import simulation_env

        # Each simulated host's JAX sees CPU devices for its chips; gloo carries the
        # collectives between hosts, so the global mesh's reductions really cross them.
        host_env = {**simulation_env(shape.chips_per_vm), **(host_env or {})}
    writer = MetricsWriter(
        Path(opts.metrics_out) if opts.metrics_out else None, cfg.steps, opts.progress
    )
    killer: HostKiller | None = None
    try:
        with LocalSlices(shape, cfg.slices, scratch=scratch, extra_env=host_env or {}) as cluster:
            writer.note(
                f"local cluster: {cfg.slices} x {shape.accelerator_type} simulated "
                f"({shape.hosts} host(s) x {shape.chips_per_vm} chips per slice), "
                f"Ray at {cluster.address}"
            )
            if cfg.fail_host_at_step is not None:
                # The last host: not worker 0, so the slice's head resource survives too.
                log = GoodputLog(run_folder(opts.storage_path, opts.run_name), "rehearsal")
                killer = HostKiller(cluster, cluster.hosts[-1], cfg.fail_host_at_step, writer,
                                    goodput=log)
            result = launch(cfg, opts, on_progress=killer, writer=writer)
            if killer is not None:
                killer.join()
                if killer.error is not None:
                    raise killer.error
    finally:
        writer.close()
    return LocalRunReport(
        records=result.records,
        attempts=result.attempts,
        last_step=result.last_step,
        wall_s=result.wall_s,
        killed_at=killer.killed_at if killer else None,
        replaced_at=killer.replaced_at if killer else None,
        resumed_at=killer.resumed_at if killer else None,
    )


def run_local_command(
    cfg: TrainConfig,
    opts: LaunchOptions,
    *,
    runtime_env: dict[str, Any],
    out: IO[str] | None = None,
    scratch: Path | None = None,
) -> CommandResult:
    """``opts.command`` on simulated slices of ``cfg``'s exact shape (its topology and chips
    per host), the job's ``runtime_env`` (working directory, env vars) as on a stack's
    cluster, through the same launcher path; every process started is stopped after."""
    from .command import launch_command

    with LocalSlices(cfg.shape(), cfg.slices, scratch=scratch, runtime_env=runtime_env,
                     log_to_driver=False):
        return launch_command(cfg, opts, out=out)
