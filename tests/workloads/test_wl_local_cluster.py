"""The launcher for real on a simulated 2-host v4-16 slice (local Ray nodes, XLA:CPU).

One cluster serves the train and resume tests; the host-failure rehearsal runs the CLI
in its own process with its own cluster (test_wl_rehearsal.py).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray.train")
pytest.importorskip("torch_xla")

from raytpu.facts.catalog import slice_shape
from raytpu.spec.training import LaunchOptions, TrainConfig
from raytpu.workloads.local_cluster import LocalSlices
from raytpu.workloads.processes import group_members

pytestmark = pytest.mark.slow

V4_16 = slice_shape("v4-16")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSlices]:
    # A home with someone's ~/.ray/auth_token, as any earlier local `ray.init()` leaves:
    # Ray then starts the head with token auth, and the cluster must still come up.
    home = tmp_path_factory.mktemp("home")
    (home / ".ray").mkdir()
    (home / ".ray" / "auth_token").write_text(uuid.uuid4().hex)
    saved_home = os.environ["HOME"]
    os.environ["HOME"] = str(home)
    try:
        c = LocalSlices(V4_16)
        with c:
            groups = c._groups()
            yield c
    finally:
        os.environ["HOME"] = saved_home
    # Every process of every node is gone (agents included), not just the raylets.
    assert groups and all(group_members(g) == [] for g in groups)


def _connect(address: str, token: str) -> subprocess.CompletedProcess[str]:
    """A separate driver that joins the cluster with ``token`` and counts its nodes."""
    probe = f"import ray; ray.init(address={address!r}); print(len(ray.nodes()))"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                          text=True, timeout=120)


def test_cluster_admits_only_drivers_with_its_token(cluster: LocalSlices) -> None:
    ok = _connect(cluster.address, cluster._token)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert ok.stdout.strip().splitlines()[-1] == "3"  # the head and two hosts
    wrong = _connect(cluster.address, uuid.uuid4().hex)
    assert wrong.returncode != 0
    assert "InvalidAuthToken" in wrong.stderr


def test_nodes_look_like_a_v4_16_slice(cluster: LocalSlices) -> None:
    import ray

    hosts = sorted(
        (n for n in ray.nodes() if n["Alive"] and n["Resources"].get("TPU")),
        key=lambda n: n["Labels"]["ray.io/tpu-worker-id"],
    )
    assert [n["Resources"]["TPU"] for n in hosts] == [4.0, 4.0]
    assert [n["Labels"]["ray.io/tpu-worker-id"] for n in hosts] == ["0", "1"]
    assert {n["Labels"]["ray.io/tpu-pod-type"] for n in hosts} == {"v4-16"}
    assert {n["Labels"]["ray.io/tpu-slice-name"] for n in hosts} == {"sim-v4-16-s0"}
    assert hosts[0]["Resources"].get("TPU-v4-16-head") == 1.0
    assert "TPU-v4-16-head" not in hosts[1]["Resources"]
    assert all(n["Resources"].get("accelerator_type:TPU-V4") == 1.0 for n in hosts)


def test_submit_needs_the_clusters_token(cluster: LocalSlices,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # `raytpu submit`'s client against a real Ray 2.60 dashboard with token auth.
    from raytpu.operations.submit import Submission, SubmitError, send_submission

    sub = Submission(address=f"http://127.0.0.1:{cluster.dashboard_port}",
                     entrypoint="python -c 'print(1)'", runtime_env={}, metadata={},
                     cluster_name="rc", namespace="ray", storage_path="/tmp", auth="token")
    for var in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(SubmitError, match=r"RAY_AUTH_TOKEN nor RAY_AUTH_TOKEN_PATH is set; "
                       r"get it with: export RAY_AUTH_MODE=token RAY_AUTH_TOKEN=.*get secret rc"):
        send_submission(sub)
    monkeypatch.setenv("RAY_AUTH_TOKEN", uuid.uuid4().hex)
    refused = r"AuthenticationError: .*Invalid authentication token\. get it with"
    with pytest.raises(SubmitError, match=refused):
        send_submission(sub)
    monkeypatch.setenv("RAY_AUTH_TOKEN", cluster._token)
    assert send_submission(sub).startswith("raysubmit_")


@pytest.fixture(scope="module")
def first_run(cluster: LocalSlices, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from raytpu.workloads.launcher import launch

    root = tmp_path_factory.mktemp("run")
    opts = LaunchOptions(storage_path=str(root / "ckpt"), metrics_out=str(root / "m.jsonl"),
                         progress=False)
    memory: list[int] = []

    def sample_once(records: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
        if not memory and any(r["step"] >= 6 for r in records):  # training, both hosts busy
            memory.append(cluster.memory_pss_bytes())

    result = launch(TrainConfig(steps=12, checkpoint_every=6), opts, on_progress=sample_once)
    return {"opts": opts, "result": result, "memory": memory}


def test_two_hosts_train_and_the_loss_goes_down(first_run: dict[str, Any]) -> None:
    import json

    result = first_run["result"]
    rows = [json.loads(line) for line in Path(first_run["opts"].metrics_out).read_text()
            .splitlines()]
    assert rows == result.records
    assert [r["step"] for r in rows] == list(range(1, 13))
    assert {r["attempt"] for r in rows} == {1} and not any(r["retrained"] for r in rows)
    assert all(r["tokens"] == 2 * 8 * 128 for r in rows)  # two hosts' batches per step
    assert all(r["tokens_per_s"] > 0 and 0 < r["mfu"] < 1e-3 and r["simulated"] for r in rows)
    first = statistics.mean(r["loss"] for r in rows[:3])
    last = statistics.mean(r["loss"] for r in rows[-3:])
    assert first > 4.5 and last < first - 1.0, (first, last)
    assert result.attempts == 1 and result.last_step == 12


def test_two_host_slice_fits_in_4_gb(first_run: dict[str, Any]) -> None:
    (pss,) = first_run["memory"]
    assert 1.5e9 < pss < 4e9, f"{pss / 1e9:.2f} GB"


def test_a_second_run_resumes_from_the_checkpoint(
    cluster: LocalSlices, first_run: dict[str, Any]
) -> None:
    from raytpu.workloads.launcher import launch

    opts = first_run["opts"]
    before = first_run["result"].records
    result = launch(TrainConfig(steps=15, checkpoint_every=6), opts)
    steps = [r["step"] for r in result.records]
    assert steps == [13, 14, 15]  # previous last + 1 onwards
    assert {r["attempt"] for r in result.records} == {2}  # the run's attempts keep counting
    assert not any(r["retrained"] for r in result.records)
    # It continued the trained model, not a fresh one (which starts at ~5.5).
    assert result.records[0]["loss"] < before[0]["loss"] - 1.0
    ckpts = sorted(p.name for p in (Path(opts.storage_path) / "train").glob("checkpoint_step*"))
    assert len(ckpts) == 2 and ckpts[-1].startswith("checkpoint_step0000015")
