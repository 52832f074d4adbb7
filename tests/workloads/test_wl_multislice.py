"""Multislice: slice numbering, and two simulated v4-8 slices training as one job.

Each worker must get ``MEGASCALE_*`` for its own slice: the trainer refuses to start
without ``MEGASCALE_SLICE_ID`` when ``slices > 1``, and refuses hosts that claim the
same data shard, so a finished run means distinct slice ids reached both hosts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("ray.train")
pytest.importorskip("torch_xla")

from raytpu.spec.training import LaunchOptions, TrainConfig
from raytpu.workloads.launcher import slice_ids


def test_slice_ids_follow_worker_order() -> None:
    assert slice_ids(["s-b", "s-b", "s-a", "s-a"]) == [0, 0, 1, 1]
    assert slice_ids(["s-a", "s-b", "s-a"]) == [0, 1, 0]


@pytest.mark.slow
def test_two_slices_train_as_one_job(tmp_path: Path) -> None:
    from raytpu.workloads.local_mode import run_local

    metrics = tmp_path / "m.jsonl"
    cfg = TrainConfig(tpu="v4-8", slices=2, steps=4, checkpoint_every=4)
    report = run_local(cfg, LaunchOptions(storage_path=str(tmp_path / "ckpt"),
                                          metrics_out=str(metrics), progress=False))
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4] and report.attempts == 1
    assert all(r["tokens"] == 2 * 8 * 128 for r in rows)  # one host per slice, two slices
    assert rows[0]["mfu_peak_flops"] == 2 * 4 * 275e12  # both slices' chips
