"""Both trainers record the goodput events through their hooks: every step once per
execution, the attempt's first step, each checkpoint save and restore with its bytes,
the resume; and a run resumed from a checkpoint accounts every step."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from no_ray import InProcessHooks  # noqa: E402
from raytpu.facts.catalog import slice_shape  # noqa: E402
from raytpu.spec.flops import param_count  # noqa: E402
from raytpu.spec.training import ModelConfig, TrainConfig  # noqa: E402
from raytpu.workloads.goodput import compute  # noqa: E402
from raytpu.workloads.metrics import MfuBasis  # noqa: E402
from raytpu.workloads.trainer import HostPlace, make_parallelism, train  # noqa: E402

TINY = ModelConfig(n_layers=1, d_model=32, n_heads=2, seq_len=32)


def _kinds(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == kind]


def _train(cfg: TrainConfig, hooks: InProcessHooks) -> list[dict[str, Any]]:
    basis = MfuBasis.for_run(cfg.model, slice_shape(cfg.tpu), 1, simulated=True)
    train(cfg, make_parallelism(eager=True), hooks, HostPlace(0, 1, 0), basis)
    return hooks.events


def test_the_torch_trainer_records_steps_saves_and_the_restore(
    tmp_path: Path, text_dir: Path
) -> None:
    base = dict(model=TINY, data=str(text_dir), batch_per_host=2, checkpoint_every=3)
    ckpt = tmp_path / "ckpt"
    first = _train(TrainConfig(steps=4, **base), InProcessHooks(ckpt))  # type: ignore[arg-type]
    second = _train(TrainConfig(steps=7, **base), InProcessHooks(ckpt))  # type: ignore[arg-type]

    assert [e["step"] for e in _kinds(first, "step")] == [1, 2, 3, 4]
    assert [e["step"] for e in _kinds(first, "first_step")] == [1]
    saves = _kinds(first, "checkpoint_save")
    assert [e["step"] for e in saves] == [3, 4]
    # fp32 weights and AdamW's two moments at least (plus the step counters).
    assert all(e["bytes"] >= 12 * param_count(TINY) and e["seconds"] > 0 for e in saves)
    assert _kinds(first, "checkpoint_restore") == []

    (restore,) = _kinds(second, "checkpoint_restore")
    assert restore["step"] == 4 and restore["bytes"] == saves[-1]["bytes"]
    assert [e["step"] for e in _kinds(second, "resume")] == [5]
    assert [e["step"] for e in _kinds(second, "step")] == [5, 6, 7]
    assert [e["step"] for e in _kinds(second, "first_step")] == [5]
    steps = _kinds(first + second, "step")
    assert all(a["t"] <= b["t"] for a, b in itertools.pairwise(steps))

    start = min(e["t"] - e.get("seconds", 0) for e in first)
    g = compute([{"event": "job_start", "t": start}, *first, *second])
    assert g.productive_steps == 7 and g.max_productive_step == 7 and g.recomputed_steps == 0
    assert g.checkpoint_saves == 4 and g.checkpoint_every == 3  # 3, 4 (the last), 6, 7
    assert g.badput_time["restore"] > 0
    assert abs(g.accounted_time - g.total_elapsed_time) < 1e-6


SCRIPT = """
import itertools
import json
from raytpu.facts.catalog import slice_shape
from raytpu.spec.training import ModelConfig, TrainConfig
from raytpu.workloads.jax_trainer import train_jax
from raytpu.workloads.loop import HostPlace, RecordingHooks
from raytpu.workloads.metrics import MfuBasis

cfg = TrainConfig(steps=5, preset="tiny", model=ModelConfig(seq_len=32), data={data!r},
                  batch_per_host=2, checkpoint_every=2, log_every=2)
basis = MfuBasis.for_run(cfg.architecture(), slice_shape("v4-16"), 1, simulated=True,
                         seq_len=32, framework="jax")
hooks = RecordingHooks()
train_jax(cfg, hooks, HostPlace(0, 1, 0), basis)
print(json.dumps(hooks.events))
"""


@pytest.mark.slow
def test_the_jax_trainer_records_the_same_events(tmp_path: Path, text_dir: Path) -> None:
    pytest.importorskip("jax")
    script = tmp_path / "jax_goodput.py"
    script.write_text(textwrap.dedent(SCRIPT).format(data=str(text_dir)))
    env = dict(os.environ, JAX_PLATFORMS="cpu", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    events: list[dict[str, Any]] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [e["step"] for e in _kinds(events, "step")] == [1, 2, 3, 4, 5]
    assert [e["step"] for e in _kinds(events, "first_step")] == [1]
    saves = _kinds(events, "checkpoint_save")
    assert [e["step"] for e in saves] == [2, 4, 5] and all(e["bytes"] > 0 for e in saves)
    g = compute(events)
    assert g.productive_steps == 5 and abs(g.accounted_time - g.total_elapsed_time) < 1e-6
