"""Where ``raytpu train --local`` and ``raytpu run --local`` keep their runs: ``--checkpoint-dir``,
by default ``./raytpu-runs``. A folder raytpu creates holds a ``.gitignore`` of ``*`` (as a
virtualenv does), so runs started in a checkout, this one or a user's, never show up as
untracked files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from raytpu.spec.train_options import BadFlags

DEFAULT = Path("raytpu-runs")
IGNORE_ALL = "# Created by raytpu: runs and checkpoints, not source.\n*\n"

CheckpointDir = Annotated[
    Path,
    typer.Option("--checkpoint-dir", help="Where local runs keep checkpoints (resumes from "
                 f"it; default ./{DEFAULT}, which git ignores)"),
]


def storage_path(folder: Path) -> str:
    """``folder``, absolute, created if missing (with its ``.gitignore``); :class:`BadFlags`
    if it cannot be."""
    folder = folder.resolve()
    if not folder.exists():
        try:
            folder.mkdir(parents=True)
            (folder / ".gitignore").write_text(IGNORE_ALL)
        except OSError as e:
            raise BadFlags([f"--checkpoint-dir: {str(folder)!r} cannot be created: "
                            f"{e.strerror}"]) from None
    elif not folder.is_dir():
        raise BadFlags([f"--checkpoint-dir: {str(folder)!r} is not a folder"])
    return str(folder)
