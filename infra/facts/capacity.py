"""How a slice group's TPU VMs are obtained (``raytpu:slices[].capacity``), as data.

* ``on-demand``: list price, no commitment; needs quota and free capacity in the zone.
* ``spot``: preemptible at any time (30 s notice), much cheaper; a preempted host takes its
  slice down.
* ``reservation``: a specific reservation's capacity (``reservation: NAME``).
* ``flex-start``: Dynamic Workload Scheduler. The pool asks for the whole slice and GKE
  provisions it when capacity frees up, for at most ``maxRunDuration`` (7 days), then
  reclaims it. What GKE and xpk 1.16 create for it (xpk ``get_capacity_arguments_from_
  capacity_type``: ``--flex-start --enable-autoscaling --location-policy=ANY
  --reservation-affinity=none --no-enable-autorepair``, ``--num-nodes=0``;
  shared/ref/notes/gke-tpu.md §2.2): ``nodeConfig.flexStart``, ``nodeConfig.maxRunDuration``,
  autoscaling from 0 with location policy ANY, reservation affinity none, auto-repair off,
  never Spot.

Where GKE offers flex-start for TPUs (GKE "About flex-start provisioning" /
kubernetes-engine/docs/concepts/dws, as the stored copy in shared/ref/tpu/SOURCE.txt reads:
TPU nodes need GKE 1.33.0-gke.1712000 or later; not TPU v3/v4; zones per generation). The
zone lists change often, so a zone off the list is a warning, not a refusal.
"""

from __future__ import annotations

import re
from typing import Literal

Capacity = Literal["on-demand", "spot", "reservation", "flex-start"]
CAPACITIES: tuple[Capacity, ...] = ("on-demand", "spot", "reservation", "flex-start")

FLEX_START_MIN_GKE = "1.33.0-gke.1712000"
FLEX_START_MAX_RUN_SECONDS = 7 * 24 * 3600
"""GKE: flex-start VMs run "up to 7 days"; also the default run limit."""

# TPU generation -> zones the docs list for flex-start; None: offered, zones not listed in
# any stored source (TPU7x: GoogleCloudPlatform/cluster-toolkit#5218 ships DWS flex-start
# blueprints for TPU 7x; the DWS page's copy predates it). A generation absent here is not
# offered (v4: "not v3/v4").
FLEX_START_ZONES: dict[str, tuple[str, ...] | None] = {
    "v5e": ("us-west4-a",),
    "v5p": ("us-east5-a",),
    "v6e": ("asia-northeast1-b", "us-east5-a", "us-east5-b"),
    "tpu7x": None,
}
FLEX_START_SOURCE = "cloud.google.com/kubernetes-engine/docs/concepts/dws"

_DURATION = re.compile(r"^(\d+)([smhd])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(text: str) -> int | None:
    """``<n>s|m|h|d`` in seconds (``72h`` -> 259200); None when ``text`` is not one."""
    m = _DURATION.match(text.strip())
    if not m or int(m.group(1)) == 0:
        return None
    return int(m.group(1)) * _UNIT_SECONDS[m.group(2)]


def describe_seconds(seconds: int) -> str:
    """The shortest exact spelling: 604800 -> ``7d``, 5400 -> ``90m``."""
    for unit in ("d", "h", "m"):
        if seconds % _UNIT_SECONDS[unit] == 0:
            return f"{seconds // _UNIT_SECONDS[unit]}{unit}"
    return f"{seconds}s"
