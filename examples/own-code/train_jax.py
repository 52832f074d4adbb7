"""A few steps of a small JAX model on every host of a slice, with JAX's multi-host setup
(``jax.distributed``), resuming from and writing a checkpoint in the run's checkpoint
location.

    raytpu run --local --stack staging --working-dir examples/own-code -- python train_jax.py
    raytpu submit --stack staging --working-dir examples/own-code -- python train_jax.py

One process per host; ``jax.distributed.initialize`` meets at the run's coordinator
(process 0), after which ``jax.devices()`` lists every chip of every host and one jitted
step runs over a global mesh: XLA reduces the gradients across hosts. On the local
simulated slice the devices are the processes' CPUs and the cross-process collectives go
through gloo.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os

import fsspec
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec
from raytpu.workloads import slice_context

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
args = parser.parse_args()

ctx = slice_context()
print("slice context (jax):", json.dumps({**dataclasses.asdict(ctx), "process_index":
                                    ctx.process_index, "process_count": ctx.process_count}),
      flush=True)

if os.environ.get("PJRT_DEVICE", "").upper() != "TPU":  # the local simulated slice
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(coordinator_address=ctx.coordinator_address,
                           num_processes=ctx.process_count, process_id=ctx.process_index)
mesh = jax.make_mesh((jax.device_count(),), ("data",))
batch = NamedSharding(mesh, PartitionSpec("data"))
replicated = NamedSharding(mesh, PartitionSpec())
target = jnp.arange(16.0) / 16


@jax.jit
def train_step(w: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    def loss_fn(w: jax.Array) -> jax.Array:
        return jnp.mean((x @ w - x @ target) ** 2)

    loss, grad = jax.value_and_grad(loss_fn)(w)  # the mean over the global batch
    return w - 0.1 * grad, loss


checkpoint = f"{ctx.checkpoint_dir}/jax-example.npz"
fs, path = fsspec.core.url_to_fs(checkpoint)
w_host, start = np.zeros(16, np.float32), 0
if fs.exists(path):  # a restarted or resubmitted run resumes here
    with fs.open(path, "rb") as f:
        saved = np.load(io.BytesIO(f.read()))
    w_host, start = saved["w"], int(saved["step"])
    print(f"resumed at step {start}", flush=True)
w = jax.device_put(w_host, replicated)

for step in range(start + 1, start + args.steps + 1):
    rng = np.random.default_rng(step * ctx.process_count + ctx.process_index)
    local = rng.standard_normal((8 * jax.local_device_count(), 16), dtype=np.float32)
    x = jax.make_array_from_process_local_data(batch, local)  # this host's shard
    w, loss = train_step(w, x)
    print(f"step {step} loss {float(loss):.5f}", flush=True)

if ctx.is_coordinator:  # one writer; w is replicated on every host
    fs.makedirs(fs._parent(path), exist_ok=True)
    buffer = io.BytesIO()
    np.savez(buffer, w=np.asarray(w.addressable_data(0)), step=start + args.steps)
    with fs.open(path, "wb") as f:
        f.write(buffer.getvalue())
    print(f"checkpoint written: {checkpoint}", flush=True)
jax.distributed.shutdown()
