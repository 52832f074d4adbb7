"""torch's AdamW for the trainer; the schedule (:func:`lr_at`) is in
:mod:`raytpu.workloads.schedule`, shared with the JAX trainer.
"""

from __future__ import annotations

from typing import Any

import torch
from raytpu.spec.training import OptimConfig
from torch import nn

from .schedule import lr_at

__all__ = ["build_optimizer", "lr_at", "materialize_state", "optimizer_step", "set_lr"]


def build_optimizer(model: nn.Module, cfg: OptimConfig) -> torch.optim.AdamW:
    """AdamW without decay on biases, norms and embeddings' position table.

    For a model on an XLA device, torch_xla's sync-free AdamW (``torch_xla.amp.syncfree``):
    one native IR node per parameter (``_xla_adam_optimizer_step_``), where torch's AdamW
    traces ``lerp_``/``addcmul_``/``addcdiv_`` through Python meta functions (~13 ms of
    host time a step for the default model against ~1 ms); step it with
    :func:`optimizer_step`. Otherwise torch's multi-tensor (``foreach``) AdamW.
    """
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    for name, p in model.named_parameters():
        (decay if p.ndim >= 2 and not name.startswith("pos.") else no_decay).append(p)
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    cls: type[torch.optim.AdamW] = torch.optim.AdamW
    if any(p.device.type == "xla" for p in decay + no_decay):
        from torch_xla.amp import syncfree

        cls = syncfree.AdamW
    return cls(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), foreach=True)


def _sync_free(optimizer: torch.optim.Optimizer) -> bool:
    return type(optimizer).__module__.startswith("torch_xla.amp.syncfree")


def optimizer_step(optimizer: torch.optim.Optimizer) -> None:
    """One update. The sync-free AdamW takes its native path only when given
    ``found_inf`` (its AMP skip-this-step flag); without one it falls back to torch's."""
    if not _sync_free(optimizer):
        optimizer.step()
        return
    device = optimizer.param_groups[0]["params"][0].device
    # Made fresh each step, so it stays a graph constant and XLA folds away the op's
    # skip-this-step selects (no AMP loss scaling here).
    found_inf = torch.zeros((), dtype=torch.float32, device=device)
    optimizer.step(found_inf=found_inf)  # type: ignore[call-overload, unused-ignore]


def _init_state(state: dict[str, Any], p: torch.Tensor) -> None:
    zeros = torch.zeros(p.shape, dtype=p.dtype)
    state["step"] = torch.tensor(0.0, dtype=torch.float32)
    state["exp_avg"] = zeros.to(p.device)
    state["exp_avg_sq"] = zeros.clone().to(p.device)


def _step_to(state: dict[str, Any], device: torch.device) -> None:
    """Move the step count to the XLA device as device data: ``.to()`` would make a count
    of 0 or 1 a graph constant, and step 2 would then compile a second graph."""
    if state["step"].device != device:
        import torch_xla.core.xla_model as xm

        moved: Any = xm.send_cpu_data_to_device([state["step"]], device)
        state["step"] = moved[0]


def materialize_state(optimizer: torch.optim.Optimizer) -> None:
    """Create AdamW's zero moments now, as device data, instead of inside step 1.

    Otherwise step 1's graph (which creates the state) differs from every later step's
    (which reads it) and XLA compiles the optimizer twice: ~3 s more per worker start on
    XLA:CPU, paid again by every restarted attempt. Same tensors as ``Adam._init_group``
    would create (``step`` stays a CPU scalar, as in the non-capturable path), except that
    the sync-free AdamW counts steps on the device and reads a ``max_exp_avg_sq`` (empty
    without amsgrad). Parameters that already have state (a restored checkpoint, from
    either optimizer) only get what the sync-free one needs.
    """
    sync_free = _sync_free(optimizer)
    for group in optimizer.param_groups:
        for p in group["params"]:
            state = optimizer.state[p]
            if not state:
                _init_state(state, p)
            if sync_free:
                _step_to(state, p.device)
                if "max_exp_avg_sq" not in state:
                    # Transferred (device data), as the moments: created on the device it
                    # would be a graph node in step 1 only, and step 2 would recompile.
                    state["max_exp_avg_sq"] = torch.empty(0, dtype=p.dtype).to(p.device)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set the rate on every group.

    A Python float reaches the XLA graph as device data (torch_xla special-cases only 0
    and 1 as constants), so a new rate every step does not recompile: the tests check
    the CompileTime counter.
    """
    for group in optimizer.param_groups:
        group["lr"] = lr
