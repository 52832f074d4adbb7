"""How a training run asks Ray for its slices: the Ray Train scaling and the capacity
request that scales an elastic worker group up from zero. Plain data, no ray import, so
``--dry-run`` shows exactly what the launcher would pass to Ray.

Ray Train v2 (``ScalingConfig(use_tpu=True, topology, accelerator_type)``) reserves each
slice through ``ray.util.tpu.SlicePlacementGroup``: first a placement group
``{"TPU-<pod type>-head": 1}`` with the label selector ``ray.io/tpu-worker-id=0,
ray.io/tpu-pod-type=<pod type>`` (``ray._private.accelerators.tpu.reserve_tpu_slice``),
then one bundle ``{"CPU": 1, "TPU": chips per host}`` per host of that slice.

Ray 2.60's autoscaler v2 matches a request's label selector against the *node type's*
labels, which for KubeRay are only the worker group's top-level ``labels``
(``autoscaling_config._get_labels_from_group_spec``); the ``ray.io/tpu-*`` labels exist only
once a raylet runs. A group at zero slices therefore never satisfies the head reservation,
and even a plain resource request launches one node, which KubeRay's provider turns into
``1 // numOfHosts = 0`` replicas of a multi-host group. So the launcher first asks for
capacity (``ray.autoscaler.sdk.request_resources``): one ``{"CPU": 1, "TPU": chips}``
bundle per host of every slice, each selecting the group by its
:data:`~raytpu.facts.names.SLICE_GROUP_LABEL` label, which the RayCluster puts in the group's
``labels`` (tests run Ray's own autoscaler code on the emitted RayCluster).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from raytpu.facts.names import SLICE_GROUP_LABEL

from .training import TrainConfig

# Cloud TPU VMs take minutes to come up from zero: Ray Train's default wait for its worker
# group (60 s, RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S) would fail the run first.
SCALE_UP_TIMEOUT_S = 1800
WORKER_GROUP_START_TIMEOUT_ENV = "RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S"

# In a command run's runtime environment (job driver, Ray Train controller and workers): Ray
# Train would move each worker into its run folder; the command runs in the working dir.
COMMAND_ENV_VARS = {"RAY_CHDIR_TO_TRIAL_DIR": "0"}

RUNTIME_ENV_VARS: dict[str, str] = {
    "PJRT_DEVICE": "TPU",
    "RAY_TRAIN_V2_ENABLED": "1",
    # Read by the Ray Train controller, an actor of the job: it sees the job's runtime env.
    WORKER_GROUP_START_TIMEOUT_ENV: str(SCALE_UP_TIMEOUT_S),
}
"""Environment of a training job on a stack's cluster (Job Submission API or RayJob)."""


@dataclass(frozen=True)
class TrainScaling:
    """What the launcher asks Ray for, one worker per TPU host."""

    num_workers: int
    """Ray Train workers: hosts per slice x slices."""
    resources_per_worker: dict[str, float]
    """Every chip of the host (a worker with fewer would see a one-host slice), 1 CPU."""
    topology: str
    accelerator_type: str
    """Ray's accelerator type (``TPU-V5LITEPOD``), not the slice name."""
    slices: int
    pod_type: str
    """The slice's pod type (``v5litepod-16``): Ray reserves ``TPU-<pod type>-head``."""
    hosts_per_slice: int
    chips_per_host: int
    slice_group: str | None = None
    """The RayCluster worker group to scale (``raytpu:slices[].name``); None: no request."""
    capacity_request: list[dict[str, Any]] = field(default_factory=list)
    """``request_resources`` bundles and label selectors (empty without a slice group)."""

    @classmethod
    def of(cls, cfg: TrainConfig, slice_group: str | None = None) -> TrainScaling:
        shape = cfg.shape()
        chips = shape.chips_per_vm
        worker: dict[str, float] = {"CPU": 1, "TPU": chips}
        request = [
            {"resources": dict(worker), "label_selector": {SLICE_GROUP_LABEL: slice_group}}
            for _ in range(shape.hosts * cfg.slices)
        ] if slice_group else []
        return cls(
            num_workers=shape.hosts * cfg.slices,
            resources_per_worker=worker,
            topology=shape.topology,
            accelerator_type=shape.generation.ray_accelerator_type,
            slices=cfg.slices,
            pod_type=shape.ray_pod_type,
            hosts_per_slice=shape.hosts,
            chips_per_host=chips,
            slice_group=slice_group,
            capacity_request=request,
        )

    def scaling_config_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of Ray Train's ``ScalingConfig``."""
        return {
            "num_workers": self.num_workers,
            "use_tpu": True,
            "topology": self.topology,
            "accelerator_type": self.accelerator_type,
            "resources_per_worker": dict(self.resources_per_worker),
        }

    def to_dict(self) -> dict[str, Any]:
        """The ``--dry-run`` JSON object."""
        return {
            "num_workers": self.num_workers,
            "resources_per_worker": dict(self.resources_per_worker),
            "topology": self.topology,
            "accelerator_type": self.accelerator_type,
            "slices": self.slices,
            "pod_type": self.pod_type,
            "hosts_per_slice": self.hosts_per_slice,
            "chips_per_host": self.chips_per_host,
            "slice_group": self.slice_group,
            "capacity_request": [dict(b) for b in self.capacity_request],
        }
