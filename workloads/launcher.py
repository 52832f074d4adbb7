"""The Ray launcher: one worker per TPU host, gang-scheduled per slice, with Ray's own
checkpointing, failure handling and resume.

Ray Train v2 ``DataParallelTrainer`` with ``ScalingConfig(use_tpu=True, topology=...,
accelerator_type=...)`` reserves whole slices through ``SlicePlacementGroup`` and asks
for every chip of each host (a worker with fewer chips would see a one-host slice).
``TorchTrainer(use_tpu=True)`` is not used: it loads torch_tpu, not torch_xla
(shared/ref/notes/ray-torchxla.md §3.3). Our backend only forms a gloo group (host-side
coordination, and the CPU simulation's gradient sync) and sets the ``MEGASCALE_*``
variables of multislice runs from each worker's actual slice.

Checkpoints go through ``ray.train.report(checkpoint=...)`` to ``RunConfig.storage_path``
(a folder or ``gs://``); ``ray.train.get_checkpoint()`` resumes after a worker-group
restart (``FailureConfig.max_failures``) and also when a new run names the same storage
path and run name. Run as ``python -m raytpu.workloads.launcher`` on the cluster.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import ray
import ray.train
from ray.train.backend import Backend, BackendConfig
from ray.train.v2.api.config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from ray.util.tpu import get_tpu_coordinator_env_vars
from raytpu.facts.versions import Ports

from .config import LaunchOptions, TrainConfig, from_argv
from .metrics import MetricsSink, MetricsWriter, MfuBasis, ProgressFile
from .ray_hooks import RayHooks
from .scaling import TrainScaling

GLOO_TIMEOUT = timedelta(minutes=10)
POLL_S = 0.5  # driver: drain the metrics sink this often
PROGRESS_WRITE_S = 5.0


# -- backend: runs in the Ray Train controller when a worker group starts -----------------


def _worker_info() -> dict[str, str]:
    import socket

    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    return {
        "ip": ray.util.get_node_ip_address(),
        "port": str(port),
        "slice": os.environ.get("TPU_NAME", ""),
        "worker_id": os.environ.get("TPU_WORKER_ID", ""),
    }


def _setup_worker(env: dict[str, str], addr: str, port: int, rank: int, world: int) -> None:
    import torch.distributed as dist

    # The controller's values win over the pod's: a replaced slice changes them.
    os.environ.update(env)
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group(
        "gloo", init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world,
        timeout=GLOO_TIMEOUT,
    )


def _teardown_worker() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def slice_ids(slices: list[str]) -> list[int]:
    """Each worker's slice index, slices numbered in order of their lowest rank."""
    order: dict[str, int] = {}
    for name in slices:
        order.setdefault(name, len(order))
    return [order[name] for name in slices]


class _TpuGlooBackend(Backend):
    def on_start(self, worker_group: Any, backend_config: BackendConfig) -> None:
        assert isinstance(backend_config, TpuGlooConfig)
        n = len(worker_group)
        infos = ray.get([worker_group.execute_single_async(i, _worker_info) for i in range(n)])
        ids = slice_ids([info["slice"] for info in infos])
        if len(set(ids)) != backend_config.num_slices:
            raise RuntimeError(
                f"workers landed on {len(set(ids))} slice(s) "
                f"({sorted({i['slice'] for i in infos})}), expected {backend_config.num_slices}"
            )
        # Slice 0's worker 0 coordinates (as the TPU webhook would set it); if the TPU
        # env is broken, the trainer's own check reports it, so any host of slice 0 does.
        slice0 = [info for info, sid in zip(infos, ids, strict=True) if sid == 0]
        coordinator = next((i["ip"] for i in slice0 if i["worker_id"] == "0"), slice0[0]["ip"])
        futures = []
        for rank, sid in enumerate(ids):
            env: dict[str, str] = {}
            if backend_config.num_slices > 1:
                env = get_tpu_coordinator_env_vars(
                    coordinator, backend_config.num_slices, sid, str(Ports.MEGASCALE)
                )
            futures.append(
                worker_group.execute_single_async(
                    rank, _setup_worker, env, infos[0]["ip"], int(infos[0]["port"]), rank, n
                )
            )
        ray.get(futures)

    def on_shutdown(self, worker_group: Any, backend_config: BackendConfig) -> None:
        # Best effort: after a lost host some workers are already gone.
        refs = [worker_group.execute_single_async(i, _teardown_worker)
                for i in range(len(worker_group))]
        ray.wait(refs, num_returns=len(refs), timeout=10)


@dataclass
class TpuGlooConfig(BackendConfig):
    """A gloo process group plus ``MEGASCALE_*`` per worker; XLA does the rest."""

    num_slices: int = 1

    @property
    def backend_cls(self) -> type[_TpuGlooBackend]:
        return _TpuGlooBackend


# -- the per-host loop, inside each Ray Train worker ------------------------------------


def ray_train_loop(config: dict[str, Any]) -> None:
    """Ray Train entry point on each host."""
    import torch.distributed as dist

    from .parallel import SpmdDataParallel
    from .tpu_env import TpuEnvError, check_host_indices, host_identity
    from .trainer import HostPlace, make_parallelism, train

    cfg = TrainConfig.from_dict(config["train"])
    shape = cfg.shape()
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
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
    train(cfg, par, RayHooks(config["sink"], rank), place, basis)


# -- the driver ----------------------------------------------------------------------------


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
) -> LaunchResult:
    """Run the job on the connected Ray cluster; returns once step ``cfg.steps`` is done.

    ``on_progress`` sees every batch of step records and events as the driver receives
    them (the local mode's preemption rehearsal hooks in here).
    """
    t0 = time.perf_counter()
    shape = cfg.shape()
    scaling = TrainScaling.of(cfg, opts.slice_group)
    progress_file = ProgressFile(f"{opts.storage_path.rstrip('/')}/{opts.run_name}")
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
    common: dict[str, Any] = dict(
        train_loop_config={"train": cfg.to_dict(), "sink": sink},
        scaling_config=ScalingConfig(**scaling.scaling_config_kwargs()),
        run_config=RunConfig(
            name=opts.run_name,
            storage_path=opts.storage_path,
            failure_config=FailureConfig(max_failures=opts.max_failures),
            checkpoint_config=CheckpointConfig(num_to_keep=2),
        ),
    )
    trainer: DataParallelTrainer
    if cfg.framework == "jax":
        # JaxTrainer's backend runs jax.distributed.initialize on every worker (and the
        # MEGASCALE_* variables of multislice runs) before the loop starts.
        from ray.train.v2.jax import JaxTrainer

        from .jax_launch import ray_jax_loop

        trainer = JaxTrainer(ray_jax_loop, **common)
    else:
        trainer = DataParallelTrainer(
            ray_train_loop, backend_config=TpuGlooConfig(num_slices=cfg.slices), **common
        )

    stop = threading.Event()
    errors: list[BaseException] = []

    def pump() -> None:
        last_write = 0.0
        while True:
            done = stop.is_set()
            try:
                records, events = ray.get(sink.drain.remote())
                if records:
                    writer.write(records)
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
    if scaling.capacity_request:
        _request_capacity(scaling.capacity_request)
    try:
        trainer.fit()
    finally:
        if scaling.capacity_request:
            _request_capacity([])  # let the idle timeout scale the group back down
        stop.set()
        pump_thread.join(timeout=30)
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


def _request_capacity(request: list[dict[str, Any]]) -> None:
    """Ask the autoscaler for the run's hosts (persistent until the next call; ``[]``
    withdraws it). See :mod:`raytpu.workloads.scaling` for why Ray Train's own slice
    reservation cannot scale a group up from zero."""
    from ray.autoscaler.sdk import request_resources

    request_resources(bundles=[r["resources"] for r in request],
                      bundle_label_selectors=[r["label_selector"] for r in request])


def main(argv: list[str] | None = None) -> int:
    """``python -m raytpu.workloads.launcher [trainer flags] --storage-path gs://...``."""
    cfg, opts = from_argv(sys.argv[1:] if argv is None else argv)
    if opts.dry_run:  # contacts nothing: no ray.init
        print(json.dumps(TrainScaling.of(cfg, opts.slice_group).to_dict()))
        return 0
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    result = launch(cfg, opts)
    print(
        f"done: step {result.last_step}/{cfg.steps} in {result.wall_s:.0f}s, "
        f"{result.attempts} attempt(s); checkpoints in {opts.storage_path}/{opts.run_name}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
