"""``raytpu cost`` and ``raytpu status``: the fleet's price and its live state.

Each command parses the stack once (the same parse as ``raytpu plan``), computes its view
(:func:`raytpu.plan.cost.cost_of`, :func:`raytpu.operations.status.fleet_status`) and
renders it as a table or one JSON object.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

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
    stacks_dir: StacksDirOpt = None,
) -> None:
    """Live view of the stack's slices, Ray pods, RayCluster and team queues."""
    from raytpu.config.stack import ConfigError
    from raytpu.operations.status import (
        KubeReader,
        NoKubeconfig,
        StatusError,
        connect,
        credentials_hint,
        fleet_status,
        render_status,
    )
    from raytpu.program.load import load_stack_config

    try:
        cfg = load_stack_config(stack, stacks_dir)
    except ConfigError as e:
        _errors(e.problems)
        raise typer.Exit(2) from None
    try:
        api_client, source = connect(stack, kubeconfig, context)
        view = fleet_status(cfg, KubeReader(api_client))
    except StatusError as e:
        hint = f"; {credentials_hint(cfg)}" if isinstance(e, NoKubeconfig) else ""
        _errors([f"cannot read the cluster of stack {stack!r} ({cfg.cluster.name}): {e}{hint}"])
        raise typer.Exit(1) from None
    if as_json:
        sys.stdout.write(json.dumps({**view, "source": source}, indent=2) + "\n")
    else:
        render_status(view, source)


def _errors(lines: Iterable[str]) -> None:
    for line in lines:
        print(f"error: {line}", file=sys.stderr)
