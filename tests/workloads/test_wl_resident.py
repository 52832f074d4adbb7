"""Resident hosts (``--resident``, :mod:`raytpu.workloads.resident`): the run's own
checkpoint files, the launcher's refusals, and a second driver taking a run's hosts over
while the first one's training is still going (the head-loss case is
tests/workloads/test_wl_head_failover.py)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")
pytest.importorskip("torch")

from raytpu.facts.catalog import slice_shape
from raytpu.spec.training import LaunchOptions, TrainConfig, from_argv, to_argv
from raytpu.workloads.head_failover import (
    driver_process_env,
    resident_hosts,
    start_driver,
    step_records,
)
from raytpu.workloads.local_cluster import LocalSlices
from raytpu.workloads.processes import marked
from raytpu.workloads.resident import ORPHAN_ENV, latest_checkpoint, write_run_checkpoint


def _state(step: int) -> dict[str, object]:
    return {"step": step, "model": {}, "optim": {}}


def test_checkpoints_keep_the_newest_two_and_one_cut_short_is_never_restored(
        tmp_path: Path) -> None:
    run_dir = str(tmp_path / "run")
    assert latest_checkpoint(run_dir) is None
    for step in (3, 6, 9):
        write_run_checkpoint(run_dir, step, _state(step))
    kept = sorted(p.name.split("_")[1] for p in (tmp_path / "run").iterdir())
    assert kept == ["step0000006", "step0000009"]
    # A checkpoint whose meta.json (written last) never came: its writer died mid-way.
    cut = tmp_path / "run" / "checkpoint_step0000012_20261207-000000"
    cut.mkdir()
    (cut / "state.pt").write_bytes(b"partial")
    state = latest_checkpoint(run_dir)
    assert state is not None and state["step"] == 9


def test_resident_round_trips_and_is_refused_with_jax_or_a_command(
        capsys: pytest.CaptureFixture[str]) -> None:
    opts = LaunchOptions(storage_path="/tmp/runs", run_name="r", resident=True)
    assert "--resident" in to_argv(TrainConfig(), opts)
    assert from_argv(to_argv(TrainConfig(), opts)) == (TrainConfig(), opts)
    for extra in (["--framework", "jax"], ["--", "python", "my_train.py"]):
        with pytest.raises(SystemExit):
            from_argv(["--storage-path", "/tmp/runs", "--resident", *extra])
        err = capsys.readouterr().err
        assert "--resident" in err and ("jax" in err or "'python'" in err)


STEPS, EVERY = 30, 5


@pytest.mark.slow
def test_a_second_driver_takes_the_hosts_over_at_their_next_checkpoint() -> None:
    pytest.importorskip("torch_xla")
    scratch = Path(tempfile.mkdtemp(prefix="rtpu-rs-"))
    train = ["--tpu", "v4-16", "--steps", str(STEPS), "--checkpoint-every", str(EVERY),
             "--storage-path", str(scratch / "ckpt"), "--run-name", "takeover", "--resident"]
    first, second = scratch / "metrics-1.jsonl", scratch / "metrics-2.jsonl"
    try:
        with LocalSlices(slice_shape("v4-16"), scratch=scratch / "c",
                         connect_driver=False) as cluster:
            driver = start_driver(cluster, train, first, scratch / "driver-1.log")
            deadline = time.monotonic() + 240
            while len(step_records(first)) < 2:
                assert driver.poll() is None and time.monotonic() < deadline, \
                    (scratch / "driver-1.log").read_text()
                time.sleep(0.2)
            # The driver alone is lost (the head stays): the hosts train on, unaware.
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(timeout=30)
            recorded = max(int(r["step"]) for r in step_records(first))
            driver = start_driver(cluster, train, second, scratch / "driver-2.log")
            assert driver.wait(timeout=240) == 0, (scratch / "driver-2.log").read_text()
        assert not marked({"RAY_TMPDIR": str(scratch / "c" / "ray")})
        before = resident_hosts(scratch / "driver-1.log")
        after = resident_hosts(scratch / "driver-2.log")
        resumed = [int(r["step"]) for r in step_records(second)]
        final = latest_checkpoint(str(scratch / "ckpt" / "takeover"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert before is not None and before[0] == "started"
    assert after == ("taken over", before[1])  # the same processes, not new ones
    # Every host stopped at the same checkpoint after the takeover, and the new run went
    # on from it: nothing between the two drivers is lost, nothing trained twice beyond it.
    assert (resumed[0] - 1) % EVERY == 0 and resumed[0] > recorded
    assert resumed == list(range(resumed[0], STEPS + 1))
    assert final is not None and final["step"] == STEPS


def _free_tpus(cluster: LocalSlices) -> float:
    """The cluster's unreserved TPU chips, as a driver of its own sees them."""
    probe = ("import logging, ray; ray.init(logging_level=logging.ERROR, log_to_driver=False);"
             " print(ray.available_resources().get('TPU', 0))")
    out = subprocess.run([sys.executable, "-c", probe], env=driver_process_env(cluster),
                         capture_output=True, text=True, timeout=120, check=True)
    return float(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_hosts_no_driver_heartbeats_free_their_slice_and_exit() -> None:
    pytest.importorskip("torch_xla")
    psutil = pytest.importorskip("psutil")
    scratch = Path(tempfile.mkdtemp(prefix="rtpu-ro-"))
    train = ["--tpu", "v4-16", "--steps", "200", "--checkpoint-every", "50",
             "--storage-path", str(scratch / "ckpt"), "--run-name", "orphan", "--resident"]
    metrics = scratch / "metrics.jsonl"
    try:
        with LocalSlices(slice_shape("v4-16"), scratch=scratch / "c", connect_driver=False,
                         extra_env={ORPHAN_ENV: "10"}) as cluster:
            driver = start_driver(cluster, train, metrics, scratch / "driver.log")
            deadline = time.monotonic() + 240
            while not step_records(metrics):
                assert driver.poll() is None and time.monotonic() < deadline, \
                    (scratch / "driver.log").read_text()
                time.sleep(0.2)
            hosts = resident_hosts(scratch / "driver.log")
            assert hosts is not None and _free_tpus(cluster) == 0  # the run holds the slice
            os.killpg(driver.pid, signal.SIGKILL)  # `ray job stop`, and nobody resubmits
            driver.wait(timeout=30)
            deadline = time.monotonic() + 60
            while any(psutil.pid_exists(p) for p in hosts[1]):
                assert time.monotonic() < deadline, "orphaned resident hosts still running"
                time.sleep(0.5)
            deadline = time.monotonic() + 30
            while _free_tpus(cluster) != 2 * slice_shape("v4-16").chips_per_vm:
                assert time.monotonic() < deadline, "the orphans' slice is still reserved"
                time.sleep(1)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
