"""The ``raytpu`` command line: the typer app (``app``), shared options, workload commands."""

from raytpu.cli.app import main

__all__ = ["main"]
