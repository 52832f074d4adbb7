"""The JAX trainer inside Ray Train's ``JaxTrainer``: one worker per TPU host.

``launcher.launch`` builds ``JaxTrainer(ray_jax_loop, scaling_config=ScalingConfig(
use_tpu=True, topology=..., accelerator_type=...))`` for ``--framework jax``: the same slice
reservation, checkpoints, failure handling and metrics sink as the torch path. Its
backend (``ray.train.v2.jax.config``) calls ``jax.distributed.initialize`` with the Ray
rank as the process index before the loop runs, sets ``JAX_PLATFORMS=tpu`` unless the
host's environment already names a platform (the CPU simulation sets ``cpu``; see
:func:`raytpu.workloads.jax_trainer.simulation_env`), and sets ``MEGASCALE_*`` on
multislice runs. There is no torch process group here: rank 0's attempt number reaches
the other hosts through a JAX collective.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import ray
import ray.train
from raytpu.spec.training import TrainConfig

from .loop import HostPlace
from .metrics import MfuBasis
from .ray_hooks import RayHooks


class JaxRayHooks(RayHooks):
    """:class:`RayHooks` with JAX checkpoints and a JAX broadcast."""

    def _broadcast(self, value: tuple[int, bool] | None) -> tuple[int, bool]:
        from jax.experimental import multihost_utils

        box = np.zeros(2, dtype=np.int32) if value is None else np.asarray(value, np.int32)
        out = np.asarray(multihost_utils.broadcast_one_to_all(box))  # from process 0
        return int(out[0]), bool(out[1])

    def _read(self, directory: Path) -> dict[str, Any]:
        from .jax_trainer import read_checkpoint

        return read_checkpoint(directory)

    def _write(self, directory: Path, state: dict[str, Any]) -> None:
        from .jax_trainer import write_checkpoint

        write_checkpoint(directory, state)


def ray_jax_loop(config: dict[str, Any]) -> None:
    """Ray Train entry point on each host (jax.distributed is initialised already)."""
    began = time.time()  # jax itself was imported by the backend, before this
    import jax

    from .jax_trainer import train_jax
    from .tpu_env import TpuEnvError, host_identity

    cfg = TrainConfig.from_dict(config["train"])
    shape = cfg.shape()
    ctx = ray.train.get_context()
    world = ctx.get_world_size()
    real_tpu = jax.default_backend() == "tpu"
    ident = host_identity(os.environ, shape, real_tpu=real_tpu, num_slices=cfg.slices)
    if world != ident.num_hosts:
        raise TpuEnvError(f"{world} Ray workers for {ident.num_hosts} TPU hosts")
    if jax.process_count() != world:
        raise TpuEnvError(f"jax.distributed joined {jax.process_count()} processes, the run "
                          f"has {world} hosts")
    # JAX's process index orders the global batch's shards (JaxTrainer numbers them by
    # Ray rank, so the two agree here; on TPU the runtime may renumber them).
    index = jax.process_index()
    basis = MfuBasis.for_run(cfg.architecture(), shape, cfg.slices, simulated=not real_tpu,
                             seq_len=cfg.model.seq_len, framework="jax",
                             processes=jax.process_count(), global_devices=len(jax.devices()))
    place = HostPlace(data_index=index, num_hosts=world, rank=index)
    hooks = JaxRayHooks(config["sink"], index, config.get("run_dir"), (began, time.time()))
    train_jax(cfg, hooks, place, basis)
