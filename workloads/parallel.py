"""The one pluggable step of the trainer: how a host's batch and gradients become global.

* :class:`SpmdDataParallel` (TPU): one process per host, SPMD over a mesh of every chip
  of every slice. Each host feeds its own slice of the global batch; XLA's partitioner
  inserts the gradient all-reduce, so ``sync_grads`` does nothing.
* :class:`HostGlooSync` (CPU simulation): one XLA:CPU device per simulated host. XLA:CPU
  has no cross-process collectives (pytorch/xla#9089), so gradients are averaged over
  gloo on host copies, with the loss packed into the same buffer.
* :class:`EagerCpu`: plain eager PyTorch with the same gloo averaging: the baseline the
  benchmark compares XLA against.

Everything else (model, data, optimizer, checkpoints, metrics) is the same code.
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol, cast

import numpy as np
import torch
import torch.distributed as dist


class Parallelism(Protocol):
    device: torch.device
    name: str
    compile_by_default: bool
    """Whether ``TrainConfig.compile=None`` means dynamo-compiled forward/backward."""

    def to_device(self, batch: np.ndarray) -> torch.Tensor:
        """This host's ``[batch, seq+1]`` tokens as the step's input tensor."""
        ...

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        """The compute precision of the forward pass."""
        ...

    def sync_grads(self, params: list[torch.nn.Parameter], loss: torch.Tensor) -> float | None:
        """Make every host's gradients the global mean; return the global loss if the
        host already has it (None: it is still on the device)."""
        ...

    def mark_step(self) -> None:
        """End of step: cut and dispatch the traced graph (asynchronously on XLA)."""
        ...

    @property
    def global_devices(self) -> int:
        """Devices of the run's mesh: every process's (one per process without SPMD)."""
        ...

    sharded: bool
    """Parameters are split over devices: gathering them (a checkpoint) is a collective
    program every host must run, not only the one that saves."""

    def shard_model(self, model: torch.nn.Module) -> None:
        """Lay the model (on ``device`` now) out over the devices; a no-op unless sharded."""
        ...

    def shard_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """Lay the optimizer's state out like its parameters; a no-op unless sharded."""
        ...

    def wait(self) -> None:
        """Block until everything dispatched has run (and its step closures with it)."""
        ...


def _grads(params: list[torch.nn.Parameter]) -> list[torch.Tensor]:
    missing = [i for i, p in enumerate(params) if p.grad is None]
    if missing:
        raise RuntimeError(f"parameters {missing} got no gradient")
    return [p.grad for p in params]  # type: ignore[misc, unused-ignore]


def _world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def _all_reduce_mean(flat: torch.Tensor) -> torch.Tensor:
    if _world_size() > 1:
        dist.all_reduce(flat)
        flat /= _world_size()
    return flat


class _OneDevicePerProcess:
    """What the gloo-averaged parallelisms share: one device per process, so the mesh is
    the process group, and every parameter is whole on each (nothing to shard)."""

    sharded = False

    @property
    def global_devices(self) -> int:
        return _world_size()

    def shard_model(self, model: torch.nn.Module) -> None:
        pass

    def shard_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        pass


class HostGlooSync(_OneDevicePerProcess):
    """XLA:CPU device per process; gradients averaged over gloo on the host.

    Each gradient is copied to the host on its own (``.cpu()`` of device data is a plain
    transfer) and concatenated there: concatenating on the XLA device first builds an
    extra graph that ran ~40x slower (shared/ref/notes/ray-torchxla.md §2.3 b).
    """

    name = "xla-cpu+gloo"
    # Re-tracing the lazy graph costs the host ~20 ms a step that XLA:CPU, sharing the
    # host's cores, cannot hide behind execution; dynamo replays the traced graphs.
    compile_by_default = True

    def __init__(self) -> None:
        import torch_xla

        self._torch_xla = torch_xla
        self.device = torch_xla.device()

    def to_device(self, batch: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(batch).to(self.device)

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # fp32: XLA:CPU bf16 matmuls are emulated and slow

    def sync_grads(self, params: list[torch.nn.Parameter], loss: torch.Tensor) -> float | None:
        if _world_size() == 1:
            return None  # nothing to average: the whole step stays one XLA graph
        self._torch_xla.sync()  # run forward + backward; the grads become device data
        host = [g.cpu().reshape(-1) for g in _grads(params)]
        flat = _all_reduce_mean(torch.cat([*host, loss.detach().cpu().reshape(1)]))
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = flat[offset : offset + n].view_as(p).to(self.device)
            offset += n
        return float(flat[-1])

    def mark_step(self) -> None:
        self._torch_xla.sync()

    def wait(self) -> None:
        import torch_xla.core.xla_model as xm

        xm.wait_device_ops()


class EagerCpu(_OneDevicePerProcess):
    """Eager PyTorch on the CPU, gradients averaged over gloo if a group exists."""

    name = "eager-cpu"
    compile_by_default = False  # no XLA graph to trace

    def __init__(self) -> None:
        self.device = torch.device("cpu")

    def to_device(self, batch: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(batch)

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def sync_grads(self, params: list[torch.nn.Parameter], loss: torch.Tensor) -> float | None:
        grads = [g.reshape(-1) for g in _grads(params)]
        flat = _all_reduce_mean(torch.cat([*grads, loss.detach().reshape(1)]))
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = flat[offset : offset + n].view_as(p)
            offset += n
        return float(flat[-1])

    def mark_step(self) -> None:
        pass

    def wait(self) -> None:
        pass


class SpmdDataParallel:
    """TPU: SPMD over a ``(data, fsdp)`` mesh of every chip of every slice.

    ``data`` spans the slices (DCN), ``fsdp`` the chips of a slice (ICI); the batch is split
    over both. Each host passes its local batch; ``minibatch=True`` makes it this host's
    shard of the global batch (a host-local tensor marked with ``mark_sharding`` would
    instead be taken as the whole global batch). With ``fsdp`` the parameters, gradients
    and optimizer state are split over the ``fsdp`` axis (:mod:`raytpu.workloads.fsdp`);
    without, they stay replicated and the partitioner inserts the gradient all-reduce.
    Not exercisable on CPU across processes: XLA:CPU cannot form a multi-process mesh,
    but one process with ``CPU_NUM_DEVICES`` virtual devices runs the same program.
    """

    name = "tpu-spmd"
    # Lazy tracing overlaps the TPU's asynchronous execution; dynamo with SPMD is
    # unmeasured here (XLA:CPU cannot form this mesh).
    compile_by_default = False

    def __init__(self, num_slices: int, fsdp: bool = False, bf16: bool = True) -> None:
        import torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.distributed.spmd as xs
        import torch_xla.runtime as xr

        from .fsdp import FsdpSharding
        from .sharding import BATCH_AXES, DATA, FSDP

        xr.use_spmd()  # before any XLA tensor exists
        self._torch_xla, self._xm = torch_xla, xm
        n = xr.global_runtime_device_count()
        if n % num_slices:
            raise RuntimeError(f"{n} TPU devices do not split into {num_slices} slices")
        if num_slices > 1:
            mesh: xs.Mesh = xs.HybridMesh(
                ici_mesh_shape=(1, n // num_slices),
                dcn_mesh_shape=(num_slices, 1),
                axis_names=(DATA, FSDP),
            )
        else:
            mesh = xs.Mesh(np.arange(n), (1, n), (DATA, FSDP))
        self.mesh = mesh
        self._spec = xs.ShardingSpec(mesh, (BATCH_AXES, None), minibatch=True)
        self.device = torch_xla.device()
        self.sharded = fsdp
        self._devices = n
        self._fsdp = FsdpSharding(mesh) if fsdp else None
        self._bf16 = bf16

    @property
    def global_devices(self) -> int:
        return self._devices

    def to_device(self, batch: np.ndarray) -> torch.Tensor:
        out: Any = self._xm.send_cpu_data_to_device(
            [torch.from_numpy(batch)], self.device, self._spec
        )
        return cast(torch.Tensor, out[0])

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        if not self._bf16:
            return contextlib.nullcontext()
        return torch.autocast("xla", dtype=torch.bfloat16)

    def shard_model(self, model: torch.nn.Module) -> None:
        if self._fsdp is not None:
            layers = getattr(model, "layers", None) or getattr(model, "blocks", [])
            self._fsdp.shard_model(model, layers)

    def shard_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        if self._fsdp is not None:
            self._fsdp.shard_optimizer(optimizer)

    def sync_grads(self, params: list[torch.nn.Parameter], loss: torch.Tensor) -> float | None:
        # The partitioner reduces the gradients (all-reduce, or reduce-scatter when sharded).
        if self._fsdp is not None:
            self._fsdp.shard_grads(params)
        return None

    def mark_step(self) -> None:
        self._torch_xla.sync()

    def wait(self) -> None:
        import torch_xla.core.xla_model as xm

        xm.wait_device_ops()
