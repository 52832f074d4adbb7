"""``raytpu:jobs``: training jobs a stack declares, each emitted as a ``ray.io/v1`` RayJob
that creates its own RayCluster from one of the stack's slice groups (the GitOps path;
``raytpu submit`` stays the interactive one). The RayJob itself is rendered by
:func:`raytpu.training_job.training_rayjob`.

A job's ``train`` takes the trainer's options under the names of ``raytpu submit``'s flags
in camelCase (``steps``, ``nLayers``, ``batchPerHost``, ..., ``logEvery``, ``maxFailures``,
``runName``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic import Field

from .config_base import ConfigModel

if TYPE_CHECKING:
    from raytpu.workloads.config import LaunchOptions, TrainConfig

    from .config import StackConfig

# KubeRay 1.7.0 utils/constant.go: MaxRayJobNameLength = MaxRayClusterNameLength (53) - 6,
# room for the "-xxxxx" suffix of the RayCluster a RayJob creates; and a DNS-1035 label
# (utils/validation.go ValidateRayJobMetadata).
RAYJOB_NAME_MAX_LEN = 47
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

class TrainOptions(ConfigModel):
    """A job's ``train``: the trainer's options under ``raytpu submit``'s flag names in
    camelCase; unset ones keep the trainer's defaults (``logEvery``: 10 on TPU, as submit)."""

    steps: int | None = Field(None, ge=1)
    data: str | None = None
    """Folder, file or ``gs://`` prefix of text, as the cluster sees it."""
    checkpoint_every: int | None = Field(None, ge=1)
    batch_per_host: int | None = Field(None, ge=1)
    n_layers: int | None = Field(None, ge=1)
    d_model: int | None = Field(None, ge=1)
    n_heads: int | None = Field(None, ge=1)
    seq_len: int | None = Field(None, ge=1)
    lr: float | None = Field(None, gt=0)
    warmup_steps: int | None = Field(None, ge=0)
    seed: int | None = None
    compile: bool | None = None
    log_every: int | None = Field(None, ge=1)
    max_failures: int | None = Field(None, ge=0)
    """Worker-group restarts Ray Train may do."""
    run_name: str | None = None
    """Run folder under the checkpoint bucket (the resume key); default: the job's name."""


_LAUNCH_OPTIONS = ("max_failures", "run_name")


class JobConfig(ConfigModel):
    """One entry of ``raytpu:jobs``."""

    name: str
    """The RayJob's name: a DNS-1035 label of at most 47 characters."""
    slice_group: str
    """The ``raytpu:slices`` entry (by ``name``) whose slices the job runs on."""
    slices: int | None = Field(None, ge=1)
    """Slices of that group for the job (multislice above 1); default: the entry's count."""
    train: TrainOptions = TrainOptions()
    """The trainer's options."""
    shutdown_after_job_finishes: bool = True
    """Delete the job's RayCluster when the job ends (its TPU slices go back to zero)."""
    ttl_seconds_after_finished: int | None = Field(None, ge=0)
    """Seconds the finished RayCluster is kept (needs ``shutdownAfterJobFinishes``)."""
    active_deadline_seconds: int | None = Field(None, ge=1)
    """Fail the job after this many seconds."""
    backoff_limit: int | None = Field(None, ge=0)
    """Retries of the whole job, each on a new RayCluster."""


def train_config(cfg: StackConfig, job: JobConfig) -> tuple[TrainConfig, LaunchOptions]:
    """The job's trainer and launcher settings, validated like ``raytpu submit``'s flags.
    Raises :class:`~raytpu.workloads.train_options.BadFlags`."""
    from raytpu.workloads.config import LaunchOptions
    from raytpu.workloads.train_options import build_config, trainer_defaults

    group = next(s for s in cfg.slices if s.name == job.slice_group)
    shape = group.shape
    given = job.train.model_dump(exclude_none=True)
    launch = {k: given.pop(k) for k in _LAUNCH_OPTIONS if k in given}
    # On TPU a loss fetch is a host round-trip: every 10 steps unless asked (as submit).
    trainer = {**trainer_defaults(), "log_every": 10, **given}
    train = build_config(
        tpu=shape.accelerator_type, topology=shape.topology, chips_per_host=shape.chips_per_vm,
        slices=job.slices or group.initial_slices or 1, check_data=False, **trainer,
    )
    opts = LaunchOptions(
        storage_path=cfg.checkpoint_uri, run_name=launch.get("run_name", job.name),
        max_failures=launch.get("max_failures", LaunchOptions.max_failures),
        progress=False, slice_group=group.name,
    )
    return train, opts


def job_problems(cfg: StackConfig) -> list[str]:
    """What no field type can check: names, the slice group, the slice count, the TTL rule
    and the trainer's options (the trainer's own validation, keyed by stack path)."""
    from raytpu.workloads.train_options import BadFlags

    problems: list[str] = []
    groups = {s.name: s for s in cfg.slices}
    seen: set[str] = set()
    for i, job in enumerate(cfg.jobs):
        key = f"raytpu:jobs[{i}]"
        if not _DNS1035.match(job.name) or len(job.name) > RAYJOB_NAME_MAX_LEN:
            problems.append(f"{key}.name: {job.name!r} must be a DNS label (lowercase letters, "
                            "digits, '-', starting with a letter) of at most "
                            f"{RAYJOB_NAME_MAX_LEN} characters (KubeRay's RayJob limit)")
        if job.name in seen:
            problems.append(f"{key}.name: {job.name!r} is used by another job")
        seen.add(job.name)
        group = groups.get(job.slice_group)
        if group is None:
            problems.append(f"{key}.sliceGroup: {job.slice_group!r} is not a raytpu:slices "
                            f"entry; valid: {', '.join(groups)}")
            continue
        if job.slices is not None and job.slices > group.max_slices:
            problems.append(f"{key}.slices: {job.slices} is more than raytpu:slices entry "
                            f"{group.name!r} has ({group.max_slices})")
        if job.ttl_seconds_after_finished and not job.shutdown_after_job_finishes:
            # KubeRay validateDeletionConfiguration.
            problems.append(f"{key}.ttlSecondsAfterFinished: needs shutdownAfterJobFinishes: "
                            "true (KubeRay rejects it otherwise)")
        try:
            train_config(cfg, job)
        except BadFlags as e:
            problems += [_train_problem(key, p) for p in e.problems]
    return problems


def _train_problem(key: str, problem: str) -> str:
    """``--n-layers: 0 must be positive`` -> ``raytpu:jobs[0].train.nLayers: 0 must ...``."""
    flag, sep, rest = problem.partition(": ")
    if not flag.startswith("--") or not sep:
        return f"{key}.train: {problem}"
    head, *tail = flag[2:].split("-")
    return f"{key}.train.{head}{''.join(t.title() for t in tail)}: {rest}"
