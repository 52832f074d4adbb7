"""What a stack's ``raytpu:jobs`` derive from the stack (the trainer's settings) and the
checks no field type can make (:func:`job_problems`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from raytpu.config.jobs import LAUNCH_OPTIONS, JobConfig
from raytpu.facts.names import DNS_LABEL as DNS1035
from raytpu.facts.names import RAYJOB_NAME_MAX_LEN

if TYPE_CHECKING:
    from raytpu.config.stack import StackConfig
    from raytpu.spec.training import LaunchOptions, TrainConfig


def train_config(cfg: StackConfig, job: JobConfig) -> tuple[TrainConfig, LaunchOptions]:
    """The job's trainer and launcher settings, validated like ``raytpu submit``'s flags.
    Raises :class:`~raytpu.spec.train_options.BadFlags`."""
    from raytpu.spec.train_options import build_config, trainer_defaults
    from raytpu.spec.training import LaunchOptions

    group = next(s for s in cfg.slices if s.name == job.slice_group)
    shape = group.shape
    given = job.train.model_dump(exclude_none=True)
    launch = {k: given.pop(k) for k in LAUNCH_OPTIONS if k in given}
    # On TPU a loss fetch is a host round-trip: every 10 steps unless asked (as submit).
    trainer = {**trainer_defaults(), "log_every": 10, **given}
    train = build_config(
        tpu=shape.accelerator_type, topology=shape.topology, machine_type=shape.machine_type,
        slices=job.slices or group.initial_slices or 1, check_data=False, **trainer,
    )
    opts = LaunchOptions(
        storage_path=cfg.checkpoint_uri, run_name=launch.get("run_name", job.name),
        max_failures=launch.get("max_failures", LaunchOptions.max_failures),
        progress=False, slice_group=group.name,
    )
    return train, opts


def job_fit(cfg: StackConfig, job: JobConfig) -> dict[str, Any]:
    """The job's ``fit`` object: the estimate ``raytpu submit`` makes and refuses by
    (:func:`raytpu.spec.memory_fit.check_run`, the smallest fitting shape searched in the
    stack's zone), for the trainer the job's RayJob runs on its slice group's shape.
    Raises :class:`~raytpu.spec.train_options.BadFlags` (as :func:`train_config`)."""
    from raytpu.spec.memory_fit import check_run

    train, _ = train_config(cfg, job)
    group = next(s for s in cfg.slices if s.name == job.slice_group)
    fit, _refusal = check_run(train, group.shape, zone=cfg.zone)
    return fit


def job_fits(cfg: StackConfig) -> list[dict[str, Any]]:
    """``raytpu plan --json``'s ``jobs``: per ``raytpu:jobs`` entry its ``name``,
    ``slice_group``, ``fit`` (:func:`job_fit`) and ``checkpoint_interval`` (the configured
    one beside Young/Daly's, :mod:`raytpu.spec.checkpoint_interval`), in the stack's
    order."""
    from raytpu.spec.checkpoint_interval import estimate_for

    out = []
    for job in cfg.jobs:
        fit = job_fit(cfg, job)
        train, _ = train_config(cfg, job)
        interval = estimate_for(train, fit, job.mtbf_hours).to_dict()
        out.append({"name": job.name, "slice_group": job.slice_group, "fit": fit,
                    "checkpoint_interval": interval})
    return out


def job_problems(cfg: StackConfig) -> list[str]:
    """What no field type can check: names, the slice group, the slice count, the TTL rule
    and the trainer's options (the trainer's own validation, keyed by stack path)."""
    from raytpu.spec.train_options import BadFlags

    problems: list[str] = []
    groups = {s.name: s for s in cfg.slices}
    seen: set[str] = set()
    for i, job in enumerate(cfg.jobs):
        key = f"raytpu:jobs[{i}]"
        if not DNS1035.match(job.name) or len(job.name) > RAYJOB_NAME_MAX_LEN:
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
