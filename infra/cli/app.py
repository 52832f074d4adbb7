"""The ``raytpu`` command line: the product's interface.

Stable contract (documented in README.md):

* ``raytpu plan --stack NAME [--json] [--no-policies]``  what ``pulumi up`` would create,
  offline, checked against the policy pack
* ``raytpu manifests --stack NAME --out DIR`` the Kubernetes objects the stack applies
* ``raytpu catalog [GENERATION]``            the TPU shapes this package knows
* ``raytpu train --local --tpu v4-16 ...``   the trainer on a simulated slice (CPU)
* ``raytpu submit --stack NAME ... [-- CMD]`` the trainer, or your command on every TPU host,
  on the stack's RayCluster (``--team``: a Kueue-queued RayJob)
* ``raytpu run --local --stack NAME ... -- CMD`` your command on a simulated slice (CPU)
* ``raytpu cost --stack NAME [--json]``      the fleet's price, hourly and monthly
* ``raytpu status --stack NAME [--json]``    live slices, Ray pods and queues (Kubernetes API)
* ``raytpu rehearse [--build] [--stack NAME]`` the stack on a local control plane (built
  from Go modules at pinned versions)

Exit codes: 0 success, 2 bad input (config or flags; one line per problem on stderr),
3 a mandatory policy violation (``plan``), 1 anything else. Heavy imports (pulumi, torch,
ray) happen inside the commands.
"""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from raytpu.cli.fleet import cost_command, status_command
from raytpu.cli.goodput import goodput_command
from raytpu.cli.options import StackOpt, StacksDirOpt
from raytpu.cli.rehearse import rehearse_command
from raytpu.cli.workloads import register as register_workload_commands
from typer.core import TyperGroup


class _WholeHelpGroup(TyperGroup):
    """Lists each command with its first sentence whole, wrapped (click cuts it to the
    width left on the line and ends it with "...")."""

    # Any: typer 0.29 vendors its own click (typer._click), whose types are private.
    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=10**6)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


app = typer.Typer(
    cls=_WholeHelpGroup,
    name="raytpu",
    help="Ray on Cloud TPU multi-host slices on GKE: plan, render, train, submit.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain click help: rich markup would eat literal text such as `[secret]`, and rich's
    # option panels cut help texts with "…" at 80 columns; click wraps them whole.
    rich_markup_mode=None,
)





def fail(problems: list[str], code: int = 2) -> typer.Exit:
    """Print one line per problem on stderr and return the Exit to raise."""
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    return typer.Exit(code)


@app.command()
def plan(
    stack: StackOpt,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    stacks_dir: StacksDirOpt = None,
    no_policies: Annotated[bool, typer.Option(
        "--no-policies", help="Skip the policy pack (raytpu.policy.rules)")] = False,
    policy_config: Annotated[Path | None, typer.Option(
        "--policy-config", help="Policy config JSON, as pulumi's --policy-pack-config")] = None,
    show_secrets: Annotated[bool, typer.Option(
        "--show-secrets", help="Show secret values instead of [secret]")] = False,
    diff_base: Annotated[Path | None, typer.Option(
        "--diff", help="Compare with a plan saved by `raytpu plan --json` (BASE.json)")] = None,
) -> None:
    """Run the Pulumi program offline (mocked providers) and show what `pulumi up` would create."""
    from raytpu.config.stack import ConfigError
    from raytpu.plan.diff import DiffError, diff_plans, load_base, render_diff
    from raytpu.plan.engine import PlanError, run_plan
    from raytpu.plan.policies import load_policy_config, plan_document, plan_policies
    from raytpu.plan.render import render_plan

    try:
        pconfig = load_policy_config(policy_config)
        base = load_base(diff_base) if diff_base is not None else None
        result = run_plan(stack, stacks_dir, preview=True)
        diff = diff_plans(base, result) if base is not None else None
    except ConfigError as e:
        raise fail(e.problems) from None
    except PlanError as e:
        raise fail([str(e)]) from None
    except DiffError as e:
        raise fail([f"--diff {diff_base}: {e}"]) from None
    violations, blocking = plan_policies(result, enabled=not no_policies, config=pconfig)
    if diff is not None:
        if as_json:
            sys.stdout.write(json.dumps(diff.to_dict(), indent=2) + "\n")
        else:
            render_diff(diff, violations, warnings=result.warnings)
    elif as_json:
        doc = plan_document(result, violations, show_secrets=show_secrets)
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        render_plan(result, violations, show_secrets=show_secrets)
    if blocking:  # after printing everything, as `pulumi preview` does
        raise fail(blocking, code=3)


@app.command()
def manifests(
    stack: StackOpt,
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write YAML files into")],
    stacks_dir: StacksDirOpt = None,
    image: Annotated[str | None, typer.Option(
        "--image", help="REF@sha256:... of the image the stack builds (default a placeholder)",
    )] = None,
) -> None:
    """Write the Kubernetes objects the stack applies as YAML (for review or kubectl apply)."""
    from raytpu.config.stack import ConfigError
    from raytpu.operations.manifests import manifest_objects, write_plan_manifests
    from raytpu.plan.engine import PlanError, run_plan
    from raytpu.plan.render import render_warnings
    from rich.console import Console

    try:
        result = run_plan(stack, stacks_dir, preview=True)
        placeholders = manifest_objects(result, image)[1]
        written = write_plan_manifests(result, out, image)
    except ConfigError as e:
        raise fail(e.problems) from None
    except PlanError as e:
        raise fail([str(e)]) from None
    render_warnings(Console(stderr=True), result.warnings)
    if placeholders:  # never a made-up value: say what must be filled before applying
        print(f"{len(placeholders)} value(s) only `pulumi up` knows are placeholders (the plan's "
              "'(known after up)'; the built image's digest: --image REF@sha256:...):",
              file=sys.stderr)
        for where in placeholders:
            print(f"  {where}", file=sys.stderr)
    for path in written:
        print(path)


@app.command()
def catalog(
    generation: Annotated[str | None, typer.Argument(help="v4, v5e, v5p or v6e")] = None,
) -> None:
    """List TPU slice shapes: accelerator type, topology, hosts, chips per host, machine type."""
    from raytpu.facts.catalog import GENERATIONS
    from raytpu.operations.catalog import catalog_table
    from raytpu.plan.render import render_table
    from rich.console import Console

    if generation is not None and generation not in GENERATIONS:
        raise fail([f"generation: {generation!r} is unknown; valid: {', '.join(GENERATIONS)}"])
    # Every value whole (key/value blocks where the grid does not fit the terminal).
    render_table(Console(), catalog_table(generation))


register_workload_commands(app)
app.command("cost")(cost_command)
app.command("status")(status_command)
app.command("rehearse")(rehearse_command)
app.command("goodput")(goodput_command)


# Commands done in a second or two run without the cyclic garbage collector, which otherwise
# walks the SDKs' few hundred thousand objects again and again as a plan allocates (more
# often, the more resources); their garbage is freed at exit. Not the long-running ones.
SHORT_COMMANDS = frozenset({"plan", "manifests", "cost", "status", "catalog", "goodput"})


def main() -> None:
    if SHORT_COMMANDS.intersection(sys.argv[1:2]):
        gc.disable()
    try:
        app()
    finally:
        # The Pulumi SDKs, gRPC and protobuf leave a few hundred thousand objects behind; the
        # interpreter's final garbage collections would walk them all, up to a second after
        # the output is written. Frozen, they are freed at exit without that walk.
        gc.freeze()


if __name__ == "__main__":
    main()
