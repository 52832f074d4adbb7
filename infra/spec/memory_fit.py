"""Will a model fit a slice, and how fast could it run? A pure estimate, before anything runs.

:func:`estimate` takes the model, the slice shape (catalog), the number of slices, the
sequences per host and the context, and returns bytes per chip by kind, against the
generation's HBM per chip from :mod:`raytpu.facts.catalog` (which cites its Cloud TPU page), and
FLOPs per step (:mod:`raytpu.spec.flops`, the formula MFU uses) against the slices'
peak bf16 FLOP/s (catalog).

Bytes per chip, with ``s`` the FSDP shards (the chips of one slice; 1 when replicated), P
the parameters, ``b`` the sequences per chip, T the context:

* params ``4P/s`` (fp32 master weights), grads ``4P/s``, optimizer ``8P/s`` (AdamW's two
  fp32 moments).
* activations in the compute dtype (``compute_bytes``: 2 for bf16 on TPU): per layer and
  token the layer's input, the two norm outputs, q, k, v, the attention output and the
  residual sum (``7d + 2 kv_dim``), the SwiGLU's gate, up and product (``3 ffn``), plus the
  attention probabilities in fp32 (``4 n_heads T`` bytes: the softmax runs in fp32 and
  the trainers' attention keeps them); times ``b T``. Held: every layer's set, plus one
  more for the gradients of the layer being differentiated. With ``remat``: each layer's
  input only, plus one layer recomputed and its gradients. Plus the logits in fp32, their
  softmax and gradient (``12 b T vocab``) and, when sharded, two layers' weights gathered
  in fp32 (the one in use and the next).
* the trainer's step program also holds small buffers (the batch, scalars): not counted;
  :data:`USABLE_FRACTION` leaves room for them and for the runtime.

The byte GPT (:class:`~raytpu.spec.training.ModelConfig`) is counted with the same
terms (4d MLP, no GQA).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import asdict, dataclass
from typing import Any

from raytpu.facts.catalog import (
    GENERATIONS,
    Generation,
    SliceShape,
    accelerator_types,
    slice_shape,
)

from .flops import AnyModel, param_count, train_flops_per_step
from .presets import LlamaConfig
from .training import ModelConfig, TrainConfig

USABLE_FRACTION = 0.9
"""Share of HBM a job may plan to use: the runtime, XLA's scratch and fragmentation take
the rest. A policy, not a fact."""
KINDS = ("params", "grads", "optimizer", "activations")


def _shape_terms(model: AnyModel) -> tuple[int, int, int, int, int]:
    """(d_model, kv_dim, ffn_dim, n_heads, layers) of either family."""
    if isinstance(model, LlamaConfig):
        return model.d_model, model.kv_dim, model.ffn_dim, model.n_heads, model.n_layers
    return model.d_model, model.d_model, 4 * model.d_model, model.n_heads, model.n_layers


def _layer_params(model: AnyModel) -> int:
    d, kv, f, _, _ = _shape_terms(model)
    return 2 * d * d + 2 * d * kv + (3 if isinstance(model, LlamaConfig) else 2) * d * f


def activation_bytes(
    model: AnyModel, seqs_per_chip: int, seq_len: int, *, remat: bool, shards: int,
    compute_bytes: int = 2,
) -> int:
    """The module docstring's activation term for one chip."""
    d, kv, f, heads, layers = _shape_terms(model)
    tokens = seqs_per_chip * seq_len
    per_layer = tokens * (compute_bytes * (7 * d + 2 * kv + 3 * f) + 4 * heads * seq_len)
    if remat:
        held = layers * compute_bytes * tokens * d + 2 * per_layer
    else:
        held = (layers + 1) * per_layer
    logits = 12 * tokens * model.vocab_size
    gathered = 2 * 4 * _layer_params(model) if shards > 1 else 0
    return held + logits + gathered


@dataclass(frozen=True)
class Fit:
    """The estimate for one (model, slice, batch, context); :meth:`to_dict` is the JSON."""

    accelerator_type: str
    topology: str
    slices: int
    chips: int
    batch_per_host: int
    seq_len: int
    fsdp: bool
    remat: bool
    bytes_per_chip: dict[str, int]
    hbm_per_chip: int
    hbm_source: str
    flops_per_step: float
    peak_flops: float

    @property
    def usable_bytes(self) -> int:
        return int(self.hbm_per_chip * USABLE_FRACTION)

    @property
    def fits(self) -> bool:
        return self.bytes_per_chip["total"] <= self.usable_bytes

    @property
    def step_time_at_peak_s(self) -> float:
        """A floor on the step time: the step's FLOPs at 100% of peak."""
        return self.flops_per_step / self.peak_flops

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(fits=self.fits, usable_fraction=USABLE_FRACTION,
                   step_time_at_peak_s=self.step_time_at_peak_s)
        return out


def estimate(
    model: AnyModel,
    shape: SliceShape,
    *,
    slices: int = 1,
    batch_per_host: int,
    seq_len: int,
    fsdp: bool = True,
    remat: bool = False,
    compute_bytes: int = 2,
) -> Fit:
    """Bytes per chip and FLOPs per step of training ``model`` on ``slices`` x ``shape``.

    ``batch_per_host`` sequences per host per step (the trainer's ``--batch-per-host``):
    the global batch is ``batch_per_host * hosts * slices``, split evenly over the chips.
    ``compute_bytes``: the activations' dtype (2, bf16, as on TPU)."""
    shards = shape.chips if fsdp else 1
    n = param_count(model)
    seqs_per_chip = math.ceil(batch_per_host / shape.chips_per_vm)
    by_kind = {
        "params": 4 * n // shards,
        "grads": 4 * n // shards,
        "optimizer": 8 * n // shards,
        "activations": activation_bytes(model, seqs_per_chip, seq_len, remat=remat,
                                        shards=shards, compute_bytes=compute_bytes),
    }
    by_kind["total"] = sum(by_kind[k] for k in KINDS)
    global_batch = batch_per_host * shape.hosts * slices
    return Fit(
        accelerator_type=shape.accelerator_type, topology=shape.topology, slices=slices,
        chips=shape.chips * slices, batch_per_host=batch_per_host, seq_len=seq_len,
        fsdp=fsdp, remat=remat, bytes_per_chip=by_kind,
        hbm_per_chip=shape.generation.hbm_bytes_per_chip, hbm_source=shape.generation.source,
        flops_per_step=train_flops_per_step(model, seq_len, global_batch),
        peak_flops=shape.peak_bf16_flops * slices,
    )


def shape_name(accelerator_type: str, slices: int) -> str:
    """How a run's slices are named: ``v5litepod-16``, or ``2 x v5litepod-16`` for two slices
    (never one bigger slice's name: 2 x v5litepod-16 is not a v5litepod-32)."""
    return f"{slices} x {accelerator_type}" if slices > 1 else accelerator_type


def generations_in(zone: str | None, own: Generation) -> list[Generation]:
    """The generations to search: every one the catalog lists in ``zone`` (all of them when
    no zone is known), and always ``own`` (the stack already runs it there; the catalog's
    zone lists change often, a miss is only a warning)."""
    return [g for g in GENERATIONS.values() if g is own or zone is None or zone in g.zones]


def _candidate(name: str, chips_per_vm: int) -> SliceShape:
    """``name`` on VMs of ``chips_per_vm`` chips where its generation has them and they can
    host it (so each chip's share of ``batch_per_host`` stays the same), else the catalog's
    default VM."""
    shape = slice_shape(name)
    machine = shape.generation.machine_types.get(chips_per_vm)
    if machine is not None and shape.chips_per_vm != chips_per_vm:
        with contextlib.suppress(ValueError):
            shape = slice_shape(name, machine_type=machine)
    return shape


def smallest_fitting(
    model: AnyModel, shape: SliceShape, *, slices: int = 1, batch_per_host: int,
    seq_len: int, fsdp: bool = True, remat: bool = False, zone: str | None = None,
) -> Fit | None:
    """The slice with the fewest chips, of any generation offered in ``zone``
    (:func:`generations_in`), on which ``slices`` of it fit the job; a tie goes to
    ``shape``'s own generation, then to the catalog's order. None if none does (the
    activations alone exceed a chip: shorten the batch or turn on remat).

    The slice count is the job's: with FSDP over one slice's chips, more slices add data
    parallel replicas, not memory per chip."""
    own = shape.generation
    candidates = [
        _candidate(name, shape.chips_per_vm)
        for gen in generations_in(zone, own) for name in accelerator_types(gen.name)
    ]
    candidates.sort(key=lambda c: (c.chips, c.generation is not own))  # stable: catalog order
    for candidate in candidates:
        fit = estimate(model, candidate, slices=slices, batch_per_host=batch_per_host,
                       seq_len=seq_len, fsdp=fsdp, remat=remat)
        if fit.fits:
            return fit
    return None


def gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def render_refusal(fit: Fit, smallest: Fit | None, model_name: str,
                   zone: str | None = None) -> list[str]:
    """The lines a refused job prints (one problem, then the numbers and the way out);
    ``zone``: where :func:`smallest_fitting` searched (None: the whole catalog)."""
    b = fit.bytes_per_chip
    lines = [
        f"--model {model_name}: does not fit {shape_name(fit.accelerator_type, fit.slices)} "
        f"({fit.topology}): "
        f"{gib(b['total'])} per chip (params {gib(b['params'])}, grads {gib(b['grads'])}, "
        f"optimizer {gib(b['optimizer'])}, activations {gib(b['activations'])}) > "
        f"{gib(fit.usable_bytes)} usable of {gib(fit.hbm_per_chip)} HBM per chip "
        f"({fit.hbm_source})",
    ]
    if smallest is None:
        where = f"offered in {zone}" if zone else "in the catalog"
        lines.append(f"no TPU slice {where} fits it at this batch: lower "
                     "--batch-per-host or --seq-len, or add --remat")
    else:
        lines.append(
            f"the smallest that fits is {smallest_name(smallest)} ({smallest.topology}, "
            f"{smallest.chips} chips): {gib(smallest.bytes_per_chip['total'])} per chip"
        )
    return lines


def smallest_name(fit: Fit) -> str:
    """The ``fit`` object's ``smallest_fitting``: the shape and, above one, the slices."""
    return shape_name(fit.accelerator_type, fit.slices)


def fit_for(model: ModelConfig | LlamaConfig, shape: SliceShape, *, zone: str | None = None,
            **kwargs: Any) -> dict[str, Any]:
    """``estimate(...).to_dict()`` plus ``smallest_fitting`` (:func:`smallest_name` or None,
    searched in ``zone``): the ``fit`` object of ``raytpu submit --dry-run``."""
    return _fit_object(estimate(model, shape, **kwargs),
                       smallest_fitting(model, shape, zone=zone, **kwargs))


def _fit_object(fit: Fit, smallest: Fit | None) -> dict[str, Any]:
    out = fit.to_dict()
    out["smallest_fitting"] = smallest_name(smallest) if smallest else None
    return out


def check_run(cfg: TrainConfig, shape: SliceShape, zone: str | None = None,
              ) -> tuple[dict[str, Any], list[str] | None]:
    """The ``fit`` object of a run (its model, slices, batch, context, FSDP and remat on
    ``shape``; the smallest fitting shape searched in ``zone``, the stack's) and, if it does
    not fit, the refusal's lines (None when it fits): what ``raytpu submit`` prints in its
    dry run and refuses with (exit 2), and what ``raytpu plan``'s job table shows."""
    kwargs: dict[str, Any] = dict(slices=cfg.slices, batch_per_host=cfg.batch_per_host,
                                  seq_len=cfg.model.seq_len, fsdp=cfg.use_fsdp,
                                  remat=cfg.remat)
    model = cfg.architecture()
    fit = estimate(model, shape, **kwargs)
    smallest = smallest_fitting(model, shape, zone=zone, **kwargs)
    refusal = (None if fit.fits
               else render_refusal(fit, smallest, cfg.preset or "byte", zone=zone))
    return _fit_object(fit, smallest), refusal
