"""Command-line options that several ``raytpu`` commands share (plan, manifests, cost,
status), declared once so their flags and help stay the same everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

StackOpt = Annotated[
    str, typer.Option("--stack", "-s", help="Stack name: stacks/Pulumi.<NAME>.yaml")
]
StacksDirOpt = Annotated[
    Path | None,
    typer.Option("--stacks-dir", help="Folder of Pulumi.<stack>.yaml files (default: ./stacks)"),
]
