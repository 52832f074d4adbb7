"""The environment of the Ray containers.

TPU environment: ``TPU_WORKER_ID``/``TPU_WORKER_HOSTNAMES``/``TPU_NAME`` come from the TPU
webhook; ``TPU_ACCELERATOR_TYPE``/``TPU_TOPOLOGY`` are set here from the catalog because Ray
otherwise asks the metadata server for them with no timeout (ray-torchxla.md §3.2). GKE's
TPU device plugin injects the same two values (and ``TPU_SKIP_MDS_QUERY=true``, the host
bounds) into every container requesting ``google.com/tpu`` (fidelity-findings.md L1), so
torch_xla reads the slice from the environment rather than the metadata server.
"""

from __future__ import annotations

from collections.abc import Mapping

from raytpu.components.k8s_objects import EnvVar
from raytpu.facts.catalog import SliceShape

CHECKPOINT_ENV = "RAYTPU_CHECKPOINT_URI"


def ray_env(
    common: Mapping[str, str],
    own: Mapping[str, str] = {},
    *,
    checkpoint_uri: str | None = None,
) -> list[EnvVar]:
    """Env of a Ray container: every container's (``common``), then the group's own
    (``own`` wins), then ``RAYTPU_CHECKPOINT_URI`` unless either sets it. Sorted by name."""
    env = {**common, **own}
    if checkpoint_uri:
        env.setdefault(CHECKPOINT_ENV, checkpoint_uri)
    return [{"name": k, "value": v} for k, v in sorted(env.items())]


def tpu_env(shape: SliceShape) -> list[EnvVar]:
    """What Ray reads to name the slice (TPU_NAME/TPU_WORKER_ID come from the webhook)."""
    return [
        {"name": "TPU_ACCELERATOR_TYPE", "value": shape.accelerator_type},
        {"name": "TPU_TOPOLOGY", "value": shape.topology},
    ]
