"""`raytpu train --local --fail-host-at-step`: a host is lost, replaced, and training
resumes from the last checkpoint and finishes, with the retrained steps marked.

Runs the real CLI in its own process (its own cluster), then checks that nothing it
started is still running.
"""

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
pytest.importorskip("torch_xla")

from raytpu.workloads.goodput import compute
from raytpu.workloads.goodput_log import read_events
from raytpu.workloads.processes import marked

pytestmark = pytest.mark.slow

STEPS, EVERY, KILL_AT = 12, 5, 8


def test_host_failure_rehearsal_resumes_and_finishes(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    mark = uuid.uuid4().hex
    raytpu = Path(sys.executable).with_name("raytpu")
    cmd = [
        str(raytpu), "train", "--local", "--tpu", "v4-16", "--steps", str(STEPS),
        "--checkpoint-every", str(EVERY), "--fail-host-at-step", str(KILL_AT),
        "--checkpoint-dir", str(tmp_path / "ckpt"), "--metrics-out", str(metrics),
        "--no-progress",
    ]
    env = dict(os.environ, RAYTPU_TEST_MARK=mark)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=420)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "killing simulated host sim-v4-16-s0-w1" in proc.stdout + proc.stderr

    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_step[int(r["step"])].append(r)
    assert sorted(by_step) == list(range(1, STEPS + 1)), "a step was lost"
    assert rows[-1]["step"] == STEPS
    assert max(int(r["attempt"]) for r in rows) >= 2
    # The kill came after step 8; the last checkpoint was step 5: 6-8 were done twice.
    twice = sorted(s for s, rs in by_step.items() if len(rs) == 2)
    assert twice == [6, 7, 8]
    for s in twice:
        first, again = by_step[s]
        assert (first["retrained"], again["retrained"]) == (False, True)
        assert first["attempt"] == 1 and again["attempt"] == 2
        # Same checkpoint, same data: the retrained step computes the same loss.
        assert again["loss"] == pytest.approx(first["loss"], rel=1e-5)
    assert not any(r["retrained"] for s, rs in by_step.items() if s not in twice for r in rs)
    summary = proc.stdout.strip().splitlines()[-1]
    assert f"done: step {STEPS}/{STEPS}" in summary and "2 attempt(s)" in summary
    assert "host kill -> first resumed step" in summary

    # The run folder's goodput events account for every second and every step.
    g = compute(read_events(str(tmp_path / "ckpt" / "train")))
    assert g.productive_steps == STEPS and g.recomputed_steps == 3 and not g.running
    (incident,) = g.incidents
    assert (incident.kind, incident.step, incident.lost_steps) == ("host", KILL_AT, 3)
    assert {"restart", "startup", "restore", "lost"} <= set(incident.by_kind)
    assert abs(g.accounted_time - g.total_elapsed_time) <= 0.02 * g.total_elapsed_time
    assert 0 < g.goodput < 1 and f"goodput {g.goodput:.1%}" in proc.stdout

    # Every process of the simulated cluster is gone (they all inherited the mark).
    assert marked({"RAYTPU_TEST_MARK": mark}) == []
