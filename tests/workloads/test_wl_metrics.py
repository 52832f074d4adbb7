"""Metrics: MFU arithmetic, attempt numbering, retrained flags, progress persistence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from raytpu.facts.catalog import slice_shape
from raytpu.spec.flops import train_flops_per_token
from raytpu.spec.training import ModelConfig
from raytpu.workloads.metrics import (
    REQUIRED_FIELDS,
    MetricsSink,
    MetricsWriter,
    MfuBasis,
    ProgressFile,
    step_record,
)


def _rec(step: int, attempt: int = 1) -> dict[str, object]:
    basis = MfuBasis.for_run(ModelConfig(), slice_shape("v4-16"), 1, simulated=True)
    return step_record(step=step, loss=1.0, tokens=2048, step_time_s=0.5, lr=1e-3,
                       attempt=attempt, basis=basis)


def test_mfu_is_against_every_chip_of_every_slice() -> None:
    model = ModelConfig()
    basis = MfuBasis.for_run(model, slice_shape("v4-16"), slices=2, simulated=False)
    assert basis.peak_flops == 2 * 8 * 275e12
    rec = step_record(step=1, loss=2.0, tokens=4096, step_time_s=0.25, lr=1e-3, attempt=1,
                      basis=basis)
    assert rec["tokens_per_s"] == 4096 / 0.25
    assert rec["mfu"] == pytest.approx(train_flops_per_token(model) * 16384 / (16 * 275e12))


def test_sink_numbers_attempts_and_flags_retrained_steps() -> None:
    sink = MetricsSink()
    assert sink.begin_attempt() == (1, True)
    sink.push([_rec(s) for s in (1, 2, 3, 4)])
    assert sink.begin_attempt() == (2, False)
    sink.push([_rec(s, attempt=2) for s in (3, 4, 5)])  # resumed from a step-2 checkpoint
    out, events = sink.drain()
    assert events == []
    assert [(r["step"], r["attempt"], r["retrained"]) for r in out] == [
        (1, 1, False), (2, 1, False), (3, 1, False), (4, 1, False),
        (3, 2, True), (4, 2, True), (5, 2, False),
    ]
    sink.event({"kind": "holding", "step": 5})
    assert sink.drain() == ([], [{"kind": "holding", "step": 5}])
    assert sink.progress() == {"attempts": 2, "max_step": 5}


def test_sink_continues_an_earlier_run() -> None:
    sink = MetricsSink(attempts_before=2, max_step_before=20)
    assert sink.begin_attempt() == (3, True)
    sink.push([_rec(20, 3), _rec(21, 3)])
    assert [r["retrained"] for r in sink.drain()[0]] == [True, False]


def test_progress_file_round_trip(tmp_path: Path) -> None:
    pf = ProgressFile(str(tmp_path / "runs" / "train"))
    assert pf.read() == {"attempts": 0, "max_step": 0}
    pf.write({"attempts": 3, "max_step": 42})
    assert pf.read() == {"attempts": 3, "max_step": 42}


def test_writer_appends_json_lines(tmp_path: Path) -> None:
    out = tmp_path / "m" / "metrics.jsonl"
    for steps in ((1, 2), (3,)):
        w = MetricsWriter(out, total_steps=3, show_progress=False)
        w.write([{**_rec(s), "retrained": False} for s in steps])
        w.close()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert all(set(REQUIRED_FIELDS) <= set(r) for r in rows)


def test_recording_hooks_keep_each_runs_records_and_never_restore() -> None:
    """The hooks ``benchmarks/mfu.py`` and the JAX subprocess tests drive a trainer with."""
    from raytpu.workloads.loop import RecordingHooks

    first, second = RecordingHooks(), RecordingHooks()
    assert first.begin_attempt() == (1, True)
    first.save(1, {"model": {}}, {})
    assert first.restore() is None  # a save keeps nothing to resume from
    first.publish([_rec(1)])
    first.publish([_rec(2)])
    assert [r["step"] for r in first.records] == [1, 2]
    assert second.records == []  # records belong to one instance, not the class
