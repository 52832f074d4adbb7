"""Both scripts with ``raytpu run --local`` on staging's 2-host v4-16 slice: every host ran
its command with its own host index, the same topology and one coordinator, and the run's
checkpoint was written. One simulated cluster runs both scripts (one after the other), as
each cluster start costs most of the time on a small machine."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray.train")
pytest.importorskip("torch_xla")

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
STACKS = HERE.parents[1] / "stacks"
HAS_JAX = importlib.util.find_spec("jax") is not None


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str],
                                                            Path]:
    scripts = ["train_torch.py", *(["train_jax.py"] if HAS_JAX else [])]
    steps = " && ".join(f"{shlex.quote(sys.executable)} {s} --steps 3" for s in scripts)
    ckpt = tmp_path_factory.mktemp("ckpt")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "TPU_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "raytpu", "run", "--local", "--stack", "staging",
         "--stacks-dir", str(STACKS), "--working-dir", str(HERE), "--checkpoint-dir", str(ckpt),
         "--run-name", "examples", "--", "sh", "-c", steps],
        capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, ckpt / "examples" / "checkpoints"


def _contexts(stdout: str, framework: str) -> dict[int, dict[str, Any]]:
    """``[host N] slice context (<framework>): {...}`` lines, by the host of the prefix."""
    found = {}
    for m in re.finditer(rf"^\[host (\d+)\] slice context \({framework}\): (.*)$", stdout,
                         re.MULTILINE):
        found[int(m.group(1))] = json.loads(m.group(2))
    return found


def _check(stdout: str, framework: str) -> None:
    ctx = _contexts(stdout, framework)
    assert sorted(ctx) == [0, 1], stdout[-2000:]  # both hosts ran, each under its prefix
    assert [ctx[h]["host_index"] for h in (0, 1)] == [0, 1]
    assert [ctx[h]["process_index"] for h in (0, 1)] == [0, 1]
    assert {c["process_count"] for c in ctx.values()} == {2}
    assert {c["topology"] for c in ctx.values()} == {"2x2x2"}
    assert {c["accelerator_type"] for c in ctx.values()} == {"v4-16"}
    assert len({c["coordinator_address"] for c in ctx.values()}) == 1
    for host in (0, 1):
        assert re.search(rf"^\[host {host}\] step 3 loss ", stdout, re.MULTILINE)


def test_torch_xla_example(run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, ckpt = run
    _check(proc.stdout, "torch_xla")
    assert (ckpt / "torch-example.pt").is_file()


@pytest.mark.skipif(not HAS_JAX, reason="jax is not installed (the workloads extra adds it)")
def test_jax_example(run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, ckpt = run
    _check(proc.stdout, "jax")
    assert (ckpt / "jax-example.npz").is_file()
    # One global step: both hosts report the same loss (XLA reduced across processes).
    losses = re.findall(r"^\[host (\d)\] step 3 loss (\S+)$", proc.stdout, re.MULTILINE)
    assert len({loss for _, loss in losses[-2:]}) == 1, losses
