"""FSDP through torch_xla SPMD, on one process with 8 virtual XLA:CPU devices.

The same trainer loop as on a TPU slice (mesh, sharded weights, gradients and AdamW
moments, partitioner-inserted all-gathers and reduce-scatters), checked three ways:

* sharded and replicated training give the same losses (tolerance 1e-4 relative: the
  partitioned program sums in another order; measured identical on XLA:CPU);
* each device holds exactly 1/8 of the parameters, gradients and optimizer state;
* the fit estimate (``raytpu.spec.memory_fit``) against what XLA really allocates: the
  sharded state per device exactly (from the devices' shards), the whole step within 35%
  of the compiled step program's buffer assignment (XLA's own memory report, dumped with
  ``--xla_dump_to``), and activation checkpointing lowering both.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

pytest.importorskip("torch_xla")

from no_ray import run_on_xla_cpu
from raytpu.facts.catalog import slice_shape
from raytpu.spec.memory_fit import estimate
from raytpu.spec.presets import preset

DEVICES = 8
SHAPE = "v6e-8"  # one host of 8 chips: what the 8 virtual devices stand for
MEMORY_BATCH, MEMORY_SEQ = 64, 64  # 8 sequences per device: activations dominate

SCRIPT = """
import glob, json, os, re
os.environ["XLA_FLAGS"] = "--xla_dump_to={dump}"
import torch_xla
from raytpu.facts.catalog import slice_shape
from raytpu.spec.training import ModelConfig, TrainConfig
from raytpu.workloads.fsdp import local_bytes
from raytpu.workloads.metrics import MfuBasis
from raytpu.workloads.parallel import SpmdDataParallel
from raytpu.workloads.trainer import HostPlace, train
from no_ray import InProcessHooks

spec = torch_xla._XLAC._get_xla_sharding_spec

def reports():
    return set(glob.glob("{dump}/*SyncTensorsGraph*memory-usage-report.txt"))

def run(fsdp, steps, batch, seq, remat=False):
    cfg = TrainConfig(steps=steps, preset="tiny", remat=remat, model=ModelConfig(seq_len=seq),
                      data={data!r}, batch_per_host=batch, checkpoint_every=100, log_every=2)
    basis = MfuBasis.for_run(cfg.architecture(), slice_shape("{shape}"), 1, simulated=True,
                             seq_len=seq)
    before = reports()
    par = SpmdDataParallel(1, fsdp=fsdp)
    hooks = InProcessHooks(None)
    summary = train(cfg, par, hooks, HostPlace(0, 1, 0), basis)
    params = list(summary.model.parameters())
    moments = [t for st in summary.optimizer.state.values()
               for k, t in st.items() if k in ("exp_avg", "exp_avg_sq")]
    totals = [int(re.search(r"Total bytes used: (\\d+)", open(f).read()).group(1))
              for f in reports() - before]
    return {{
        "losses": [r["loss"] for r in hooks.records],
        "param_bytes": sum(p.numel() * p.element_size() for p in params),
        "param_bytes_dev0": local_bytes(params),
        "grad_bytes_dev0": local_bytes([p.grad for p in params]),
        "param_specs": sorted({{spec(p) for p in params}}),
        "step_program_bytes": max(totals),
        "moment_bytes_dev0": local_bytes(moments),
    }}

out = {{
    "sharded": run(True, 3, 8, 32),
    "replicated": run(False, 3, 8, 32),
    "memory": run(True, 1, {mb}, {ms}),
    "memory_remat": run(True, 1, {mb}, {ms}, remat=True),
}}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("fsdp")
    data = tmp / "corpus"
    data.mkdir()
    (data / "a.txt").write_text("the quick brown fox jumps over the lazy dog\n" * 2000)
    script = textwrap.dedent(SCRIPT).format(dump=str(tmp / "dump"), data=str(data),
                                            shape=SHAPE, mb=MEMORY_BATCH, ms=MEMORY_SEQ)
    return run_on_xla_cpu(script, devices=DEVICES)


@pytest.mark.slow
def test_sharded_and_replicated_training_agree(runs: dict[str, Any]) -> None:
    sharded, replicated = runs["sharded"], runs["replicated"]
    assert len(sharded["losses"]) == 3
    assert sharded["losses"] == pytest.approx(replicated["losses"], rel=1e-4)
    assert sharded["losses"][-1] < sharded["losses"][0]  # it trains
    assert replicated["param_specs"] == ["{replicated}"]
    assert "{replicated}" not in sharded["param_specs"]


@pytest.mark.slow
def test_each_device_holds_an_eighth_of_the_state(runs: dict[str, Any]) -> None:
    sharded, replicated = runs["sharded"], runs["replicated"]
    total = sharded["param_bytes"]
    assert sharded["param_bytes_dev0"] == total // DEVICES
    assert sharded["grad_bytes_dev0"] == total // DEVICES
    assert sharded["moment_bytes_dev0"] == 2 * total // DEVICES  # AdamW's two moments
    assert replicated["param_bytes_dev0"] == total


def _estimate(remat: bool) -> dict[str, int]:
    # XLA:CPU keeps activations in fp32 (torch_xla's autocast casts to bf16 on TPU only;
    # the dumped program holds f32 buffers), hence compute_bytes=4 here.
    return estimate(preset("tiny"), slice_shape(SHAPE), batch_per_host=MEMORY_BATCH,
                    seq_len=MEMORY_SEQ, remat=remat, compute_bytes=4).bytes_per_chip


@pytest.mark.slow
def test_fit_estimate_matches_what_xla_allocates(runs: dict[str, Any]) -> None:
    measured, est = runs["memory"], _estimate(remat=False)
    assert est["params"] == measured["param_bytes_dev0"]
    assert est["grads"] == measured["grad_bytes_dev0"]
    assert est["optimizer"] == measured["moment_bytes_dev0"]
    assert est["total"] == pytest.approx(measured["step_program_bytes"], rel=0.35)
    remat = runs["memory_remat"]
    assert _estimate(remat=True)["total"] < est["total"]
    assert remat["step_program_bytes"] < measured["step_program_bytes"]
    assert _estimate(remat=True)["total"] == pytest.approx(remat["step_program_bytes"], rel=0.35)


def test_estimate_scales_state_with_the_shards() -> None:
    # Pure arithmetic, no XLA: 8-way sharding divides the persistent state by 8.
    tiny = preset("tiny")
    one = estimate(tiny, slice_shape(SHAPE), batch_per_host=8, seq_len=32, fsdp=False)
    eight = estimate(tiny, slice_shape(SHAPE), batch_per_host=8, seq_len=32, fsdp=True)
    for kind in ("params", "grads", "optimizer"):
        assert eight.bytes_per_chip[kind] * DEVICES == one.bytes_per_chip[kind]



# The state as the trainer lays it out, before step 1 (whose program would give the
# moments their parameters' sharding even if nothing had asked for it).
LAYOUT_SCRIPT = """
import json
import torch, torch_xla
from raytpu.spec.training import TrainConfig
from raytpu.workloads.optim import build_optimizer, materialize_state
from raytpu.workloads.parallel import SpmdDataParallel
from raytpu.workloads.trainer import build_model

def dev0_shapes(t):
    if not torch_xla._XLAC._get_xla_sharding_spec(t):  # not sharded: device 0 holds it whole
        return list(t.shape)
    (shards,) = torch_xla._XLAC._get_local_shards([t])
    return [list(d.shape) for d, dev in shards if dev == "CPU:0"][0]

cfg = TrainConfig(steps=1, preset="tiny")
par = SpmdDataParallel(1, fsdp=True)
model = build_model(cfg)
model.to(par.device)
par.shard_model(model)
opt = build_optimizer(model, cfg.optim)
materialize_state(opt)
par.shard_optimizer(opt)
out = []
for name, p in model.named_parameters():
    st = opt.state[p]
    out.append({{"name": name, "shape": list(p.shape), "param": dev0_shapes(p),
                "moments": [dev0_shapes(st[k]) for k in ("exp_avg", "exp_avg_sq")]}})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def layout() -> list[dict[str, Any]]:
    found: Any = run_on_xla_cpu(textwrap.dedent(LAYOUT_SCRIPT).format(), devices=DEVICES)
    return list(found)


def _split_largest(shape: list[int]) -> list[int]:
    """``shape`` with its largest dimension that 8 divides (the first on a tie) split 8 ways."""
    fits = [i for i, n in enumerate(shape) if n % DEVICES == 0]
    if not fits:
        return shape
    d = max(fits, key=lambda i: (shape[i], -i))
    return [n // DEVICES if i == d else n for i, n in enumerate(shape)]


@pytest.mark.slow
def test_weights_split_along_their_largest_dimension(layout: list[dict[str, Any]]) -> None:
    """The layout, not only the bytes: a split of the smallest dimension holds as many."""
    assert any(len(p["shape"]) == 2 and p["shape"][0] != p["shape"][1] for p in layout)
    for p in layout:
        assert p["param"] == _split_largest(p["shape"]), p["name"]


@pytest.mark.slow
def test_moments_are_sharded_before_the_first_step(layout: list[dict[str, Any]]) -> None:
    for p in layout:
        assert p["moments"] == [p["param"], p["param"]], p["name"]
    assert any(p["param"] != p["shape"] for p in layout)
