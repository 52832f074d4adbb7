"""A user's own command on every TPU host of a run, one process per host, through the
bundled trainer's gang path (:func:`raytpu.workloads.gang.fit_on_slices`).

Each Ray Train worker (one per host, the slice reserved whole) starts the command in the
job's working directory with the slice context in its environment
(:mod:`raytpu.workloads.context`), sends its output line by line to the driver, which
prints it prefixed with the host, and fails when the command exits non-zero. A failed or
lost host fails the worker group: Ray Train restarts every process of the run up to
``--max-failures`` times, and the command resumes from ``RAYTPU_CHECKPOINT_DIR``. The run's
exit status is then the first failing host's.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from raytpu.spec.scaling import COMMAND_ENV_VARS
from raytpu.spec.training import LaunchOptions, TrainConfig

from .context import SliceContext, command_env
from .gang import ATTEMPT_ENV, COORDINATOR_ENV, SLICE_HOSTS_ENV, fit_on_slices
from .tpu_env import host_identity

FLUSH_S = 0.2  # a host sends its output at least this often
POLL_S = 0.2  # the driver prints it this often
PYTHONS = ("python", "python3")


class CommandFailed(RuntimeError):
    """A host's command exited non-zero."""


class OutputSink:
    """Ray actor on the driver's node: the hosts' output lines and exit statuses."""

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._exits: list[dict[str, Any]] = []

    def lines(self, batch: list[str]) -> None:
        self._lines.extend(batch)

    def exited(self, record: dict[str, Any]) -> None:
        self._exits.append(record)

    def drain(self) -> tuple[list[str], list[dict[str, Any]]]:
        lines, exits = self._lines, self._exits
        self._lines, self._exits = [], []
        return lines, exits


def checkpoint_dir(opts: LaunchOptions) -> str:
    """Where the command keeps its checkpoints: the run's folder under the storage path
    (Ray Train's own records sit beside it)."""
    return f"{opts.storage_path.rstrip('/')}/{opts.run_name}/checkpoints"


def host_context(config: dict[str, Any], env: dict[str, str]) -> SliceContext:
    """This host's slice context, from its TPU variables (checked against the run's shape)
    and what the backend set (coordinator, the slice's hosts)."""
    cfg = TrainConfig.from_dict(config["train"])
    shape = cfg.shape()
    ident = host_identity(env, shape, real_tpu=env.get("PJRT_DEVICE", "").upper() == "TPU",
                          num_slices=cfg.slices)
    return SliceContext(
        slice_index=ident.slice_id, num_slices=cfg.slices, host_index=ident.worker_id,
        hosts_per_slice=shape.hosts, chips_per_host=shape.chips_per_vm,
        topology=shape.topology, accelerator_type=shape.accelerator_type,
        coordinator_address=env[COORDINATOR_ENV], checkpoint_dir=config["checkpoint_dir"],
        worker_hostnames=tuple(env.get(SLICE_HOSTS_ENV, "").split(",")),
        slice_name=ident.slice_name)


def _die_with_parent() -> None:
    """In the child: SIGKILL when the Ray worker that started it dies (Ray Train kills the
    whole worker group after a failure), so no command outlives its attempt."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _forward(stream: IO[bytes], prefix: str, sink: Any) -> None:
    batch: list[str] = []
    last = time.monotonic()
    pending: list[Any] = []
    for raw in iter(stream.readline, b""):
        batch.append(prefix + raw.decode(errors="replace").rstrip("\n"))
        if time.monotonic() - last >= FLUSH_S:
            pending.append(sink.lines.remote(batch))
            batch, last = [], time.monotonic()
    if batch:
        pending.append(sink.lines.remote(batch))
    ray.get(pending)


def command_loop(config: dict[str, Any]) -> None:
    """Ray Train entry point on each host: run the command, forward its output."""
    env = dict(os.environ)
    ctx = host_context(config, env)
    megascale = {k: v for k, v in env.items() if k.startswith("MEGASCALE_")}
    env.update(command_env(ctx, env, megascale))
    argv = list(config["command"])
    if argv[0] in PYTHONS:  # the host's Python: the one the worker (and runtime env) runs
        argv[0] = sys.executable
    where = (f"slice {ctx.slice_index} host {ctx.host_index}" if ctx.num_slices > 1
             else f"host {ctx.host_index}")
    sink = config["sink"]
    proc = subprocess.Popen(argv, cwd=os.getcwd(), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=_die_with_parent)
    assert proc.stdout is not None
    _forward(proc.stdout, f"[{where}] ", sink)
    rc = proc.wait()
    ray.get(sink.exited.remote({
        "attempt": env.get(ATTEMPT_ENV, ""), "where": where, "rc": rc, "time": time.time(),
        "process_index": ctx.process_index}))
    if rc != 0:
        raise CommandFailed(f"{where}: {argv[0]} exited with {_status(rc)}")


def _status(rc: int) -> int:
    """An exit status as a shell reports it (128 + N for a process killed by signal N)."""
    return 128 - rc if rc < 0 else rc


@dataclass
class CommandResult:
    exit_code: int
    exits: list[dict[str, Any]] = field(default_factory=list)
    """Every host's exit, in the order they happened (all attempts)."""
    error: str | None = None


def first_failure(exits: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first non-zero exit of the last attempt that had one."""
    failed = [e for e in exits if e["rc"] != 0]
    if not failed:
        return None
    last = failed[-1]["attempt"]
    return min((e for e in failed if e["attempt"] == last), key=lambda e: e["time"])


def launch_command(cfg: TrainConfig, opts: LaunchOptions, *,
                   out: IO[str] | None = None) -> CommandResult:
    """Run ``opts.command`` on every host of the connected cluster's slices; print their
    output to ``out`` (default stdout) as it comes."""
    stream = out or sys.stdout
    os.environ.update(COMMAND_ENV_VARS)  # the driver builds the trainer's callbacks
    here = ray.get_runtime_context().get_node_id()
    sink: Any = (ray.remote(num_cpus=0)(OutputSink)
                 .options(scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False))
                 .remote())
    exits: list[dict[str, Any]] = []
    stop = threading.Event()

    def pump() -> None:
        while True:
            done = stop.is_set()
            lines, new = ray.get(sink.drain.remote())
            for line in lines:
                print(line, file=stream, flush=True)
            exits.extend(new)
            if done:
                return
            stop.wait(POLL_S)

    thread = threading.Thread(target=pump, name="raytpu-output", daemon=True)
    thread.start()
    error: str | None = None
    try:
        fit_on_slices(command_loop, {"train": cfg.to_dict(), "command": list(opts.command),
                                     "checkpoint_dir": checkpoint_dir(opts), "sink": sink},
                      cfg, opts, gloo=False)
    except Exception as e:  # Ray Train's TrainingFailedError once restarts are spent
        error = f"{type(e).__name__}: {e}"
    finally:
        stop.set()
        thread.join(timeout=30)
        ray.kill(sink)
    if error is None:
        return CommandResult(0, exits)
    failed = first_failure(exits)
    return CommandResult(_status(failed["rc"]) if failed else 1, exits, error)
