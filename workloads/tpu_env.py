"""Which TPU host this process is, from the TPU environment, checked before any XLA work.

On a real slice libtpu forms the slice from ``TPU_WORKER_ID`` and ``TPU_WORKER_HOSTNAMES``;
if they are missing or disagree with the slice shape, the PJRT client waits for peers
that never come. So they are validated first and a bad environment is an error that
names the variable, not a hang. The host index never comes from Ray's rank: Ray orders
workers its own way (shared/ref/notes/ray-torchxla.md §3.3).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from raytpu.facts.catalog import SliceShape

# Set on every TPU VM by GKE / the KubeRay TPU webhook; the local simulation sets them too.
SIMULATED_VARS = ("TPU_NAME", "TPU_WORKER_ID", "TPU_ACCELERATOR_TYPE", "TPU_TOPOLOGY")


class TpuEnvError(RuntimeError):
    """The TPU environment of this host is missing a variable or contradicts the slice."""


@dataclass(frozen=True)
class HostIdentity:
    """Where this process sits: its slice, its host within the slice, and the data shard."""

    slice_name: str
    slice_id: int
    worker_id: int
    hosts_per_slice: int
    num_slices: int

    @property
    def data_index(self) -> int:
        """Global host index across slices: this host's data shard."""
        return self.slice_id * self.hosts_per_slice + self.worker_id

    @property
    def num_hosts(self) -> int:
        return self.hosts_per_slice * self.num_slices


def _int_var(env: Mapping[str, str], name: str) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        raise TpuEnvError(f"{name} is not set; every TPU host needs it (GKE sets it on TPU VMs)")
    try:
        return int(raw)
    except ValueError:
        raise TpuEnvError(f"{name}={raw!r} is not an integer") from None


def host_identity(
    env: Mapping[str, str],
    shape: SliceShape,
    *,
    real_tpu: bool,
    num_slices: int = 1,
) -> HostIdentity:
    """Validate this host's TPU variables against ``shape`` and return who it is.

    ``real_tpu``: on a slice (PJRT_DEVICE=TPU) ``TPU_WORKER_HOSTNAMES`` must list every
    host; in the CPU simulation all four variables Ray reads must be set instead.
    """
    worker_id = _int_var(env, "TPU_WORKER_ID")
    if not 0 <= worker_id < shape.hosts:
        raise TpuEnvError(
            f"TPU_WORKER_ID={worker_id} is out of range for {shape.accelerator_type} "
            f"({shape.hosts} hosts: 0..{shape.hosts - 1})"
        )
    accel = env.get("TPU_ACCELERATOR_TYPE")
    if accel is not None and accel != shape.accelerator_type:
        raise TpuEnvError(
            f"TPU_ACCELERATOR_TYPE={accel!r} but the run asks for {shape.accelerator_type!r}"
        )
    topology = env.get("TPU_TOPOLOGY")
    if topology is not None and topology != shape.topology:
        raise TpuEnvError(f"TPU_TOPOLOGY={topology!r} but {shape.accelerator_type} is "
                          f"{shape.topology!r}")
    if real_tpu:
        if shape.multi_host:
            raw = env.get("TPU_WORKER_HOSTNAMES", "")
            hostnames = [h for h in raw.split(",") if h.strip()]
            if len(hostnames) != shape.hosts:
                raise TpuEnvError(
                    f"TPU_WORKER_HOSTNAMES lists {len(hostnames)} host(s) ({raw!r}) but "
                    f"{shape.accelerator_type} has {shape.hosts}"
                )
    else:
        missing = [v for v in SIMULATED_VARS if not env.get(v)]
        if missing:
            raise TpuEnvError(
                f"{', '.join(missing)} not set on this simulated host; without all of "
                f"{', '.join(SIMULATED_VARS)} Ray queries the GCE metadata server"
            )
    slice_id = 0
    if num_slices > 1:
        slice_id = _int_var(env, "MEGASCALE_SLICE_ID")
        if not 0 <= slice_id < num_slices:
            raise TpuEnvError(f"MEGASCALE_SLICE_ID={slice_id} is out of range 0..{num_slices - 1}")
        declared = env.get("MEGASCALE_NUM_SLICES")
        if declared is not None and declared != str(num_slices):
            raise TpuEnvError(
                f"MEGASCALE_NUM_SLICES={declared} but the run asks for {num_slices} slices"
            )
    return HostIdentity(
        slice_name=env.get("TPU_NAME", ""),
        slice_id=slice_id,
        worker_id=worker_id,
        hosts_per_slice=shape.hosts,
        num_slices=num_slices,
    )


def check_host_indices(indices: list[int]) -> None:
    """Every host must own a different data shard: ``indices`` (one per worker, gathered
    at start) must be a permutation of ``0..n-1``. Duplicate ``TPU_WORKER_ID``s are a
    known failure of the KubeRay TPU webhook; training on would silently repeat data."""
    if sorted(indices) != list(range(len(indices))):
        raise TpuEnvError(
            f"hosts claim data shards {indices}, expected each of 0..{len(indices) - 1} once: "
            "duplicate or missing TPU_WORKER_ID / MEGASCALE_SLICE_ID"
        )
