"""``raytpu submit``: the bundled trainer, or a user's own command on every host, as a Ray
job on a stack's RayCluster.

The submission is built from the stack's validated config (TPU shape, slices, bucket)
and is plain data, so ``--dry-run`` prints it without contacting anything. The job's
entrypoint is the launcher; the image (workloads/Dockerfile) already holds this package,
so the bundled trainer's runtime environment only carries environment variables, and a
command's adds its working directory and requirements.
"""

from __future__ import annotations

import contextlib
import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raytpu.spec import ray_auth
from raytpu.spec.scaling import RUNTIME_ENV_VARS
from raytpu.spec.train_options import BadFlags, build_config
from raytpu.spec.training import LaunchOptions, TrainConfig, to_argv


class SubmitError(RuntimeError):
    """The Job Submission API could not be reached or refused the job."""


class DoesNotFit(BadFlags):
    """The bundled trainer's model does not fit the slice (:mod:`raytpu.spec.memory_fit`):
    the refusal's lines, and the submission it would have been (its ``fit`` has the
    numbers, which ``--dry-run`` still prints)."""

    def __init__(self, problems: list[str], submission: Submission) -> None:
        super().__init__(problems)
        self.submission = submission


@dataclass(frozen=True)
class Submission:
    address: str
    entrypoint: str
    runtime_env: dict[str, Any]
    metadata: dict[str, str]
    cluster_name: str
    namespace: str
    storage_path: str
    auth: str = "token"
    """The stack's ``raytpu:ray.auth``: with ``token`` the Job Submission API needs the token."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def port_forward_hint(self) -> str:
        return (
            "reach the Ray dashboard with: kubectl port-forward "
            f"svc/{self.cluster_name}-head-svc 8265:8265 -n {self.namespace}"
        )

    @property
    def token_hint(self) -> str:
        from raytpu.components.ray_access import auth_token_command

        return "get it with: " + auth_token_command(self.cluster_name, self.namespace)

    def to_dict(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "auth": self.auth,
            "entrypoint": self.entrypoint,
            "runtime_env": self.runtime_env,
            "metadata": self.metadata,
            "storage_path": self.storage_path,
            **self.extra,
        }


def load_stack(stack: str, stacks_dir: Path) -> Any:
    """The stack's validated config (``raytpu.config.stack.StackConfig``), read and checked
    as every command reads it (the same lines as ``raytpu plan``'s for a bad stack)."""
    from raytpu.config.stack import ConfigError
    from raytpu.program.load import load_stack_config

    try:
        return load_stack_config(stack, stacks_dir)
    except ConfigError as e:  # StackFileError included
        raise BadFlags(e.problems) from None


def slice_group_of(cfg: Any, slice_group: str | None, slices: int | None, *,
                   on_shared_cluster: bool = False) -> tuple[Any, int]:
    """The ``raytpu:slices`` entry (default the first) and the run's slice count (default
    its count), checked against the entry's pools or, ``on_shared_cluster``, against the
    slices the stack's RayCluster may hold of it (its pools less the teams' nominal quotas
    and the ``raytpu:jobs`` clusters).
    Raises :class:`BadFlags`."""
    groups = {s.name: s for s in cfg.slices}
    if slice_group is None:
        group = cfg.slices[0]
    elif slice_group in groups:
        group = groups[slice_group]
    else:
        raise BadFlags([f"--slice-group: {slice_group!r} is not a slice of stack {cfg.stack!r}; "
                        f"valid: {', '.join(groups)}"])
    n_slices = (group.initial_slices or 1) if slices is None else slices
    most, why = group.max_slices, f"raytpu:slices entry {group.name!r}"
    if on_shared_cluster:
        from raytpu.program.ray_cluster_config import worker_groups

        shared = next(g for g in worker_groups(cfg) if g.name == group.name).max_slices
        if shared < most:  # a job asking for more would wait for pools others hold
            most, why = shared, (
                f"the shared RayCluster's maxReplicas for {group.name!r}: its "
                f"{group.max_slices} pools less the teams' nominal quotas and the "
                "raytpu:jobs clusters; more runs with --team")
    if not 1 <= n_slices <= most:
        raise BadFlags([f"--slices: {n_slices} is outside 1..{most} ({why})"])
    return group, n_slices


def slice_view(group: Any, slices: int) -> dict[str, Any]:
    """What a submission runs on, as its ``--dry-run`` JSON shows it (one place for every
    submission: the bundled trainer's and a user's command)."""
    shape = group.shape
    return {"slice_group": group.name, "slices": slices, "accelerator_type":
            shape.accelerator_type, "topology": shape.topology, "hosts_per_slice": shape.hosts,
            "hosts": shape.hosts * slices, "chips_per_host": shape.chips_per_vm}


def build_submission(
    *,
    stack: str,
    stacks_dir: Path,
    slice_group: str | None,
    slices: int | None,
    address: str,
    run_name: str,
    max_failures: int,
    trainer: dict[str, Any] | None = None,
    storage_path: str | None = None,
    command: Any = None,
    on_shared_cluster: bool = True,
    resident: bool | None = None,
    mtbf_hours: float | None = None,
) -> Submission:
    """Validate flags against the stack and assemble the job. Raises :class:`BadFlags`.
    ``storage_path``: where checkpoints go (default the stack's; a team's own for --team).
    ``command``: a user's :class:`raytpu.operations.own_code.Command`, run on every host by
    the launcher instead of the bundled trainer (``trainer`` is then unused).
    ``on_shared_cluster``: the job runs on the stack's RayCluster (a team's RayJob brings its
    own cluster, bounded by the team's quota instead). ``resident``: train on the launcher's
    ``--resident`` hosts, which a run resubmitted after a lost head takes over; None: where
    the stack's RayCluster keeps its GCS in Redis (``raytpu:ray.gcsFaultTolerance``).
    ``mtbf_hours``: the expected time between the job's failures, for the checkpoint
    interval shown beside the configured one (default a day)."""
    if mtbf_hours is not None and not (math.isfinite(mtbf_hours) and mtbf_hours > 0):
        raise BadFlags([f"--mtbf-hours: {mtbf_hours} must be a positive number of hours"])
    cfg = load_stack(stack, stacks_dir)
    group, n_slices = slice_group_of(cfg, slice_group, slices,
                                     on_shared_cluster=on_shared_cluster)
    if max_failures < 0:
        raise BadFlags([f"--max-failures: {max_failures} must not be negative"])
    shape = group.shape
    # The slice exactly as the stack declares it (topology, VM size), not catalog defaults.
    shape_of = {"tpu": shape.accelerator_type, "topology": shape.topology,
                "machine_type": shape.machine_type, "slices": n_slices}
    if command is None:
        train_cfg = build_config(**shape_of, check_data=False, **(trainer or {}))
    else:
        train_cfg = TrainConfig(**shape_of)
    if resident and (command is not None or not on_shared_cluster):
        why = ("a user's command is not the bundled trainer" if command is not None else
               "a team's RayJob brings its own RayCluster, which a retry deletes")
        raise BadFlags([f"--resident: {why}; resident hosts run the bundled trainer on the "
                        "stack's RayCluster"])
    if resident is None:
        resident = (command is None and on_shared_cluster
                    and cfg.ray.gcs_fault_tolerance is not None)
    storage_path = storage_path or cfg.checkpoint_uri
    opts = LaunchOptions(
        storage_path=storage_path, run_name=run_name, max_failures=max_failures,
        progress=False,  # job logs are not a terminal
        slice_group=group.name, command=tuple(command.argv) if command else (),
        resident=resident,
    )
    entrypoint = shlex.join(
        ["python", "-m", "raytpu.workloads.launcher", *to_argv(train_cfg, opts)]
    )
    metadata = {"stack": stack, "run_name": run_name, "tpu": shape.accelerator_type,
                "slice_group": group.name, "slices": str(n_slices)}
    extra: dict[str, Any] = {"image": cfg.image, **slice_view(group, n_slices),
                             "resident": resident}
    refusal = None
    if command is None:
        from raytpu.spec.checkpoint_interval import estimate_for
        from raytpu.spec.memory_fit import check_run

        # Bytes per chip and FLOPs per step of this model on this slice, before anything
        # is contacted; a job that cannot fit is refused (a user's own command is not ours
        # to size). The way out is searched among the shapes offered in the stack's zone.
        extra["fit"], refusal = check_run(train_cfg, shape, zone=cfg.zone)
        # The configured checkpoint interval beside the one that maximises goodput.
        extra["checkpoint_interval"] = estimate_for(train_cfg, extra["fit"],
                                                    mtbf_hours).to_dict()
        env: dict[str, Any] = {"env_vars": dict(RUNTIME_ENV_VARS)}
    else:
        from raytpu.operations.own_code import runtime_env

        env = runtime_env(command, base_env=dict(RUNTIME_ENV_VARS))
        metadata["command"] = shlex.join(command.argv)
        extra |= {"command": list(command.argv), "working_dir": {
            "path": str(command.package.path), "zipped_bytes": command.package.bytes,
            "limit_bytes": command.package.limit, "excludes": list(command.package.excludes)},
            "queue": None}
    sub = Submission(
        address=address,
        entrypoint=entrypoint,
        runtime_env=env,
        metadata=metadata,
        cluster_name=cfg.ray.cluster_name,
        namespace=cfg.ray.namespace,
        storage_path=storage_path,
        auth=cfg.ray.auth,
        extra=extra,
    )
    if refusal is not None:
        raise DoesNotFit(refusal, sub)
    return sub


def send_submission(sub: Submission) -> str:
    """Submit through the Job Submission API; returns the job id."""
    try:
        from ray.job_submission import JobSubmissionClient
    except ImportError as e:
        raise SubmitError(f"ray is not installed (pip install 'raytpu[workloads]'): {e}") from None
    auth: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if sub.auth == "token":
        if not ray_auth.has_token_in_env():
            raise SubmitError(
                "the stack's Ray cluster requires a token (raytpu:ray.auth: token) and neither "
                f"{ray_auth.TOKEN_ENV} nor {ray_auth.TOKEN_PATH_ENV} is set; {sub.token_hint}")
        auth = ray_auth.token_mode()  # the client sends the token only in token mode
    try:
        with auth:
            client = JobSubmissionClient(sub.address)
            job_id: str = client.submit_job(
                entrypoint=sub.entrypoint, runtime_env=sub.runtime_env, metadata=sub.metadata
            )
    except Exception as e:  # connection refused, HTTP errors: one line, with the fix
        refused = type(e).__name__ == "AuthenticationError"  # ray.exceptions: 401/403
        hint = sub.token_hint if refused else sub.port_forward_hint
        first = next((ln for ln in str(e).splitlines() if ln.strip()), "")  # Ray's run long
        raise SubmitError(f"cannot submit to {sub.address}: {type(e).__name__}: {first}. {hint}"
                          ) from None
    return job_id
