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
from raytpu.facts.gcs_ft_env import KUBERAY_RECONNECT_TIMEOUT_S, RECONNECT_ENV
from raytpu.spec.training import LaunchOptions, TrainConfig, from_argv, to_argv
from raytpu.workloads.head_failover import (
    driver_process_env,
    resident_hosts,
    start_driver,
    step_records,
)
from raytpu.workloads.local_cluster import LocalSlices
from raytpu.workloads.processes import marked
from raytpu.workloads.resident import (
    ORPHAN_ENV,
    SLICE_NAME_LABEL,
    latest_checkpoint,
    orphan_timeout_s,
    write_run_checkpoint,
)


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


def test_the_orphan_timer_never_outlasts_the_raylets_reconnect_timeout() -> None:
    # A host's raylet exits (with the resident actor) once the head has been gone for the
    # reconnect timeout: KubeRay's 600 s unless the stack raises it. An orphan timer longer
    # than that (900 s before) could never run out; it follows the real limit instead.
    assert orphan_timeout_s({}) == KUBERAY_RECONNECT_TIMEOUT_S == 600
    assert orphan_timeout_s({RECONNECT_ENV: "1200"}) == 1200
    assert orphan_timeout_s({ORPHAN_ENV: "900"}) == 600  # capped at what the raylet waits
    assert orphan_timeout_s({ORPHAN_ENV: "10", RECONNECT_ENV: "1200"}) == 10


def test_the_slice_name_label_is_rays() -> None:
    import ray._raylet

    assert SLICE_NAME_LABEL == ray._raylet.RAY_NODE_TPU_SLICE_NAME_KEY


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


def _free(cluster: LocalSlices, resource: str) -> float:
    probe = ("import logging, ray; ray.init(logging_level=logging.ERROR, log_to_driver=False);"
             f" print(ray.available_resources().get({resource!r}, 0))")
    out = subprocess.run([sys.executable, "-c", probe], env=driver_process_env(cluster),
                         capture_output=True, text=True, timeout=120, check=True)
    return float(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_second_run_on_the_group_gets_the_free_slice_not_the_held_one() -> None:
    """Two slices of v4-16 in one group, two resident runs. The first run's slice stays
    taken (its TPU-v4-16-head held) after its driver is gone, so the second run's
    reservation can only pick the other slice; before, the head was released and a second
    run could land on the busy slice's worker 0 and wait out its timeout."""
    pytest.importorskip("torch_xla")
    scratch = Path(tempfile.mkdtemp(prefix="rtpu-r2-"))
    shape = slice_shape("v4-16")
    head = f"TPU-{shape.accelerator_type}-head"

    def train(run: str) -> list[str]:
        return ["--tpu", "v4-16", "--steps", "400", "--checkpoint-every", "100",
                "--storage-path", str(scratch / "ckpt"), "--run-name", run, "--resident"]

    try:
        with LocalSlices(shape, num_slices=2, scratch=scratch / "c",
                         connect_driver=False) as cluster:
            assert _free(cluster, head) == 2
            first = start_driver(cluster, train("one"), scratch / "m1.jsonl",
                                 scratch / "d1.log")
            deadline = time.monotonic() + 240
            while not step_records(scratch / "m1.jsonl"):
                assert first.poll() is None and time.monotonic() < deadline, \
                    (scratch / "d1.log").read_text()
                time.sleep(0.2)
            os.killpg(first.pid, signal.SIGKILL)  # the driver goes; its hosts stay
            first.wait(timeout=30)
            assert resident_hosts(scratch / "d1.log") is not None
            assert _free(cluster, head) == 1  # the first run's slice is still taken
            second = start_driver(cluster, train("two"), scratch / "m2.jsonl",
                                  scratch / "d2.log")
            deadline = time.monotonic() + 240
            while not step_records(scratch / "m2.jsonl"):
                assert second.poll() is None and time.monotonic() < deadline, \
                    (scratch / "d2.log").read_text()
                time.sleep(0.2)
            assert _free(cluster, head) == 0 and _free(cluster, "TPU") == 0
            os.killpg(second.pid, signal.SIGKILL)
            second.wait(timeout=30)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
