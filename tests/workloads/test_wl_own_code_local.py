"""``raytpu run --local -- CMD`` for real on a simulated 2-host slice: a failing host fails the
run, which restarts every host's process (``--max-failures``), the restarted command finds
what it left in its checkpoint location, and the exit status is the failing host's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("ray.train")

pytestmark = pytest.mark.slow

SCRIPT = """\
import pathlib, sys
from raytpu.workloads import slice_context

ctx = slice_context()
ckpt = pathlib.Path(ctx.checkpoint_dir)
ckpt.mkdir(parents=True, exist_ok=True)
mark = ckpt / f"host-{ctx.host_index}"
print("start", "resumed" if mark.exists() else "fresh", flush=True)
mark.write_text("seen")
sys.exit(3 if ctx.host_index == 1 else 0)
"""


def test_a_failing_host_restarts_the_slice_and_sets_the_exit_status(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "Pulumi.t.yaml").write_text(yaml.safe_dump({"config": {
        "gcp:project": "acme-ml", "raytpu:zone": "us-central2-b",
        "raytpu:slices": [{"name": "v4", "tpu": "v4-16"}]}}))
    work = tmp_path / "code"
    work.mkdir()
    (work / "job.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "TPU_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "raytpu", "run", "--local", "--stack", "t", "--stacks-dir",
         str(stacks), "--working-dir", str(work), "--checkpoint-dir", str(tmp_path / "runs"),
         "--max-failures", "1", "--", "python", "job.py"],
        capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr[-3000:]
    starts = re.findall(r"^\[host (\d)\] start (\w+)$", proc.stdout, re.MULTILINE)
    # Two attempts of host 1 (the failure restarted it), the second resuming.
    assert [s for h, s in starts if h == "1"] == ["fresh", "resumed"], proc.stdout
    assert "error: host 1 exited first, with 3" in proc.stderr
