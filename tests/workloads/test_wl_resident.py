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
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("ray")
pytest.importorskip("torch")

from raytpu.facts.catalog import slice_shape
from raytpu.workloads import resident
from raytpu.workloads.config import LaunchOptions, TrainConfig, from_argv, to_argv
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


def test_hosts_wait_900_s_for_a_driver_unless_told_otherwise(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Longer than a head pod's restart and a resubmission, image pull included."""
    watched: list[tuple[str, tuple[object, ...]]] = []

    class NotStarted:
        def __init__(self, target: Any, args: tuple[object, ...], **_: object) -> None:
            watched.append((target.__name__, args))

        def start(self) -> None:
            pass

    monkeypatch.setattr(resident.threading, "Thread", NotStarted)
    monkeypatch.delenv(ORPHAN_ENV, raising=False)
    resident.ResidentHost()
    monkeypatch.setenv(ORPHAN_ENV, "12")
    resident.ResidentHost()
    assert watched == [("_watch", (900.0,)), ("_watch", (12.0,))]


class _Group:
    id = SimpleNamespace(hex=lambda: "pg01")


def test_an_orphan_that_cannot_free_its_slices_says_so_and_retries(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[object] = []
    slept: list[float] = []

    def remove(pg: object) -> None:
        calls.append(pg)
        if len(calls) < 3:
            raise ConnectionError("GCS unavailable")

    monkeypatch.setattr(resident, "remove_placement_group", remove)
    monkeypatch.setattr(resident.time, "sleep", slept.append)
    group = _Group()
    assert resident.free_slices(group)
    assert calls == [group] * 3 and slept == [1.0, 5.0]
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "raytpu resident host (orphaned): removing placement group pg01 failed (attempt 1): "
        "ConnectionError('GCS unavailable'); its TPU slices stay held until it succeeds; "
        "retrying in 1 s",
        "raytpu resident host (orphaned): removing placement group pg01 failed (attempt 2): "
        "ConnectionError('GCS unavailable'); its TPU slices stay held until it succeeds; "
        "retrying in 5 s"]
    assert resident.free_slices(None)  # a host outside any group has nothing to free
    assert len(calls) == 3


def test_an_orphan_stops_freeing_its_slices_once_a_driver_is_back(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[object] = []

    def remove(pg: object) -> None:
        calls.append(pg)
        raise ConnectionError("GCS unavailable")

    monkeypatch.setattr(resident, "remove_placement_group", remove)
    monkeypatch.setattr(resident.time, "sleep", lambda s: None)
    assert not resident.free_slices(_Group(), orphaned=lambda: False)
    assert len(calls) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "raytpu resident host: a driver is back; the slices are its again")


class _Host:
    """A resident actor handle: ``info.remote()`` answers its info."""

    def __init__(self, rank: int) -> None:
        self.info = SimpleNamespace(remote=lambda: {"rank": rank, "pid": 100 + rank})


def _attach_with(monkeypatch: pytest.MonkeyPatch, bundles: int | None,
                 actors: dict[str, _Host]) -> tuple[object, list[str]]:
    torn: list[str] = []

    def get_placement_group(name: str) -> object:
        if bundles is None:
            raise ValueError(f"no placement group {name}")
        return SimpleNamespace(bundle_count=bundles)

    def get_actor(name: str, namespace: str) -> _Host:
        assert namespace == "raytpu"
        if name not in actors:
            raise ValueError(f"no actor {name}")
        return actors[name]

    monkeypatch.setattr(resident.ray.util, "get_placement_group", get_placement_group)
    monkeypatch.setattr(resident.ray, "get_actor", get_actor)
    monkeypatch.setattr(resident.ray, "get", lambda refs, timeout=None: list(refs))
    monkeypatch.setattr(resident, "teardown", torn.append)
    return resident.attach("r"), torn


def test_attach_finds_a_whole_group_in_rank_order(monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = _Host(1), _Host(0)  # bundle 0 holds rank 1
    found, torn = _attach_with(monkeypatch, 2, {"raytpu-resident-r-0": first,
                                                "raytpu-resident-r-1": second})
    assert (found, torn) == ([second, first], [])
    assert _attach_with(monkeypatch, None, {}) == (None, [])  # no group: nothing to tear down


@pytest.mark.parametrize("actors", [
    {"raytpu-resident-r-0": _Host(0)},  # a host lost: its actor is gone
    # A group made by a driver that died before its hosts joined (rank -1).
    {"raytpu-resident-r-0": _Host(0), "raytpu-resident-r-1": _Host(-1)},
])
def test_attach_tears_a_half_made_group_down(monkeypatch: pytest.MonkeyPatch,
                                             actors: dict[str, _Host]) -> None:
    assert _attach_with(monkeypatch, 2, actors) == (None, ["r"])


@pytest.mark.parametrize(("fails", "runs", "raised"), [(2, 3, False), (3, 3, True)])
def test_a_lost_host_restarts_the_group_up_to_max_failures(
        monkeypatch: pytest.MonkeyPatch, fails: int, runs: int, raised: bool) -> None:
    """--max-failures 2: two lost groups are replaced (three runs); a third loss ends it."""
    made: list[int] = []
    ran: list[int] = []
    torn: list[str] = []

    def run(hosts: list[object], *_: object) -> None:
        ran.append(len(ran))
        if len(ran) <= fails:
            raise resident.ray.exceptions.RayActorError()

    monkeypatch.setattr(resident.ray, "get_runtime_context",
                        lambda: SimpleNamespace(namespace="raytpu"))
    monkeypatch.setattr(resident, "attach", lambda name: None)
    monkeypatch.setattr(resident, "_create", lambda *a: made.append(1) or ["host"])
    monkeypatch.setattr(resident, "pids", lambda hosts: [1])
    monkeypatch.setattr(resident, "_run", run)
    monkeypatch.setattr(resident, "teardown", torn.append)
    opts = LaunchOptions(storage_path="/tmp/runs", run_name="r", max_failures=2,
                         resident=True)
    if raised:
        with pytest.raises(resident.ray.exceptions.RayActorError):
            resident.fit_resident(TrainConfig(), opts, sink=None)
    else:
        resident.fit_resident(TrainConfig(), opts, sink=None)
    assert (len(made), len(ran), torn) == (runs, runs, ["r"] * (fails + (not raised)))


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
