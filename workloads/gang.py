"""One Ray Train worker per TPU host, gang-scheduled per slice: the code path the bundled
trainer (:mod:`raytpu.workloads.launcher`) and a user's own command
(:mod:`raytpu.workloads.command`) share.

Ray Train v2 ``DataParallelTrainer`` with ``ScalingConfig(use_tpu=True, topology=...,
accelerator_type=...)`` reserves whole slices through ``SlicePlacementGroup`` and asks
for every chip of each host (a worker with fewer chips would see a one-host slice).
``TorchTrainer(use_tpu=True)`` is not used: it loads torch_tpu, not torch_xla
(shared/ref/notes/ray-torchxla.md §3.3). The backend here only forms a gloo group
(host-side coordination, and the CPU simulation's gradient sync; off for a user's command)
and sets, from each worker's actual slice, the ``MEGASCALE_*`` variables of multislice runs
and the run's coordinator (process 0: slice 0's host 0). A lost host fails the worker group;
Ray Train restarts it up to ``FailureConfig.max_failures`` times.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import ray
from ray.train.backend import Backend, BackendConfig
from ray.train.v2.api.config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer
from ray.util.tpu import get_tpu_coordinator_env_vars
from raytpu.facts.versions import Ports
from raytpu.spec.scaling import TrainScaling
from raytpu.spec.training import LaunchOptions, TrainConfig

GLOO_TIMEOUT = timedelta(minutes=10)
# Set by the backend on every worker of a worker group (:func:`_TpuGlooBackend.on_start`).
COORDINATOR_ENV = "RAYTPU_COORDINATOR_ADDRESS"
SLICE_HOSTS_ENV = "RAYTPU_SLICE_HOSTS"  # the worker's slice's hosts, in TPU_WORKER_ID order
ATTEMPT_ENV = "RAYTPU_ATTEMPT"  # one id per worker-group start (a restart is a new one)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def worker_info() -> dict[str, str]:
    """Where this worker runs: its node's address, two free ports, its slice and host."""
    return {
        "ip": ray.util.get_node_ip_address(),
        "port": str(_free_port()),  # the gloo group's rendezvous (rank 0's)
        "coordinator_port": str(_free_port()),  # the command's coordinator (process 0's)
        "slice": os.environ.get("TPU_NAME", ""),
        "worker_id": os.environ.get("TPU_WORKER_ID", ""),
    }


def setup_worker(env: dict[str, str], addr: str, port: int, rank: int, world: int,
                 gloo: bool) -> None:
    # The controller's values win over the pod's: a replaced slice changes them.
    os.environ.update(env)
    if not gloo:
        return
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group(
        "gloo", init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world,
        timeout=GLOO_TIMEOUT,
    )


def teardown_worker() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def slice_ids(slices: list[str]) -> list[int]:
    """Each worker's slice index, slices numbered in order of their lowest rank."""
    order: dict[str, int] = {}
    for name in slices:
        order.setdefault(name, len(order))
    return [order[name] for name in slices]


def host_order(info: dict[str, str]) -> int:
    """A worker's host index in its slice (``TPU_WORKER_ID``; 0 where unset)."""
    return int(info["worker_id"]) if info["worker_id"].isdigit() else 0


def group_envs(infos: list[dict[str, str]], num_slices: int) -> list[dict[str, str]]:
    """Each worker's environment, in rank order, from the workers' :func:`worker_info`:
    the run's coordinator, its slice's hosts, a new attempt id and, for multislice, the
    ``MEGASCALE_*`` variables."""
    ids = slice_ids([info["slice"] for info in infos])
    if len(set(ids)) != num_slices:
        raise RuntimeError(
            f"workers landed on {len(set(ids))} slice(s) "
            f"({sorted({i['slice'] for i in infos})}), expected {num_slices}"
        )
    # Slice 0's worker 0 coordinates (as the TPU webhook would set it); if the TPU
    # env is broken, the trainer's own check reports it, so any host of slice 0 does.
    slice0 = [info for info, sid in zip(infos, ids, strict=True) if sid == 0]
    first = next((i for i in slice0 if i["worker_id"] == "0"), slice0[0])
    hosts = {sid: ",".join(i["ip"] for i in sorted(
        (i for i, s in zip(infos, ids, strict=True) if s == sid), key=host_order))
        for sid in set(ids)}
    common = {COORDINATOR_ENV: f"{first['ip']}:{first['coordinator_port']}",
              ATTEMPT_ENV: str(time.time_ns())}
    envs = []
    for sid in ids:
        env = dict(common, **{SLICE_HOSTS_ENV: hosts[sid]})
        if num_slices > 1:
            env.update(get_tpu_coordinator_env_vars(
                first["ip"], num_slices, sid, str(Ports.MEGASCALE)))
        envs.append(env)
    return envs


class _TpuGlooBackend(Backend):
    def on_start(self, worker_group: Any, backend_config: BackendConfig) -> None:
        assert isinstance(backend_config, TpuGlooConfig)
        n = len(worker_group)
        infos = ray.get([worker_group.execute_single_async(i, worker_info) for i in range(n)])
        envs = group_envs(infos, backend_config.num_slices)
        ray.get([worker_group.execute_single_async(
            rank, setup_worker, env, infos[0]["ip"], int(infos[0]["port"]), rank, n,
            backend_config.gloo) for rank, env in enumerate(envs)])

    def on_shutdown(self, worker_group: Any, backend_config: BackendConfig) -> None:
        assert isinstance(backend_config, TpuGlooConfig)
        if not backend_config.gloo:
            return
        # Best effort: after a lost host some workers are already gone.
        refs = [worker_group.execute_single_async(i, teardown_worker)
                for i in range(len(worker_group))]
        ray.wait(refs, num_returns=len(refs), timeout=10)


@dataclass
class TpuGlooConfig(BackendConfig):
    """``MEGASCALE_*`` and the coordinator per worker, plus a gloo process group; XLA does
    the rest."""

    num_slices: int = 1
    gloo: bool = True

    @property
    def backend_cls(self) -> type[_TpuGlooBackend]:
        return _TpuGlooBackend


def fit_on_slices(train_fn: Callable[[dict[str, Any]], None], loop_config: dict[str, Any],
                  cfg: TrainConfig, opts: LaunchOptions, *, gloo: bool = True,
                  jax: bool = False) -> None:
    """Run ``train_fn`` on one worker per host of ``cfg.slices`` slices of ``cfg``'s shape,
    scaling ``opts.slice_group`` up from zero first; returns when every worker has.
    ``jax``: under Ray Train's ``JaxTrainer``, whose backend runs ``jax.distributed.
    initialize`` on every worker (and sets the ``MEGASCALE_*`` variables) instead of ours."""
    scaling = TrainScaling.of(cfg, opts.slice_group)
    common: dict[str, Any] = dict(
        train_loop_config=loop_config,
        scaling_config=ScalingConfig(**scaling.scaling_config_kwargs()),
        run_config=RunConfig(
            name=opts.run_name,
            storage_path=opts.storage_path,
            failure_config=FailureConfig(max_failures=opts.max_failures),
            checkpoint_config=CheckpointConfig(num_to_keep=2),
        ),
    )
    trainer: DataParallelTrainer
    if jax:
        from ray.train.v2.jax import JaxTrainer

        trainer = JaxTrainer(train_fn, **common)
    else:
        trainer = DataParallelTrainer(
            train_fn, backend_config=TpuGlooConfig(num_slices=cfg.slices, gloo=gloo), **common)
    if scaling.capacity_request:
        request_capacity(scaling.capacity_request)
    try:
        trainer.fit()
    finally:
        if scaling.capacity_request:
            request_capacity([])  # let the idle timeout scale the group back down


def request_capacity(request: list[dict[str, Any]]) -> None:
    """Ask the autoscaler for the run's hosts (persistent until the next call; ``[]``
    withdraws it). See :mod:`raytpu.spec.scaling` for why Ray Train's own slice
    reservation cannot scale a group up from zero."""
    from ray.autoscaler.sdk import request_resources

    request_resources(bundles=[r["resources"] for r in request],
                      bundle_label_selectors=[r["label_selector"] for r in request])
