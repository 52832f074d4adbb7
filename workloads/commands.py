"""`raytpu train` and `raytpu submit` (being written)."""

import typer


def register(app: typer.Typer) -> None:
    """Add the workload commands to the CLI."""
