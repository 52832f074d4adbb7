"""A few steps of a small torch_xla model on every host of a slice, with torch_xla's
multi-host setup, resuming from and writing a checkpoint in the run's checkpoint location.

    raytpu run --local --stack staging --working-dir examples/own-code -- python train_torch.py
    raytpu submit --stack staging --working-dir examples/own-code -- python train_torch.py

On a TPU slice one process per host drives every chip of it: SPMD over the slice's global
mesh (the PJRT runtime forms the slice from TPU_WORKER_ID / TPU_WORKER_HOSTNAMES, XLA syncs
the gradients). On the local simulated slice each process is one XLA:CPU device, which
cannot span processes, so the gradients are averaged over a gloo group at the run's
coordinator instead. (The TPU branch is the documented torch_xla SPMD recipe; this
repository's tests run the CPU branch.)
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os

import fsspec
import torch
import torch_xla
from raytpu.workloads import slice_context

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
args = parser.parse_args()

ctx = slice_context()
print("slice context (torch_xla):", json.dumps({**dataclasses.asdict(ctx), "process_index":
                                    ctx.process_index, "process_count": ctx.process_count}),
      flush=True)

on_tpu = os.environ.get("PJRT_DEVICE", "").upper() == "TPU"
if on_tpu:
    import numpy as np
    import torch_xla.distributed.spmd as xs
    import torch_xla.runtime as xr

    xr.use_spmd()  # before any XLA tensor exists
    n = xr.global_runtime_device_count()  # every chip of every host of the slice(s)
    mesh = xs.Mesh(np.arange(n), (n, 1), ("data", "model"))
else:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://{ctx.coordinator_address}",
                            rank=ctx.process_index, world_size=ctx.process_count)

device = torch_xla.device()
torch.manual_seed(0)  # the same initial weights on every host
model = torch.nn.Linear(16, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
target = (torch.arange(16.0) / 16).to(device)

checkpoint = f"{ctx.checkpoint_dir}/torch-example.pt"
fs, path = fsspec.core.url_to_fs(checkpoint)
start = 0
if fs.exists(path):  # a restarted or resubmitted run resumes here
    with fs.open(path, "rb") as f:
        state = torch.load(io.BytesIO(f.read()))
    model.load_state_dict(state["model"])
    start = state["step"]
    print(f"resumed at step {start}", flush=True)

for step in range(start + 1, start + args.steps + 1):
    if on_tpu:  # one global batch, sharded over every chip of the slice
        gen = torch.Generator().manual_seed(step)
        x = torch.randn(8 * n, 16, generator=gen).to(device)
        xs.mark_sharding(x, mesh, ("data", None))
    else:  # this host's shard of the global batch
        gen = torch.Generator().manual_seed(step * ctx.process_count + ctx.process_index)
        x = torch.randn(32, 16, generator=gen).to(device)
    loss = torch.nn.functional.mse_loss(model(x).squeeze(-1), x @ target)
    opt.zero_grad()
    loss.backward()
    torch_xla.sync()
    if not on_tpu:  # XLA:CPU cannot span processes: average the gradients over gloo
        for p in model.parameters():
            grad = p.grad.cpu()
            dist.all_reduce(grad)
            p.grad = (grad / ctx.process_count).to(device)
    opt.step()
    torch_xla.sync()
    print(f"step {step} loss {loss.item():.5f}", flush=True)

if ctx.is_coordinator:  # one writer; every host holds the same weights
    fs.makedirs(fs._parent(path), exist_ok=True)
    buffer = io.BytesIO()
    torch.save({"model": {k: v.cpu() for k, v in model.state_dict().items()},
                "step": start + args.steps}, buffer)
    with fs.open(path, "wb") as f:
        f.write(buffer.getvalue())
    print(f"checkpoint written: {checkpoint}", flush=True)
if not on_tpu:
    dist.destroy_process_group()
