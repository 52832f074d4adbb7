"""``raytpu submit ... -- CMD`` and ``raytpu run --local ... -- CMD``: a user's own command on
every TPU host of a stack's slices (Job Submission API, or with ``--team`` a Kueue-queued
RayJob), or on the local simulated slice first.

Bad input exits 2 with one line per problem before anything is contacted; the run's exit
status is the first failing host's.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from raytpu.cli.exits import bad_flags_or_refused, exit_bad
from raytpu.cli.local_runs import DEFAULT as DEFAULT_CHECKPOINT_DIR
from raytpu.cli.local_runs import CheckpointDir, storage_path
from raytpu.spec.train_options import BadFlags
from raytpu.spec.training import LaunchOptions

WorkingDir = Annotated[Path | None, typer.Option(
    "--working-dir", help="Folder the command runs in, uploaded with the job")]
EnvOpt = Annotated[list[str] | None, typer.Option(
    "--env", help="NAME=VALUE for every host's environment (repeatable)")]
CommandArg = Annotated[list[str] | None, typer.Argument(
    help="-- CMD ARG...: the command every TPU host runs", show_default=False)]
# After the first word of the command, every flag is the command's, not raytpu's.
CONTEXT = {"allow_interspersed_args": False}


def trainer_flags_given(trainer: dict[str, Any], defaults: dict[str, Any]) -> list[str]:
    """The bundled trainer's flags given next to a command: they would be ignored."""
    return [f"--{name.replace('_', '-')}: a flag of the bundled trainer; a command after `--` "
            "takes its own flags" for name, value in trainer.items() if value != defaults[name]]


def submit_command(*, stack: str, stacks_dir: Path, address: str, slice_group: str | None,
                   slices: int | None, dry_run: bool, max_failures: int, run_name: str,
                   team: str | None, kubeconfig: Path | None, context: str | None,
                   image: str | None, working_dir: Path | None, env: list[str],
                   requirements: Path | None, command: list[str] | None,
                   ignored: list[str]) -> None:
    """``raytpu submit`` with a command after ``--``."""
    from raytpu.operations import own_code
    from raytpu.operations.submit import SubmitError, build_submission, send_submission
    from raytpu.operations.team_job import (
        ApplyError,
        create_team_job,
        prepare_team_command,
    )

    with bad_flags_or_refused(ApplyError):
        if ignored:
            raise BadFlags(ignored)
        cmd = own_code.command(command, working_dir=working_dir, env=env,
                               requirements=requirements)
        if team is not None:
            job, view = prepare_team_command(
                stack=stack, stacks_dir=stacks_dir, team=team, slice_group=slice_group,
                slices=slices, run_name=run_name, max_failures=max_failures, command=cmd,
                image=image, dry_run=dry_run)
        else:
            sub = build_submission(stack=stack, stacks_dir=stacks_dir, slice_group=slice_group,
                                   slices=slices, address=address, run_name=run_name,
                                   max_failures=max_failures, command=cmd)
            view = sub.to_dict()
    if dry_run:
        print(json.dumps(view, indent=2))
        return
    try:
        if team is None:
            print(sub.port_forward_hint, file=sys.stderr)
            job_id = send_submission(sub)
            print(job_id)
            print(f"follow: ray job logs -f {job_id} --address {address}", file=sys.stderr)
            return
        uri = view["working_dir"]["uri"]
        try:
            own_code.upload(cmd, uri)
        except Exception as e:  # credentials, permissions, network
            raise ApplyError(f"uploading the working directory to {uri}: {type(e).__name__}: "
                             f"{e} (your Google credentials need storage.objects.create on "
                             "the team's checkpoint location)") from None
        print(create_team_job(job, stack=stack, kubeconfig=kubeconfig, context=context))
    except (SubmitError, ApplyError) as e:
        print(f"error: {e}", file=sys.stderr)
        raise typer.Exit(1) from None
    print(f"queued in {job.namespace} (Kueue LocalQueue default); follow: kubectl -n "
          f"{job.namespace} get rayjob {job.name} -w", file=sys.stderr)


def register(app: typer.Typer) -> None:
    """Add ``run`` to the CLI."""

    @app.command(context_settings=CONTEXT)
    def run(
        stack: Annotated[str, typer.Option("--stack", "-s", help="stacks/Pulumi.<NAME>.yaml")],
        local: Annotated[bool, typer.Option(
            "--local", help="On simulated slices of local Ray nodes (CPU)")] = False,
        stacks_dir: Annotated[Path, typer.Option(
            "--stacks-dir", help="Folder of Pulumi.<stack>.yaml files")] = Path("stacks"),
        slice_group: Annotated[str | None, typer.Option(
            "--slice-group", help="Which raytpu:slices entry (default: first)")] = None,
        slices: Annotated[int | None, typer.Option(
            "--slices", help="Slices (default: the entry's count)")] = None,
        working_dir: WorkingDir = None,
        env: EnvOpt = None,
        max_failures: Annotated[int, typer.Option(
            "--max-failures", help="Restarts of every host's process after a failure")] = 0,
        run_name: Annotated[str, typer.Option(
            "--run-name", help="Run folder under --checkpoint-dir (resume key)")] = "run",
        checkpoint_dir: CheckpointDir = DEFAULT_CHECKPOINT_DIR,
        command: CommandArg = None,
    ) -> None:
        """Run your command on every host of a stack's slice group, simulated locally
        (--local): one process per host, output prefixed by host, the first failing host's
        exit status."""
        from raytpu.operations import own_code
        from raytpu.operations.submit import load_stack, slice_group_of
        from raytpu.spec.training import TrainConfig

        try:
            problems = [] if local else [
                "--local: not given; `raytpu run` runs on a simulated slice (--local). On the "
                "stack's cluster use `raytpu submit --stack NAME ... -- CMD`"]
            if max_failures < 0:
                problems.append(f"--max-failures: {max_failures} must not be negative")
            if problems:
                raise BadFlags(problems)
            cfg = load_stack(stack, stacks_dir)
            group, n = slice_group_of(cfg, slice_group, slices)
            cmd = own_code.command(command, working_dir=working_dir, env=env or [],
                                   requirements=None)
            storage = storage_path(checkpoint_dir)
        except BadFlags as e:
            raise exit_bad(e.problems) from None
        shape = group.shape
        train = TrainConfig(tpu=shape.accelerator_type, topology=shape.topology,
                            machine_type=shape.machine_type, slices=n)
        opts = LaunchOptions(storage_path=storage, run_name=run_name,
                             max_failures=max_failures, progress=False,
                             command=tuple(cmd.argv))
        print(f"local: {n} x {shape.accelerator_type} ({shape.topology}, {shape.hosts} host(s) "
              f"x {shape.chips_per_vm} chips) of {stack}/{group.name}, simulated; running "
              f"{shlex.join(cmd.argv)}", file=sys.stderr)
        try:
            from raytpu.workloads.local_mode import run_local_command

            result = run_local_command(train, opts,
                                       runtime_env=own_code.runtime_env(cmd, base_env={}))
        except ModuleNotFoundError as e:
            print(f"error: needs the workloads extra ({e.name} is missing): "
                  "pip install -e '.[workloads]'", file=sys.stderr)
            raise typer.Exit(2) from None
        from raytpu.workloads.command import first_failure

        failed = first_failure(result.exits)
        if failed is not None:
            print(f"error: {failed['where']} exited first, with {result.exit_code}",
                  file=sys.stderr)
        elif result.exit_code:
            print(f"error: {(result.error or '').splitlines()[0]}", file=sys.stderr)
        else:
            print(f"done: {len(result.exits)} host process(es) exited 0; checkpoints in "
                  f"{opts.storage_path}/{opts.run_name}/checkpoints", file=sys.stderr)
        raise typer.Exit(result.exit_code)
