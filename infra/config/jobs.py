"""``raytpu:jobs``: training jobs a stack declares, each emitted as a ``ray.io/v1`` RayJob
that creates its own RayCluster from one of the stack's slice groups (the GitOps path;
``raytpu submit`` stays the interactive one). The RayJob itself is rendered by
:func:`raytpu.program.training_job.training_rayjob` (with the one builder,
:func:`raytpu.components.ray_job.build_rayjob`).

A job's ``train`` takes the trainer's options under the names of ``raytpu submit``'s flags
in camelCase (``steps``, ``nLayers``, ``batchPerHost``, ..., ``logEvery``, ``maxFailures``,
``runName``).
"""

from __future__ import annotations

from pydantic import Field
from raytpu.config.base import ConfigModel


class TrainOptions(ConfigModel):
    """A job's ``train``: the trainer's options under ``raytpu submit``'s flag names in
    camelCase; unset ones keep the trainer's defaults (``logEvery``: 10 on TPU, as submit)."""

    steps: int | None = Field(None, ge=1)
    """Optimizer steps of the run."""
    data: str | None = None
    """Folder, file or ``gs://`` prefix of text, as the cluster sees it."""
    checkpoint_every: int | None = Field(None, ge=1)
    """Steps between checkpoints."""
    batch_per_host: int | None = Field(None, ge=1)
    """Sequences per host per step."""
    n_layers: int | None = Field(None, ge=1)
    """Transformer layers of the bundled model."""
    d_model: int | None = Field(None, ge=1)
    """Model width."""
    n_heads: int | None = Field(None, ge=1)
    """Attention heads."""
    seq_len: int | None = Field(None, ge=1)
    """Tokens per sequence."""
    lr: float | None = Field(None, gt=0)
    """Peak learning rate."""
    warmup_steps: int | None = Field(None, ge=0)
    """Linear warmup steps before the cosine decay."""
    seed: int | None = None
    """Seed of the initialization and the data order."""
    compile: bool | None = None
    """Trace the step once with ``torch.compile(backend="openxla")``; unset: the trainer's
    default."""
    log_every: int | None = Field(None, ge=1)
    """Steps between metric lines (10 on TPU, as ``raytpu submit``)."""
    max_failures: int | None = Field(None, ge=0)
    """Worker-group restarts Ray Train may do."""
    run_name: str | None = None
    """Run folder under the checkpoint bucket (the resume key); default: the job's name."""


LAUNCH_OPTIONS = ("max_failures", "run_name")


class JobConfig(ConfigModel):
    """One entry of ``raytpu:jobs``."""

    name: str
    """The RayJob's name: a DNS-1035 label of at most 47 characters
    (:data:`raytpu.facts.names.RAYJOB_NAME_MAX_LEN`)."""
    slice_group: str
    """The ``raytpu:slices`` entry (by ``name``) whose slices the job runs on."""
    slices: int | None = Field(None, ge=1)
    """Slices of that group for the job (multislice above 1); default: the entry's count."""
    train: TrainOptions = TrainOptions()
    """The trainer's options."""
    mtbf_hours: float | None = Field(None, gt=0)
    """The expected hours between the job's failures, for the checkpoint interval the plan
    shows beside ``train.checkpointEvery`` (Young/Daly); default
    :data:`raytpu.spec.checkpoint_interval.DEFAULT_MTBF_HOURS`, a day."""
    shutdown_after_job_finishes: bool = True
    """Delete the job's RayCluster when the job ends (its TPU slices go back to zero)."""
    ttl_seconds_after_finished: int | None = Field(None, ge=0)
    """Seconds the finished RayCluster is kept (needs ``shutdownAfterJobFinishes``)."""
    active_deadline_seconds: int | None = Field(None, ge=1)
    """Fail the job after this many seconds."""
    backoff_limit: int | None = Field(None, ge=0)
    """Retries of the whole job, each on a new RayCluster."""
