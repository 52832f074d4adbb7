"""The slice context of one process of a user's command: which host of which slice it is, how
the slice is shaped, where the processes meet and where the run keeps its checkpoints.

``from raytpu.workloads import slice_context; ctx = slice_context()`` inside the command;
code that does not import the package reads the same values from environment variables:

=============================  =================================================================
``TPU_WORKER_ID``              host index within the slice (0..hosts-1)
``TPU_WORKER_HOSTNAMES``       the slice's hosts, comma-separated, in ``TPU_WORKER_ID`` order
``TPU_ACCELERATOR_TYPE``       the slice, ``v5litepod-16`` form
``TPU_TOPOLOGY``               the slice's chip topology, ``4x4`` form
``TPU_NAME``                   the slice's name (``<group>-<replica>`` on GKE)
``MEGASCALE_*``                multislice only: ``NUM_SLICES``, ``SLICE_ID``,
                               ``COORDINATOR_ADDRESS``, ``PORT``
``RAYTPU_SLICE_INDEX``         slice index (0..slices-1)
``RAYTPU_NUM_SLICES``          slices of the run
``RAYTPU_HOST_INDEX``          = ``TPU_WORKER_ID``
``RAYTPU_HOSTS_PER_SLICE``     hosts of one slice
``RAYTPU_PROCESS_INDEX``       global: slice index x hosts per slice + host index
``RAYTPU_PROCESS_COUNT``       hosts per slice x slices
``RAYTPU_CHIPS_PER_HOST``      TPU chips of each host
``RAYTPU_COORDINATOR_ADDRESS`` ``host:port`` of process 0, for ``jax.distributed.initialize``
                               or a ``torch.distributed`` rendezvous
``RAYTPU_CHECKPOINT_DIR``      the run's checkpoint location (``gs://...`` on a stack)
=============================  =================================================================

The ``TPU_*`` names and formats are those GKE's TPU device plugin and the KubeRay TPU
webhook inject on a real slice (shared/ref/notes/kuberay-tpu.md §4.3, fidelity-findings.md
L1); there the platform's values win and the ``RAYTPU_*`` ones are derived from them. On the
local simulated slice the package sets the same variables with the local slice's values.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

PREFIX = "RAYTPU_"
# The variables the platform owns on a real slice (the webhook, the device plugin).
PLATFORM_VARS = ("TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES", "TPU_ACCELERATOR_TYPE",
                 "TPU_TOPOLOGY", "TPU_NAME")


class SliceContextError(RuntimeError):
    """This process is not one host of a raytpu run, or its variables disagree."""


@dataclass(frozen=True)
class SliceContext:
    """Where this process sits in the run, and what it may use."""

    slice_index: int
    num_slices: int
    host_index: int
    """Index within the slice: the platform's ``TPU_WORKER_ID``."""
    hosts_per_slice: int
    chips_per_host: int
    topology: str
    accelerator_type: str
    coordinator_address: str
    """``host:port`` of process 0 (slice 0, host 0)."""
    checkpoint_dir: str
    worker_hostnames: tuple[str, ...] = ()
    """The slice's hosts in host-index order (``TPU_WORKER_HOSTNAMES``)."""
    slice_name: str = ""

    @property
    def process_index(self) -> int:
        return self.slice_index * self.hosts_per_slice + self.host_index

    @property
    def process_count(self) -> int:
        return self.num_slices * self.hosts_per_slice

    @property
    def is_coordinator(self) -> bool:
        return self.process_index == 0

    def env(self) -> dict[str, str]:
        """The documented environment variables of this context."""
        out = {
            "TPU_WORKER_ID": str(self.host_index),
            "TPU_WORKER_HOSTNAMES": ",".join(self.worker_hostnames),
            "TPU_ACCELERATOR_TYPE": self.accelerator_type,
            "TPU_TOPOLOGY": self.topology,
            "TPU_NAME": self.slice_name,
            f"{PREFIX}SLICE_INDEX": str(self.slice_index),
            f"{PREFIX}NUM_SLICES": str(self.num_slices),
            f"{PREFIX}HOST_INDEX": str(self.host_index),
            f"{PREFIX}HOSTS_PER_SLICE": str(self.hosts_per_slice),
            f"{PREFIX}PROCESS_INDEX": str(self.process_index),
            f"{PREFIX}PROCESS_COUNT": str(self.process_count),
            f"{PREFIX}CHIPS_PER_HOST": str(self.chips_per_host),
            f"{PREFIX}COORDINATOR_ADDRESS": self.coordinator_address,
            f"{PREFIX}CHECKPOINT_DIR": self.checkpoint_dir,
        }
        return out


def command_env(ctx: SliceContext, platform: Mapping[str, str],
                megascale: Mapping[str, str]) -> dict[str, str]:
    """The variables a host's command gets on top of ``platform`` (the host's own
    environment): ``platform``'s ``TPU_*`` values where it has them (a real slice), this
    context's elsewhere (the local slice), ``megascale`` for a multislice run."""
    env = ctx.env()
    for name in PLATFORM_VARS:
        if platform.get(name):
            env[name] = platform[name]
    if not env["TPU_NAME"]:
        del env["TPU_NAME"]
    if ctx.num_slices > 1:
        env.update(megascale)
    return env


def _int(env: Mapping[str, str], name: str) -> int:
    raw = env.get(name)
    if raw is None:
        raise SliceContextError(f"{name} is not set: this process is not a host of a raytpu "
                                "run (raytpu submit / raytpu run --local start those)")
    try:
        return int(raw)
    except ValueError:
        raise SliceContextError(f"{name}={raw!r} is not an integer") from None


def slice_context(env: Mapping[str, str] | None = None) -> SliceContext:
    """This process's slice context, from its environment (default ``os.environ``). Raises
    :class:`SliceContextError` outside a run, or when the platform's ``TPU_*`` values and
    the run's disagree (a webhook that assigned a duplicate worker id, for one)."""
    e = os.environ if env is None else env
    num_slices = _int(e, f"{PREFIX}NUM_SLICES")
    ctx = SliceContext(
        slice_index=_int(e, f"{PREFIX}SLICE_INDEX"),
        num_slices=num_slices,
        host_index=_int(e, "TPU_WORKER_ID"),
        hosts_per_slice=_int(e, f"{PREFIX}HOSTS_PER_SLICE"),
        chips_per_host=_int(e, f"{PREFIX}CHIPS_PER_HOST"),
        topology=e.get("TPU_TOPOLOGY", ""),
        accelerator_type=e.get("TPU_ACCELERATOR_TYPE", ""),
        coordinator_address=e.get(f"{PREFIX}COORDINATOR_ADDRESS", ""),
        checkpoint_dir=e.get(f"{PREFIX}CHECKPOINT_DIR", ""),
        worker_hostnames=tuple(h for h in e.get("TPU_WORKER_HOSTNAMES", "").split(",") if h),
        slice_name=e.get("TPU_NAME", ""),
    )
    checks = {f"{PREFIX}HOST_INDEX": ctx.host_index,
              f"{PREFIX}PROCESS_INDEX": ctx.process_index,
              f"{PREFIX}PROCESS_COUNT": ctx.process_count}
    if num_slices > 1:
        checks["MEGASCALE_SLICE_ID"] = ctx.slice_index
        checks["MEGASCALE_NUM_SLICES"] = num_slices
    for name, value in checks.items():
        if _int(e, name) != value:
            raise SliceContextError(f"{name}={e[name]} disagrees with the slice's TPU variables "
                                    f"(expected {value})")
    return ctx


