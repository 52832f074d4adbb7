"""The trainer's options, validated: flags (``raytpu train``/``submit``) and stack keys
(``raytpu:jobs[].train``) in, a :class:`~raytpu.spec.training.TrainConfig` out.

Plain Python (no typer, torch or ray), so the CLI commands, ``raytpu submit`` and the
stack's RayJobs share one validation without importing each other.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .presets import BYTE_MODEL, PRESETS
from .training import ModelConfig, OptimConfig, TrainConfig


class BadFlags(Exception):
    """One or more bad options, each a full sentence naming the option and its value."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


def trainer_defaults() -> dict[str, Any]:
    """:func:`build_config`'s options (but the slice) at the trainer's defaults."""
    d, m, o = TrainConfig(), ModelConfig(), OptimConfig()
    return {
        "steps": d.steps, "data": d.data, "checkpoint_every": d.checkpoint_every,
        "batch_per_host": d.batch_per_host, "n_layers": m.n_layers, "d_model": m.d_model,
        "n_heads": m.n_heads, "seq_len": m.seq_len, "lr": o.lr,
        "warmup_steps": o.warmup_steps, "seed": d.seed, "compile": d.compile,
        "log_every": d.log_every, "model": d.preset, "fsdp": d.fsdp, "remat": d.remat,
        "tokenizer": d.tokenizer, "framework": d.framework,
    }


FRAMEWORKS = ("torch", "jax")


def _model_problems(problems: list[str], model: str | None, framework: str,
                    tokenizer: str | None, check_files: bool) -> None:
    """``--model``, ``--framework`` and ``--tokenizer``: names that exist, and together."""
    if model is not None and model != BYTE_MODEL and model not in PRESETS:
        problems.append(f"--model: {model!r} is not a model preset; valid: "
                        f"{', '.join([BYTE_MODEL, *PRESETS])}")
    if framework not in FRAMEWORKS:
        problems.append(f"--framework: {framework!r} is not one of {', '.join(FRAMEWORKS)}")
    elif framework == "jax" and model in (None, BYTE_MODEL):
        problems.append("--framework jax: trains the Llama presets; add --model "
                        f"({', '.join(PRESETS)})")
    if tokenizer is not None:
        if not tokenizer.endswith((".json", ".model")):
            problems.append(f"--tokenizer: {tokenizer!r} is not a tokenizer file "
                            "(tokenizer.json for 'tokenizers', *.model for 'sentencepiece')")
        elif check_files and "://" not in tokenizer and not Path(tokenizer).is_file():
            problems.append(f"--tokenizer: {tokenizer!r} does not exist")


def _positive(problems: list[str], **flags: float) -> None:
    for flag, value in flags.items():
        if value <= 0:
            problems.append(f"--{flag.replace('_', '-')}: {value} must be positive")


def build_config(
    *,
    tpu: str,
    slices: int,
    steps: int,
    data: str | None,
    checkpoint_every: int,
    batch_per_host: int,
    n_layers: int,
    d_model: int,
    n_heads: int,
    seq_len: int,
    lr: float,
    warmup_steps: int,
    seed: int,
    log_every: int,
    compile: bool | None = None,
    fail_host_at_step: int | None = None,
    topology: str | None = None,
    machine_type: str | None = None,
    check_data: bool = True,
    data_problem: Callable[[str, str | None], str | None] | None = None,
    model: str | None = None,
    fsdp: bool | None = None,
    remat: bool = False,
    tokenizer: str | None = None,
    framework: str = "torch",
) -> TrainConfig:
    """Validate the trainer options; raises :class:`BadFlags` listing every problem.

    ``topology``/``machine_type``: the slice as the stack declares it (None: the
    catalog's default for ``tpu``)."""
    from raytpu.facts.catalog import CatalogError, slice_shape

    problems: list[str] = []
    try:
        chips_per_host = slice_shape(tpu, topology, machine_type).chips_per_vm
    except CatalogError as e:
        flag = {"tpu": "--tpu", "topology": "--topology"}.get(e.field, "--machine-type")
        problems.append(f"{flag}: {e}")
        chips_per_host = 1
    if framework == "jax" and batch_per_host > 0 and batch_per_host % chips_per_host:
        # The JAX batch is split over every chip of the host (P(("data", "fsdp"))).
        problems.append(f"--batch-per-host: {batch_per_host} is not a multiple of the "
                        f"{chips_per_host} chips per host of {tpu} (--framework jax splits "
                        "each host's batch over its chips)")
    _positive(
        problems, slices=slices, steps=steps, checkpoint_every=checkpoint_every,
        batch_per_host=batch_per_host, n_layers=n_layers, d_model=d_model, n_heads=n_heads,
        seq_len=seq_len, lr=lr, log_every=log_every,
    )
    if warmup_steps < 0:
        problems.append(f"--warmup-steps: {warmup_steps} must not be negative")
    if n_heads > 0 and d_model % n_heads:
        problems.append(f"--d-model: {d_model} is not a multiple of --n-heads {n_heads}")
    # The trainer reads --data (raytpu.workloads.sources): where it runs here, the caller
    # passes that check; submit checks nothing, the paths are the cluster's, not ours.
    if data is not None and check_data and data_problem is not None:
        problem = data_problem(data, tokenizer)
        if problem:
            problems.append(f"--data: {problem}")
    _model_problems(problems, model, framework, tokenizer, check_data)
    if fail_host_at_step is not None and not 1 <= fail_host_at_step < steps:
        problems.append(
            f"--fail-host-at-step: {fail_host_at_step} must be in 1..{steps - 1} "
            "(a step before the last)"
        )
    if problems:
        raise BadFlags(problems)
    if check_data:  # local paths absolute: the simulated hosts run in folders of their own
        data, tokenizer = (p if p is None or "://" in p else str(Path(p).resolve())
                           for p in (data, tokenizer))
    return TrainConfig(
        tpu=tpu, slices=slices, topology=topology, machine_type=machine_type,
        steps=steps, batch_per_host=batch_per_host, seed=seed,
        data=data, checkpoint_every=checkpoint_every, log_every=log_every,
        fail_host_at_step=fail_host_at_step, compile=compile,
        preset=None if model in (None, BYTE_MODEL) else model, fsdp=fsdp, remat=remat,
        tokenizer=tokenizer, framework=framework,
        model=ModelConfig(n_layers=n_layers, d_model=d_model, n_heads=n_heads, seq_len=seq_len),
        optim=OptimConfig(lr=lr, warmup_steps=warmup_steps),
    )
