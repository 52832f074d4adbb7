"""``raytpu cost`` and ``raytpu status``: the fleet's price and its live state.

Each command parses the stack once (the same parse as ``raytpu plan``), computes its view
model with a pure function (:func:`raytpu.plan.cost.cost_of` of the stack;
:func:`raytpu.operations.status.status_view` of the stack and the snapshot
:func:`raytpu.operations.status.read_snapshot` read from the API) and renders it as tables
(:mod:`raytpu.operations.cost`, :mod:`raytpu.operations.status_render`) or one JSON object.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import typer
from raytpu.cli.options import StackOpt, StacksDirOpt


def cost_command(
    stack: StackOpt,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    stacks_dir: StacksDirOpt = None,
) -> None:
    """The price of the stack's TPU fleet and system pool, hourly and monthly (730 h)."""
    from raytpu.config.stack import ConfigError
    from raytpu.program.load import load_stack_config

    try:
        cfg = load_stack_config(stack, stacks_dir)
    except ConfigError as e:
        _errors(e.problems)
        raise typer.Exit(2) from None
    from raytpu.operations.cost import render_cost
    from raytpu.plan.cost import cost_of

    cost = cost_of(cfg)
    if as_json:
        sys.stdout.write(json.dumps(cost, indent=2) + "\n")
    else:
        render_cost(cost)


def status_command(
    stack: StackOpt,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    kubeconfig: Annotated[Path | None, typer.Option(
        "--kubeconfig", help="Kubeconfig file (default: the stack output, else ~/.kube)")] = None,
    context: Annotated[str | None, typer.Option("--context", help="Kubeconfig context")] = None,
    job: Annotated[str | None, typer.Option(
        "--job", help="Only this team job (RayJob name): its state and why it waits")] = None,
    stacks_dir: StacksDirOpt = None,
) -> None:
    """Live view of the stack's slices, Ray pods, RayCluster and team queues, and why each
    pending pod or queued job waits."""
    from raytpu.config.stack import ConfigError
    from raytpu.operations.kube import (
        KubeReader,
        NoKubeconfig,
        StatusError,
        connect,
        credentials_hint,
    )
    from raytpu.operations.status import read_snapshot, status_view
    from raytpu.operations.status_render import render_status
    from raytpu.program.load import load_stack_config

    try:
        cfg = load_stack_config(stack, stacks_dir)
    except ConfigError as e:
        _errors(e.problems)
        raise typer.Exit(2) from None
    try:
        api_client, source = connect(stack, kubeconfig, context)
        snapshot = read_snapshot(cfg, KubeReader(api_client))
    except StatusError as e:
        hint = f"; {credentials_hint(cfg)}" if isinstance(e, NoKubeconfig) else ""
        _errors([f"cannot read the cluster of stack {stack!r} ({cfg.cluster.name}): {e}{hint}"])
        raise typer.Exit(1) from None
    view = status_view(cfg, snapshot)
    if job is not None:
        _one_job(view, job, as_json)
        return
    if as_json:
        sys.stdout.write(json.dumps({**view, "source": source}, indent=2) + "\n")
    else:
        render_status(view, source)


def _one_job(view: dict[str, Any], name: str, as_json: bool) -> None:
    """``--job NAME``: the unfinished job of that name (or Workload name) in any team."""
    from raytpu.operations.status_render import render_job

    found = [(t, j) for t in view["teams"] for j in t["jobs"] if name in (j["name"],
                                                                           j["workload"])]
    if not found:
        teams = ", ".join(t["namespace"] for t in view["teams"]) or "none: no raytpu:teams"
        _errors([f"--job: no unfinished job {name!r} in the teams' namespaces ({teams})"])
        raise typer.Exit(1)
    team, job = found[0]
    if as_json:
        sys.stdout.write(json.dumps({"team": team["name"], "namespace": team["namespace"],
                                     **job}, indent=2) + "\n")
    else:
        render_job(team, job)


def _errors(lines: Iterable[str]) -> None:
    for line in lines:
        print(f"error: {line}", file=sys.stderr)
