"""The trainer's settings as plain dataclasses: no torch or ray here.

The CLI builds them from flags, the launcher ships them to every host as a dict
(``train_loop_config`` must be plain data) and the trainer rebuilds them there.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .presets import BYTE_MODEL, LlamaConfig, preset

if TYPE_CHECKING:
    from raytpu.facts.catalog import SliceShape

VOCAB_SIZE = 256  # byte-level tokens: no tokenizer, nothing to download


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer. The defaults train visibly in ~50 steps on 2 CPU cores."""

    n_layers: int = 2
    d_model: int = 128
    n_heads: int = 4
    seq_len: int = 128
    vocab_size: int = VOCAB_SIZE

    def __post_init__(self) -> None:
        for name in ("n_layers", "d_model", "n_heads", "seq_len", "vocab_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model {self.d_model} must be a multiple of n_heads {self.n_heads}"
            )


@dataclass(frozen=True)
class OptimConfig:
    """AdamW with linear warmup then cosine decay to ``min_lr_ratio * lr``."""

    lr: float = 3e-3
    warmup_steps: int = 10
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0


@dataclass(frozen=True)
class TrainConfig:
    """One training run, as every host sees it."""

    tpu: str = "v4-16"
    slices: int = 1
    topology: str | None = None
    """The slice's topology as the stack declares it; None: the catalog's default."""
    machine_type: str | None = None
    """The hosts' machine type as the stack declares it (``SliceShape.machine_type``);
    None: the catalog's default for ``tpu`` (v5e/v6e 2x4 is one 8-chip VM by default, or
    two 4-chip VMs)."""
    steps: int = 50
    batch_per_host: int = 8
    seed: int = 0
    data: str | None = None
    """Folder, file or ``gs://`` prefix of text files; None = this Python's stdlib sources."""
    checkpoint_every: int = 10
    log_every: int = 1
    """On TPU, losses are fetched to the host in groups of this many steps."""
    compile: bool | None = None
    """Trace forward/backward once with ``torch.compile(backend="openxla")`` (dynamo)
    instead of re-tracing the lazy graph every step. None: the platform's default, on
    for XLA:CPU (the simulated hosts, where it was measured), off on TPU."""
    fail_host_at_step: int | None = None
    """Local rehearsal only: hold every host after this step (first attempt) until killed."""
    hold_timeout_s: float = 120.0
    preset: str | None = None
    """A Llama-style preset (:mod:`raytpu.spec.presets`); None: the byte GPT sized by
    ``model``. Either way ``model.seq_len`` is the training context."""
    fsdp: bool | None = None
    """Shard parameters, gradients and optimizer state over each slice's chips (SPMD);
    None: on for a preset, off for the byte GPT. The CPU simulation's hosts (one XLA:CPU
    device each, gloo between them) always replicate."""
    remat: bool = False
    """Recompute each layer's activations in the backward pass (activation checkpointing)."""
    tokenizer: str | None = None
    """A tokenizer file (``tokenizer.json`` for ``tokenizers``, ``*.model`` for
    ``sentencepiece``); None: bytes."""
    framework: str = "torch"
    """``torch`` (torch_xla) or ``jax``."""
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def use_fsdp(self) -> bool:
        return self.preset is not None if self.fsdp is None else self.fsdp

    def architecture(self) -> ModelConfig | LlamaConfig:
        """The model's shape: the preset's, or the byte GPT's."""
        if self.preset is None or self.preset == BYTE_MODEL:
            return self.model
        return preset(self.preset)

    def shape(self) -> SliceShape:
        """The slice this run is for, as the stack declared it: accelerator type, topology
        and machine type name it whole (the catalog's one resolver, which the stack's
        ``raytpu:slices[]`` entries use too; nothing is re-derived from a chip count)."""
        from raytpu.facts.catalog import slice_shape

        return slice_shape(self.tpu, self.topology, self.machine_type)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> TrainConfig:
        raw = dict(raw)
        model = ModelConfig(**raw.pop("model", {}))
        optim = OptimConfig(**raw.pop("optim", {}))
        return cls(model=model, optim=optim, **raw)


@dataclass(frozen=True)
class LaunchOptions:
    """How the launcher runs a :class:`TrainConfig` (not seen by the hosts)."""

    storage_path: str
    run_name: str = "train"
    max_failures: int = 3
    metrics_out: str | None = None
    progress: bool = True
    slice_group: str | None = None
    """The RayCluster worker group (``raytpu:slices[].name``) the run asks the autoscaler to
    scale (:mod:`raytpu.spec.scaling`); None: use whatever nodes exist."""
    dry_run: bool = False
    """Print the Ray Train scaling as JSON and contact nothing (``--dry-run``)."""
    command: tuple[str, ...] = ()
    """A user's command (after ``--``), run on every host instead of the bundled trainer;
    only the slice's shape of the :class:`TrainConfig` applies to it."""
    resident: bool = False
    """Train on per-host processes that outlive this driver (:mod:`raytpu.workloads.
    resident`): a run resubmitted after a lost head resumes on them (``--resident``)."""


# (flag, TrainConfig path, type): the launcher's command line, shared by `raytpu submit`
# (which writes it) and `python -m raytpu.workloads.launcher` (which parses it).
_FLAGS: tuple[tuple[str, str, type], ...] = (
    ("--tpu", "tpu", str),
    ("--slices", "slices", int),
    ("--topology", "topology", str),
    ("--machine-type", "machine_type", str),
    ("--steps", "steps", int),
    ("--batch-per-host", "batch_per_host", int),
    ("--seed", "seed", int),
    ("--data", "data", str),
    ("--checkpoint-every", "checkpoint_every", int),
    ("--log-every", "log_every", int),
    ("--compile", "compile", bool),
    ("--model", "preset", str),
    ("--fsdp", "fsdp", bool),
    ("--remat", "remat", bool),
    ("--tokenizer", "tokenizer", str),
    ("--framework", "framework", str),
    ("--n-layers", "model.n_layers", int),
    ("--d-model", "model.d_model", int),
    ("--n-heads", "model.n_heads", int),
    ("--seq-len", "model.seq_len", int),
    ("--lr", "optim.lr", float),
    ("--warmup-steps", "optim.warmup_steps", int),
    # The rehearsals': hosts hold after step K (written only when set).
    ("--fail-host-at-step", "fail_host_at_step", int),
)


# Written only when they differ from the default: the command lines of byte-GPT jobs
# stay as they were before these options existed.
_OMIT_AT_DEFAULT = {"remat": TrainConfig.remat, "framework": TrainConfig.framework}
# The slice's shape: all a command run (``opts.command``) takes from a TrainConfig.
_SHAPE_FLAGS = ("--tpu", "--slices", "--topology", "--machine-type")


def to_argv(cfg: TrainConfig, opts: LaunchOptions) -> list[str]:
    """The launcher command line that reproduces ``cfg`` and ``opts``."""
    flat = cfg.to_dict()
    argv: list[str] = []
    for flag, path, _ in _FLAGS:
        if opts.command and flag not in _SHAPE_FLAGS:
            continue
        value: Any = flat
        for part in path.split("."):
            value = value[part]
        if path in _OMIT_AT_DEFAULT and value == _OMIT_AT_DEFAULT[path]:
            continue
        if isinstance(value, bool):
            argv.append(flag if value else flag.replace("--", "--no-", 1))
        elif value is not None:
            argv += [flag, str(value)]
    argv += ["--storage-path", opts.storage_path, "--run-name", opts.run_name,
             "--max-failures", str(opts.max_failures)]
    if opts.metrics_out:
        argv += ["--metrics-out", opts.metrics_out]
    if not opts.progress:
        argv.append("--no-progress")
    if opts.slice_group:
        argv += ["--slice-group", opts.slice_group]
    if opts.dry_run:
        argv.append("--dry-run")
    if opts.resident:
        argv.append("--resident")
    if opts.command:
        argv += ["--", *opts.command]
    return argv


def from_argv(argv: list[str]) -> tuple[TrainConfig, LaunchOptions]:
    """Parse the launcher command line (see :func:`to_argv`)."""
    import argparse

    command: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1:]

    parser = argparse.ArgumentParser(prog="python -m raytpu.workloads.launcher")
    for flag, path, kind in _FLAGS:
        if kind is bool:  # unset (None) keeps the config's default
            parser.add_argument(flag, dest=path, action="store_true", default=None)
            parser.add_argument(
                flag.replace("--", "--no-", 1), dest=path, action="store_false", default=None
            )
        else:
            parser.add_argument(flag, dest=path, type=kind)
    parser.add_argument("--storage-path", required=True)
    parser.add_argument("--run-name", default=LaunchOptions.run_name)
    parser.add_argument("--max-failures", type=int, default=LaunchOptions.max_failures)
    parser.add_argument("--metrics-out")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--slice-group")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the Ray Train scaling as JSON; contact nothing")
    parser.add_argument("--resident", action="store_true",
                        help="train on per-host processes that outlive this driver")
    ns = vars(parser.parse_args(argv))
    if ns["resident"] and (command or ns["framework"] == "jax"):
        what = f"a command ({command[0]!r})" if command else "--framework jax"
        parser.error(f"--resident runs the bundled torch trainer, not {what}")
    sections: dict[str, dict[str, Any]] = {"": {}, "model": {}, "optim": {}}
    for _, path, _ in _FLAGS:
        if ns[path] is not None:
            section, _, name = path.rpartition(".")
            sections[section][name] = ns[path]
    cfg = TrainConfig.from_dict(
        {**sections[""], "model": sections["model"], "optim": sections["optim"]}
    )
    opts = LaunchOptions(
        storage_path=ns["storage_path"],
        run_name=ns["run_name"],
        max_failures=ns["max_failures"],
        metrics_out=ns["metrics_out"],
        progress=not ns["no_progress"],
        slice_group=ns["slice_group"],
        dry_run=ns["dry_run"],
        command=tuple(command),
        resident=ns["resident"],
    )
    return cfg, opts
