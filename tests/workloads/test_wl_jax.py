"""The JAX trainer: one global mesh over real processes (jax.distributed, gloo collectives
on CPU), checked against a single process training the same global batch.

2 hosts x 4 devices and 1 process x 8 devices run the same program on the same data; the
cross-host all-reduces and all-gathers really run (unlike XLA:CPU under torch_xla), so the
two runs' losses agree to float32 reduction-order noise (tolerance 1e-4 relative).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

jax = pytest.importorskip("jax")

from raytpu.workloads.jax_trainer import simulation_env  # noqa: E402

STEPS, BATCH, SEQ = 6, 4, 32

SCRIPT = """
import json, sys
import jax
rank, world, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
if world > 1:
    jax.distributed.initialize(f"127.0.0.1:{{port}}", world, rank)
from raytpu.facts.catalog import slice_shape
from raytpu.spec.training import ModelConfig, TrainConfig
from raytpu.workloads.jax_trainer import train_jax
from raytpu.workloads.loop import HostPlace, RecordingHooks
from raytpu.workloads.metrics import MfuBasis

cfg = TrainConfig(steps={steps}, preset="tiny", model=ModelConfig(seq_len={seq}),
                  data={data!r}, batch_per_host={batch} * (2 // world), checkpoint_every=100,
                  fsdp=True, log_every=3)
basis = MfuBasis.for_run(cfg.architecture(), slice_shape("v4-16"), 1, simulated=True,
                         seq_len={seq}, framework="jax", processes=jax.process_count(),
                         global_devices=len(jax.devices()))
hooks = RecordingHooks()
summary = train_jax(cfg, hooks, HostPlace(rank, world, rank), basis)
print(json.dumps({{"records": hooks.records, "processes": summary.processes,
                  "devices": summary.global_devices}}))
"""


def _run(world: int, devices: int, data: Path, tmp: Path) -> list[dict[str, Any]]:
    script = tmp / f"jax_{world}.py"
    script.write_text(textwrap.dedent(SCRIPT).format(steps=STEPS, seq=SEQ, batch=BATCH,
                                                     data=str(data)))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, **simulation_env(devices), OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, str(script), str(r), str(world), str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for r in range(world)]
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stderr[-3000:]
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    return outs


@pytest.mark.slow
def test_two_hosts_train_like_one_process_of_the_same_global_batch(
    tmp_path: Path, text_dir: Path
) -> None:
    two = _run(2, 4, text_dir, tmp_path)
    one = _run(1, 8, text_dir, tmp_path)
    assert [o["processes"] for o in two] == [2, 2]
    assert {o["devices"] for o in two + one} == {8}
    rank0, single = two[0]["records"], one[0]["records"]
    assert two[1]["records"] == []  # only the reporting host publishes
    assert [r["step"] for r in rank0] == list(range(1, STEPS + 1))
    losses = [r["loss"] for r in rank0]
    assert losses[-1] < losses[0] - 0.3  # it trains
    assert losses == pytest.approx([r["loss"] for r in single], rel=1e-4)
    for r in rank0:
        assert (r["framework"], r["processes"], r["global_devices"]) == ("jax", 2, 8)
        assert r["mfu"] > 0


@pytest.mark.slow
def test_a_single_text_file_trains(tmp_path: Path, text_dir: Path) -> None:
    """``--data big.txt``: the file is text, never loaded as a .npy shard."""
    (out,) = _run(1, 8, text_dir / "a.txt", tmp_path)
    assert [r["step"] for r in out["records"]] == list(range(1, STEPS + 1))
