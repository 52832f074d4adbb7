"""A stack's outputs through the Pulumi CLI (``pulumi stack output``): the one way commands
read what ``pulumi up`` produced (the kubeconfig for ``status``, the image digest for team
RayJobs). None when the CLI is missing, not logged in, or the output is unset."""

from __future__ import annotations

import shutil
import subprocess


def stack_output(stack: str, key: str, *, secret: bool = False) -> str | None:
    """The stack output ``key`` of ``stack`` as text, or None."""
    pulumi = shutil.which("pulumi")
    if pulumi is None:
        return None
    argv = [pulumi, "stack", "output", key, *(["--show-secrets"] if secret else []),
            "--stack", stack]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = proc.stdout.strip()
    return text if proc.returncode == 0 and text else None
