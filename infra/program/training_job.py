"""A stack's ``raytpu:jobs`` entry as a RayJob: the trainer's settings from the stack
(:func:`raytpu.config.job_rules.train_config`), the launcher as entrypoint with the slice's
exact shape, and the one RayJob builder (:func:`raytpu.components.ray_job.build_rayjob`),
which ``raytpu submit --team`` uses as well.

Declared by :func:`raytpu.program.ray_program.build_ray`, written by ``raytpu manifests``.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

import pulumi
from raytpu.components.ray_job import BuiltRayJob, TpuRayJobArgs, build_rayjob
from raytpu.config.job_rules import train_config
from raytpu.config.jobs import JobConfig
from raytpu.config.stack import ConfigError, StackConfig
from raytpu.facts.names import SYSTEM_POOL
from raytpu.program.ray_cluster_config import cluster_args
from raytpu.spec.scaling import RUNTIME_ENV_VARS
from raytpu.spec.train_options import BadFlags
from raytpu.spec.training import to_argv

if TYPE_CHECKING:
    from raytpu.components.memorystore import MemorystoreRedis

TrainingRayJob = BuiltRayJob  # what the builder returns, by its older name


def training_rayjob(
    cfg: StackConfig,
    job: JobConfig,
    *,
    image: pulumi.Input[str] | None = None,
    system_pool: str | None = SYSTEM_POOL,
    key: str | None = None,
    redis: MemorystoreRedis | None = None,
) -> BuiltRayJob:
    """The RayJob running ``job`` on its own RayCluster of ``job.slices`` slices of
    ``job.slice_group``, shaped as the stack's RayCluster shapes that group.

    ``image``: the Ray image, by digest (default the stack's ``cfg.image``, refused unless
    ``raytpu:ray.image`` pins a digest; the stack passes the built image's digest).
    ``system_pool``: the CPU node pool for the head and the submitter. ``key``: how problems
    name the job (default ``job '<name>'``). ``redis``: the stack's Memorystore instance,
    when its GCS fault tolerance uses one. Raises :class:`~raytpu.config.stack.ConfigError`.
    """
    where = key or f"job {job.name!r}"
    try:
        train, opts = train_config(cfg, job)
    except BadFlags as e:
        raise ConfigError([f"{where}.train: {p}" for p in e.problems]) from None
    except StopIteration:
        raise ConfigError([f"{where}.sliceGroup: {job.slice_group!r} is not a raytpu:slices "
                           "entry"]) from None
    args = TpuRayJobArgs(
        name=job.name,
        cluster=cluster_args(cfg, gsa_email="", system_pool=system_pool, image=image,
                             redis=redis, job=True),
        group=job.slice_group, slices=train.slices,
        entrypoint=shlex.join(["python", "-m", "raytpu.workloads.launcher",
                               *to_argv(train, opts)]),
        runtime_env={"env_vars": dict(RUNTIME_ENV_VARS)},
        shutdown_after_job_finishes=job.shutdown_after_job_finishes,
        ttl_seconds_after_finished=job.ttl_seconds_after_finished,
        active_deadline_seconds=job.active_deadline_seconds,
        backoff_limit=job.backoff_limit,
    )
    try:
        return build_rayjob(args)
    except ValueError as e:
        # The image a stack's jobs run is its raytpu:ray.image unless the stack builds one.
        raise ConfigError([f"{where}: {p}" + (" (raytpu:ray.image)" if p.startswith("image:")
                                              and image is None else "")
                           for p in str(e).splitlines()]) from None
