"""Fully-sharded data parallel through torch_xla SPMD: one sharding rule for parameters,
gradients and AdamW's moments, and a batch-sharded constraint on every layer's output.

The mesh is ``(data, fsdp)``: ``fsdp`` spans the chips of one slice (ICI), ``data`` the
slices (DCN). A weight is split along its largest dimension over ``fsdp`` (as torch_xla's
own ``SpmdFullyShardedDataParallel`` does with ``shard_maximal``) and replicated across
slices, so each slice holds one full copy spread over its chips, and only the gradient
all-reduce crosses DCN. The batch is split over both axes. XLA's partitioner then inserts
the all-gather of each weight before its use and the reduce-scatter of its gradient.

Nothing here is a choice the partitioner could not make itself; the annotations pin the
FSDP layout so that it does not pick another (e.g. gathering the batch instead).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from .sharding import BATCH_AXES, FSDP, partition_spec


class FsdpSharding:
    """Applies :func:`partition_spec` to one model's parameters, grads and optimizer state."""

    def __init__(self, mesh: Any) -> None:
        self.mesh = mesh
        self.fsdp_size = int(mesh.mesh_shape[mesh.axis_names.index(FSDP)])
        self._specs: dict[int, tuple[str | None, ...]] = {}

    def _mark(self, t: torch.Tensor, spec: tuple[str | None, ...]) -> None:
        import torch_xla.distributed.spmd as xs

        if any(spec):
            xs.mark_sharding(t, self.mesh, spec)

    def shard_model(self, model: nn.Module, layers: Iterable[nn.Module]) -> None:
        """Shard every parameter (already on the XLA device) and constrain each of
        ``layers``' outputs ``[batch, seq, d]`` to stay split over the batch."""
        import torch_xla.distributed.spmd as xs

        for p in model.parameters():
            spec = partition_spec(tuple(p.shape), self.fsdp_size)
            self._specs[id(p)] = spec
            self._mark(p, spec)
        for layer in layers:
            layer.register_forward_hook(self._constrain_output)
            # Stops XLA from fusing the backward of all layers into one giant computation
            # that would hold every gathered weight at once.
            xs.apply_backward_optimization_barrier(layer)

    def _constrain_output(self, module: nn.Module, inputs: Any, output: torch.Tensor) -> None:
        import torch_xla.distributed.spmd as xs

        xs.mark_sharding(output, self.mesh, (BATCH_AXES, *([None] * (output.dim() - 1))))

    def spec_of(self, p: torch.Tensor) -> tuple[str | None, ...]:
        return self._specs.get(id(p), ())

    def shard_grads(self, params: list[nn.Parameter]) -> None:
        """Gradients take their parameter's spec: a reduce-scatter, not an all-reduce."""
        for p in params:
            if p.grad is not None:
                self._mark(p.grad, self.spec_of(p))

    def shard_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """AdamW's moments (device data by now, see ``optim.materialize_state``) take their
        parameter's spec; scalars and empty placeholders stay replicated."""
        for group in optimizer.param_groups:
            for p in group["params"]:
                for value in optimizer.state[p].values():
                    if isinstance(value, torch.Tensor) and tuple(value.shape) == tuple(p.shape):
                        self._mark(value, self.spec_of(p))


def local_bytes(tensors: Iterable[torch.Tensor], device: str = "CPU:0") -> int:
    """Bytes of ``tensors`` held by one device (its shard, or the whole replicated tensor)."""
    import torch_xla

    tensors = list(tensors)
    total = 0
    for shards in torch_xla._XLAC._get_local_shards(tensors):
        for data, dev in shards:
            if dev == device:
                total += data.numel() * data.element_size()
    return total
