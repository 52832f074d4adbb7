"""``raytpu:slices[].capacity`` and ``count``: the checks that need the whole stack (zone, GKE
version), each problem one line naming the key, the value and the fix.

Rules (:mod:`raytpu.facts.capacity`): flex-start is never Spot and consumes no reservation,
runs at most 7 days, needs a GKE version and generation that offer it; ``count: 0`` means
pools that start empty, which only an autoscaled group can leave.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from raytpu.facts import versions
from raytpu.facts.capacity import (
    FLEX_START_MAX_RUN_SECONDS,
    FLEX_START_MIN_GKE,
    FLEX_START_SOURCE,
    FLEX_START_ZONES,
    describe_seconds,
    duration_seconds,
)
from raytpu.facts.catalog import CatalogError

if TYPE_CHECKING:
    from raytpu.config.stack import SliceGroupConfig, StackConfig

_SEVEN_DAYS = describe_seconds(FLEX_START_MAX_RUN_SECONDS)


def _legacy_problems(key: str, s: SliceGroupConfig) -> list[str]:
    """The older ``spot`` / ``reservation`` keys against ``capacity``."""
    out: list[str] = []
    if s.capacity is not None and s.spot is not None and s.spot != (s.capacity == "spot"):
        out.append(f"{key}.spot: {s.spot} contradicts capacity {s.capacity!r}; drop spot "
                   "(capacity is the one key for how the VMs are obtained)")
    mode = s.capacity_mode
    if mode == "reservation" and not (s.reservation or "").strip():
        out.append(f"{key}.reservation: required with capacity 'reservation' (the name of the "
                   "reservation, or projects/<p>/reservations/<name> for a shared one)")
    # `spot: true` with a reservation and no capacity: TpuSlicePoolArgs refuses the pair, as
    # it always has (one message for the stack and the components).
    if s.reservation is not None and mode != "reservation" and s.capacity is not None:
        out.append(f"{key}.reservation: {s.reservation!r} is consumed only with capacity "
                   f"'reservation', not {mode!r}; drop it or set capacity: reservation")
    return out


def _flex_problems(key: str, s: SliceGroupConfig, cfg: StackConfig) -> list[str]:
    out: list[str] = []
    if s.capacity_mode != "flex-start":
        if s.max_run_duration is not None:
            out.append(f"{key}.maxRunDuration: {s.max_run_duration!r} applies only to "
                       f"capacity 'flex-start' (this group is {s.capacity_mode!r}); drop it")
        return out
    if s.max_run_duration is not None:
        seconds = duration_seconds(s.max_run_duration)
        if seconds is None:
            out.append(f"{key}.maxRunDuration: {s.max_run_duration!r} is not a duration; "
                       "write <n>s, <n>m, <n>h or <n>d, e.g. 72h")
        elif seconds > FLEX_START_MAX_RUN_SECONDS:
            out.append(f"{key}.maxRunDuration: {s.max_run_duration!r} is longer than the "
                       f"{_SEVEN_DAYS} flex-start VMs may run; write at most {_SEVEN_DAYS}")
    try:
        gen = s.shape.generation
    except CatalogError:
        return out
    if gen.name not in FLEX_START_ZONES:
        offered = ", ".join(FLEX_START_ZONES)
        out.append(f"{key}.capacity: 'flex-start' is not offered for TPU {gen.name} "
                   f"({key}.tpu {s.tpu!r}; {FLEX_START_SOURCE}: {offered}); use on-demand, "
                   "spot or a reservation")
    mmv = cfg.cluster.min_master_version
    if mmv and versions.version_tuple(mmv) < versions.version_tuple(FLEX_START_MIN_GKE):
        out.append(f"raytpu:cluster.minMasterVersion: {mmv!r} is too old for flex-start TPU "
                   f"nodes ({key}.capacity); need >= {FLEX_START_MIN_GKE}")
    return out


def slice_capacity_problems(cfg: StackConfig) -> list[str]:
    """Every capacity and ``count`` problem of the slice groups."""
    out: list[str] = []
    for i, s in enumerate(cfg.slices):
        key = f"raytpu:slices[{i}]"
        out += _legacy_problems(key, s)
        out += _flex_problems(key, s, cfg)
        if s.count == 0 and s.autoscaling is None:
            out.append(f"{key}.count: 0 on a fixed group would declare pools that never get "
                       "a node; add autoscaling (min 0, max >= 1) or set count >= 1")
    return out


def slice_capacity_warnings(cfg: StackConfig) -> list[str]:
    """Legal but worth a look: the older keys, a flex-start zone the docs do not list."""
    out: list[str] = []
    for i, s in enumerate(cfg.slices):
        key = f"raytpu:slices[{i}]"
        if s.capacity is None and (s.spot or s.reservation is not None):
            out.append(f"{key}: {'spot: true' if s.spot else 'reservation: ...'} still works "
                       f"but capacity is the key now: write capacity: {s.capacity_mode}")
        if s.capacity_mode != "flex-start":
            continue
        try:
            gen = s.shape.generation
        except CatalogError:
            continue
        zones = FLEX_START_ZONES.get(gen.name, ())
        if zones is None:
            out.append(f"{key}.capacity: flex-start for TPU {gen.name}: no stored source lists "
                       f"its zones; check {FLEX_START_SOURCE} for {cfg.zone!r}")
        elif cfg.zone not in zones:
            out.append(f"raytpu:zone: {cfg.zone!r} is not among the flex-start zones the docs "
                       f"list for TPU {gen.name} ({', '.join(zones)}; {FLEX_START_SOURCE}, "
                       "which changes often): the pool may never get capacity")
    return out
