"""``raytpu train`` and ``raytpu submit``: the workloads' commands on the package's CLI.

Importing this module must stay cheap and must work on the core install (no torch, no
ray): everything heavy is imported inside the commands. Bad flags exit 2 with one line
per problem on stderr, naming the flag and its value; failures after the start exit 1.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from raytpu.cli.exits import bad_flags_or_refused, exit_bad
from raytpu.cli.local_runs import DEFAULT as DEFAULT_CHECKPOINT_DIR
from raytpu.cli.local_runs import CheckpointDir, storage_path
from raytpu.cli.own_code import (
    CONTEXT,
    CommandArg,
    EnvOpt,
    WorkingDir,
    submit_command,
    trainer_flags_given,
)
from raytpu.cli.own_code import register as register_own_code
from raytpu.spec.checkpoint_interval import DEFAULT_MTBF_HOURS
from raytpu.spec.train_options import BadFlags, build_config
from raytpu.spec.training import LaunchOptions, ModelConfig, OptimConfig, TrainConfig

# -- options shared by train and submit -------------------------------------------------

Tpu = Annotated[str, typer.Option("--tpu", help="TPU accelerator type, e.g. v4-16")]
Slices = Annotated[int, typer.Option("--slices", help="Slices for one job (multislice)")]
Steps = Annotated[int, typer.Option("--steps", help="Train until this step")]
Data = Annotated[
    str | None,
    typer.Option("--data", help="Folder, file or gs:// prefix of text (default: Python stdlib)"),
]
CheckpointEvery = Annotated[int, typer.Option("--checkpoint-every", help="Steps per checkpoint")]
BatchPerHost = Annotated[int, typer.Option("--batch-per-host", help="Sequences per host per step")]
Layers = Annotated[int, typer.Option("--n-layers", help="Transformer blocks")]
Width = Annotated[int, typer.Option("--d-model", help="Model width")]
Heads = Annotated[int, typer.Option("--n-heads", help="Attention heads")]
SeqLen = Annotated[int, typer.Option("--seq-len", help="Context length in bytes")]
Lr = Annotated[float, typer.Option("--lr", help="Peak learning rate")]
Warmup = Annotated[int, typer.Option("--warmup-steps", help="Linear warmup steps")]
Seed = Annotated[int, typer.Option("--seed", help="Init and data order seed")]
LogEvery = Annotated[int, typer.Option("--log-every", help="TPU: fetch losses every N steps")]
Compile = Annotated[
    bool | None,
    typer.Option(
        "--compile/--no-compile",
        help="torch.compile(backend='openxla') the forward/backward "
        "(default: on for XLA:CPU, off on TPU)",
    ),
]
Model = Annotated[
    str | None,
    typer.Option("--model", help="Llama-style preset: tiny, small, 1b, 3b, 8b, 70b "
                 "(default: the byte GPT sized by --n-layers/--d-model/--n-heads)"),
]
Fsdp = Annotated[
    bool | None,
    typer.Option("--fsdp/--no-fsdp", help="Shard params, grads and optimizer state over "
                 "each slice's chips (default: on with --model)"),
]
Remat = Annotated[
    bool, typer.Option("--remat/--no-remat", help="Activation checkpointing (recompute layers)")
]
Tokenizer = Annotated[
    str | None,
    typer.Option("--tokenizer", help="tokenizer.json (tokenizers) or *.model (sentencepiece); "
                 "default: bytes"),
]
Framework = Annotated[
    str, typer.Option("--framework", help="torch (torch_xla) or jax (needs --model)")
]
MaxFailures = Annotated[
    int, typer.Option("--max-failures", help="Worker-group restarts Ray Train may do")
]
RunName = Annotated[
    str, typer.Option("--run-name", help="Run folder under the storage path (resume key)")
]

DEFAULTS = TrainConfig()
MODEL = ModelConfig()
OPTIM = OptimConfig()


def _flag(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=annotation)


# The model, optimizer and data flags: what `build_config` takes besides the slice shape,
# declared once so that `train` and `submit` cannot drift apart.
TRAINER_FLAGS = (
    _flag("steps", Steps, DEFAULTS.steps),
    _flag("data", Data, None),
    _flag("checkpoint_every", CheckpointEvery, DEFAULTS.checkpoint_every),
    _flag("batch_per_host", BatchPerHost, DEFAULTS.batch_per_host),
    _flag("n_layers", Layers, MODEL.n_layers),
    _flag("d_model", Width, MODEL.d_model),
    _flag("n_heads", Heads, MODEL.n_heads),
    _flag("seq_len", SeqLen, MODEL.seq_len),
    _flag("lr", Lr, OPTIM.lr),
    _flag("warmup_steps", Warmup, OPTIM.warmup_steps),
    _flag("seed", Seed, DEFAULTS.seed),
    _flag("compile", Compile, DEFAULTS.compile),
    _flag("model", Model, DEFAULTS.preset),
    _flag("fsdp", Fsdp, DEFAULTS.fsdp),
    _flag("remat", Remat, DEFAULTS.remat),
    _flag("tokenizer", Tokenizer, DEFAULTS.tokenizer),
    _flag("framework", Framework, DEFAULTS.framework),
)


def with_trainer_flags(command: Callable[..., None]) -> Callable[..., None]:
    """Give a typer command the :data:`TRAINER_FLAGS` options.

    The command declares a first parameter ``trainer: dict[str, Any]`` instead of the
    flags themselves and receives their values in it, keyed by ``build_config``'s names.
    """
    sig = inspect.signature(command, eval_str=True)
    own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
           for p in sig.parameters.values() if p.name != "trainer"]
    params = [*own, *TRAINER_FLAGS]

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> None:
        trainer = {p.name: kwargs.pop(p.name) for p in TRAINER_FLAGS}
        command(trainer=trainer, **kwargs)

    # typer reads the options from these two, not from the wrapped function.
    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    return wrapper


def _local_data_problem(data: str, tokenizer: str | None) -> str | None:
    """What the trainer would refuse in ``--data`` here (its own reader, so the words are
    the ones a run would fail with); None: it reads."""
    from raytpu.workloads.data import DataError
    from raytpu.workloads.sources import resolve

    try:
        resolve(data, tokenizer)
    except DataError as e:
        return str(e)
    return None


def register(app: typer.Typer) -> None:
    """Add ``train``, ``submit`` and ``run`` to the CLI."""
    register_own_code(app)

    @app.command()
    @with_trainer_flags
    def train(
        trainer: dict[str, Any],
        local: Annotated[
            bool, typer.Option("--local", help="Simulate the slice with local Ray nodes (CPU)")
        ] = False,
        tpu: Tpu = DEFAULTS.tpu,
        slices: Slices = DEFAULTS.slices,
        checkpoint_dir: CheckpointDir = DEFAULT_CHECKPOINT_DIR,
        metrics_out: Annotated[
            Path | None, typer.Option("--metrics-out", help="JSON lines, one per step")
        ] = None,
        fail_host_at_step: Annotated[
            int | None,
            typer.Option("--fail-host-at-step", help="Kill one simulated host after step K"),
        ] = None,
        max_failures: MaxFailures = LaunchOptions.max_failures,
        run_name: RunName = LaunchOptions.run_name,
        log_every: LogEvery = DEFAULTS.log_every,
        progress: Annotated[
            bool, typer.Option("--progress/--no-progress", help="Show a progress bar")
        ] = True,
    ) -> None:
        """Train the byte GPT or a Llama preset (--model), with torch_xla or JAX
        (--framework); with --local, on a simulated slice of local Ray nodes."""
        problems: list[str] = []
        if not local:
            problems.append(
                "--local: not given; `raytpu train` runs on a simulated slice (--local). "
                "To train on a stack's cluster use `raytpu submit --stack NAME`"
            )
        if max_failures < 0:
            problems.append(f"--max-failures: {max_failures} must not be negative")
        try:
            cfg = build_config(
                tpu=tpu, slices=slices, log_every=log_every,
                fail_host_at_step=fail_host_at_step, data_problem=_local_data_problem,
                **trainer,
            )
        except BadFlags as e:
            problems += e.problems
        if problems:
            raise exit_bad(problems)
        try:
            storage = storage_path(checkpoint_dir)
        except BadFlags as e:
            raise exit_bad(e.problems) from None

        from raytpu.workloads.local_mode import run_local

        opts = LaunchOptions(
            storage_path=storage,
            run_name=run_name,
            max_failures=max_failures,
            metrics_out=str(metrics_out) if metrics_out else None,
            progress=progress,
        )
        try:
            report = run_local(cfg, opts)
        except ModuleNotFoundError as e:
            print(f"error: training needs the workloads extra ({e.name} is missing): "
                  "pip install -e '.[workloads]'", file=sys.stderr)
            raise typer.Exit(2) from None
        except Exception as e:
            print(f"error: training failed: {type(e).__name__}: {e}", file=sys.stderr)
            raise typer.Exit(1) from None
        retrained = sum(1 for r in report.records if r.get("retrained"))
        line = (
            f"done: step {report.last_step}/{cfg.steps}, {len(report.records)} steps trained "
            f"({retrained} retrained) in {report.attempts} attempt(s), {report.wall_s:.0f}s; "
            f"checkpoints in {opts.storage_path}/{opts.run_name}"
        )
        if report.kill_to_resume_s is not None:
            line += f"; host kill -> first resumed step {report.kill_to_resume_s:.1f}s"
        from raytpu.cli.goodput import goodput_summary

        accounted = goodput_summary(f"{opts.storage_path}/{opts.run_name}")
        if accounted is not None:
            print(accounted)
        print(line)

    @app.command(context_settings=CONTEXT)
    @with_trainer_flags
    def submit(
        trainer: dict[str, Any],
        stack: Annotated[str, typer.Option("--stack", "-s", help="stacks/Pulumi.<NAME>.yaml")],
        stacks_dir: Annotated[
            Path, typer.Option("--stacks-dir", help="Folder of Pulumi.<stack>.yaml files")
        ] = Path("stacks"),
        address: Annotated[
            str, typer.Option("--address", help="Ray dashboard (Job Submission API) URL")
        ] = "http://127.0.0.1:8265",
        slice_group: Annotated[
            str | None,
            typer.Option("--slice-group", help="Which raytpu:slices entry (default: first)"),
        ] = None,
        slices: Annotated[
            int | None,
            typer.Option("--slices", help="Slices for the job (default: the entry's count)"),
        ] = None,
        dry_run: Annotated[
            bool, typer.Option("--dry-run", help="Print the submission as JSON; contact nothing")
        ] = False,
        max_failures: MaxFailures = LaunchOptions.max_failures,
        run_name: RunName = LaunchOptions.run_name,
        # On TPU a loss fetch is a host round-trip: log every 10 steps unless asked.
        log_every: LogEvery = 10,
        team: Annotated[str | None, typer.Option(
            "--team", help="Queue a RayJob in this raytpu:teams entry's namespace (Kueue)")
        ] = None,
        kubeconfig: Annotated[Path | None, typer.Option(
            "--kubeconfig", help="--team: kubeconfig (default: the stack's, else kubectl's)")
        ] = None,
        context: Annotated[str | None, typer.Option(
            "--context", help="--team: kubeconfig context")] = None,
        image: Annotated[str | None, typer.Option(
            "--image", help="--team: the Ray image by digest (default: the stack's)")] = None,
        working_dir: WorkingDir = None,
        requirements: Annotated[Path | None, typer.Option(
            "--requirements", help="pip requirements file installed for the command")] = None,
        env: EnvOpt = None,
        resident: Annotated[bool | None, typer.Option(
            "--resident/--no-resident",
            help="Train on hosts that outlive the job's driver, so a resubmission after a "
                 "lost head takes them over (default: on where the stack has "
                 "raytpu:ray.gcsFaultTolerance; not with --team or a command)")] = None,
        mtbf_hours: Annotated[float | None, typer.Option(
            "--mtbf-hours", help="Expected hours between the job's failures, for the "
                                 "checkpoint interval --dry-run shows (Young/Daly; default "
                                 f"{DEFAULT_MTBF_HOURS:g})")] = None,
        command: CommandArg = None,
    ) -> None:
        """Submit the trainer, or your own command after `--` (one process per TPU host),
        to the stack's RayCluster (Ray Job Submission API), or with --team as a RayJob
        queued by Kueue in the team's namespace."""
        import json

        from raytpu.operations.submit import (
            DoesNotFit,
            SubmitError,
            build_submission,
            send_submission,
        )

        if resident and (team is not None or command or working_dir is not None
                         or requirements is not None or env):
            what = "--team" if team is not None else "your own command"
            raise exit_bad([f"--resident: resident hosts run the bundled trainer on the "
                            f"stack's RayCluster, not with {what}"])
        if command or working_dir is not None or requirements is not None or env:
            defaults = {p.name: p.default for p in TRAINER_FLAGS}
            submit_command(
                stack=stack, stacks_dir=stacks_dir, address=address, slice_group=slice_group,
                slices=slices, dry_run=dry_run, max_failures=max_failures, run_name=run_name,
                team=team, kubeconfig=kubeconfig, context=context, image=image,
                working_dir=working_dir, env=env or [], requirements=requirements,
                command=command, ignored=trainer_flags_given(
                    {**trainer, "log_every": log_every}, {**defaults, "log_every": 10}))
            return

        if team is not None:
            from raytpu.operations.team_job import ApplyError, create_team_job, prepare_team_job

            with bad_flags_or_refused(ApplyError):
                job = prepare_team_job(
                    stack=stack, stacks_dir=stacks_dir, team=team, slice_group=slice_group,
                    slices=slices, run_name=run_name, max_failures=max_failures,
                    trainer={**trainer, "log_every": log_every}, image=image,
                    dry_run=dry_run)
            if dry_run:
                print(json.dumps(job.manifest, indent=2))
                return
            try:
                print(create_team_job(job, stack=stack, kubeconfig=kubeconfig, context=context))
            except ApplyError as e:
                print(f"error: {e}", file=sys.stderr)
                raise typer.Exit(1) from None
            print(f"queued in {job.namespace} (Kueue LocalQueue default); follow: kubectl -n "
                  f"{job.namespace} get rayjob {job.name} -w", file=sys.stderr)
            return

        try:
            sub = build_submission(
                stack=stack, stacks_dir=stacks_dir, slice_group=slice_group, slices=slices,
                address=address, run_name=run_name, max_failures=max_failures,
                trainer={**trainer, "log_every": log_every}, resident=resident,
                mtbf_hours=mtbf_hours,
            )
        except DoesNotFit as e:
            if dry_run:  # the numbers as JSON too, then the refusal
                print(json.dumps(e.submission.to_dict(), indent=2))
            raise exit_bad(e.problems) from None
        except BadFlags as e:
            raise exit_bad(e.problems) from None
        print(sub.port_forward_hint, file=sys.stderr)
        if dry_run:
            print(json.dumps(sub.to_dict(), indent=2))
            return
        try:
            job_id = send_submission(sub)
        except SubmitError as e:
            print(f"error: {e}", file=sys.stderr)
            raise typer.Exit(1) from None
        print(job_id)
        print(
            f"follow: ray job logs -f {job_id} --address {address}\n"
            f"dashboard: {address}/#/jobs/{job_id}",
            file=sys.stderr,
        )
