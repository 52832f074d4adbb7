"""`raytpu train --local --framework jax`: Ray Train's JaxTrainer on the simulated slice
(2 hosts x 4 CPU devices, one global mesh over jax.distributed with gloo collectives); a
host is killed, replaced, and training resumes from the last JAX checkpoint and finishes
with no step lost (the torch_xla rehearsal, test_wl_rehearsal.py, for JAX)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray.train")
pytest.importorskip("jax")

from raytpu.workloads.processes import marked

pytestmark = pytest.mark.slow

STEPS, EVERY, KILL_AT = 8, 3, 5


def test_jax_host_failure_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    mark = uuid.uuid4().hex
    raytpu = Path(sys.executable).with_name("raytpu")
    cmd = [
        str(raytpu), "train", "--local", "--tpu", "v4-16", "--framework", "jax",
        "--model", "tiny", "--seq-len", "32", "--batch-per-host", "4",
        "--steps", str(STEPS), "--checkpoint-every", str(EVERY),
        "--fail-host-at-step", str(KILL_AT), "--checkpoint-dir", str(tmp_path / "ckpt"),
        "--metrics-out", str(metrics), "--no-progress",
    ]
    env = dict(os.environ, RAYTPU_TEST_MARK=mark)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "killing simulated host sim-v4-16-s0-w1" in proc.stdout + proc.stderr

    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_step[int(r["step"])].append(r)
    assert sorted(by_step) == list(range(1, STEPS + 1)), "a step was lost"
    for r in rows:
        assert (r["framework"], r["processes"], r["global_devices"]) == ("jax", 2, 8)
        assert r["mfu"] > 0
    # Killed after step 5, last checkpoint at step 3: steps 4 and 5 ran twice, the second
    # time from the restored parameters and moments, on the same data: the same loss.
    twice = sorted(s for s, rs in by_step.items() if len(rs) == 2)
    assert twice == [4, 5]
    for s in twice:
        first, again = by_step[s]
        assert (first["attempt"], again["attempt"]) == (1, 2)
        assert (first["retrained"], again["retrained"]) == (False, True)
        assert again["loss"] == pytest.approx(first["loss"], rel=1e-5)
    assert by_step[STEPS][-1]["loss"] < by_step[1][0]["loss"]
    summary = proc.stdout.strip().splitlines()[-1]
    assert f"done: step {STEPS}/{STEPS}" in summary and "2 attempt(s)" in summary
    assert marked({"RAYTPU_TEST_MARK": mark}) == []
