"""``raytpu cost``: what a stack's fleet costs, from its config and one price table.

Per slice group: chips per slice x price per chip-hour for the stack's region and capacity
type (``spot``, ``reservation``, ``flex-start`` or ``on-demand``), at the autoscaling
minimum (``min``), at the configured ``count`` (``count``: what runs from the first
``up`` until the autoscaler acts; 0 for an elastic group that starts empty) and at the
autoscaling maximum (``max``); a fixed group has all three equal. The system pool's VMs
from ``minNodes`` to ``maxNodes``. Prices come from :mod:`raytpu.facts.prices` unless
``raytpu:cost`` overrides them.
:func:`cost_of` is the one computation: ``raytpu cost``, ``raytpu plan`` (its summary and
the ``cost`` object of ``--json``) and the pull-request preview all print its result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from raytpu.facts import prices
from raytpu.facts.names import SYSTEM_POOL

if TYPE_CHECKING:
    from raytpu.config.stack import StackConfig
    from raytpu.facts.slice_group import SliceGroup

# GKE spreads a regional cluster's node pools over the region's zones (three by default),
# and node counts are per zone.
REGIONAL_ZONES = 3


BOUNDS = ("min", "count", "max")


def _range(values: dict[str, float | None], digits: int,
           factor: float = 1) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for b in BOUNDS:
        v = values[b]
        out[b] = None if v is None else round(v * factor, digits)
    return out


def _per_hour_and_month(
    price: float | None, units: dict[str, int]
) -> dict[str, dict[str, float | None]]:
    """``hourly`` and ``monthly`` ``{min, count, max}`` of ``units`` at ``price`` per hour."""
    hourly = {b: None if price is None else price * units[b] for b in BOUNDS}
    return {"hourly": _range(hourly, 4), "monthly": _range(hourly, 2, prices.HOURS_PER_MONTH)}


def _chip_price(cfg: StackConfig, s: SliceGroup) -> tuple[float | None, str]:
    """Price per chip-hour of a slice group and where it comes from."""
    capacity = s.capacity
    gen = s.shape.generation.name
    override = cfg.cost.prices.get(gen)
    key = {"on-demand": "on_demand", "spot": "spot", "reservation": "reservation",
           "flex-start": "flex_start"}[capacity]
    if override is not None and getattr(override, key) is not None:
        return float(getattr(override, key)), f"raytpu:cost.prices.{gen}"
    listed = prices.chip_price(gen, cfg.region)
    if listed is None:
        return None, (f"no list price for TPU {gen} in {cfg.region}; set "
                      f"raytpu:cost.prices.{gen}")
    if capacity == "spot":
        return listed.spot, "list (Spot, varies daily)"
    if capacity == "reservation":
        if listed.commitment_1y is not None:
            return listed.commitment_1y, f"list 1-year commitment ({listed.commitment_source})"
        return listed.on_demand, ("list on-demand (no commitment price listed; set "
                                  f"raytpu:cost.prices.{gen}.reservation)")
    if capacity == "flex-start":
        # Flex-start has its own (Dynamic Workload Scheduler) price, which this table does
        # not hold: the on-demand list price stands in for it, and says so.
        return listed.on_demand, ("list on-demand (flex-start's own price is not in this "
                                  f"table; set raytpu:cost.prices.{gen}.flexStart)")
    return listed.on_demand, "list"


def _group(cfg: StackConfig, s: SliceGroup) -> dict[str, Any]:
    """A slice group's cost row."""
    price, source = _chip_price(cfg, s)
    chips = s.shape.chips
    slices = {"min": s.min_slices, "count": s.initial_slices, "max": s.max_slices}
    return {
        "name": s.name,
        "tpu": s.shape.accelerator_type,
        "chips": chips,
        "slices": slices,
        "capacity": s.capacity,
        "price_per_chip_hour": price,
        "price_source": source,
        **_per_hour_and_month(price, {b: chips * n for b, n in slices.items()}),
    }


def _system_pool(cfg: StackConfig) -> dict[str, Any]:
    pool = cfg.cluster.system_pool
    zones = REGIONAL_ZONES if cfg.cluster.regional else 1
    lo, hi = pool.min_nodes * zones, pool.max_nodes * zones
    nodes = {"min": lo, "count": lo, "max": hi}  # GKE starts a pool at its minimum
    price: float | None
    if pool.machine_type in cfg.cost.machines:
        price, source = cfg.cost.machines[pool.machine_type], "raytpu:cost.machines"
    else:
        listed = prices.machine_price(pool.machine_type, cfg.region)
        price = listed.on_demand if listed else None
        source = "list" if listed else (
            f"no list price for {pool.machine_type} in {cfg.region}; set "
            f"raytpu:cost.machines.{pool.machine_type}")
    return {
        "name": SYSTEM_POOL,
        "machine_type": pool.machine_type,
        "nodes": nodes,
        "capacity": "on-demand",
        "price_per_node_hour": price,
        "price_source": source,
        **_per_hour_and_month(price, nodes),
    }


def _gcs_redis(cfg: StackConfig) -> dict[str, Any] | None:
    """The Memorystore instance of GCS fault tolerance, billed whether used or not; priced
    only by ``raytpu:cost.memorystore`` (no sourced list price), else out of the totals."""
    ft = cfg.ray.gcs_fault_tolerance
    if ft is None or ft.memorystore is None:
        return None
    m = ft.memorystore
    per_gb = cfg.cost.memorystore.get(m.tier)
    source = (f"raytpu:cost.memorystore.{m.tier}" if per_gb is not None else
              f"no sourced price for Memorystore {m.tier} (see {prices.MEMORYSTORE_PRICING}, "
              f"{m.memory_size_gb} GB in {cfg.region}); set raytpu:cost.memorystore.{m.tier} "
              "(USD per GB-hour)")
    gb = {b: m.memory_size_gb for b in BOUNDS}
    return {"name": "gcs-redis", "tier": m.tier, "memory_size_gb": m.memory_size_gb,
            "price_per_gb_hour": per_gb, "price_source": source,
            **_per_hour_and_month(per_gb, gb)}


def cost_of(cfg: StackConfig) -> dict[str, Any]:
    """The stack's fleet cost as one JSON-ready object (documented in docs/monitoring.md)."""
    groups = [_group(cfg, s.group) for s in cfg.slices]
    system = _system_pool(cfg)
    redis = _gcs_redis(cfg)
    parts = [*groups, system, *([redis] if redis else [])]
    unpriced = [p["name"] for p in parts if p["hourly"]["min"] is None]
    hourly: dict[str, float | None] = {
        b: sum(p["hourly"][b] for p in parts if p["hourly"][b] is not None) for b in BOUNDS}
    return {
        "currency": prices.CURRENCY,
        "region": cfg.region,
        "prices": {"source": prices.SOURCE, "date": prices.DATE,
                   "hours_per_month": prices.HOURS_PER_MONTH},
        "groups": groups,
        "system_pool": system,
        "gcs_redis": redis,
        "total": {"hourly": _range(hourly, 4),
                  "monthly": _range(hourly, 2, prices.HOURS_PER_MONTH)},
        "unpriced": unpriced,
        "excludes": "GKE cluster fee, disks, network egress, storage",
    }


def _money(value: float | None) -> str:
    return "n/a" if value is None else f"${value:,.2f}"


def money_span(r: dict[str, float | None]) -> str:
    """``$lo - $hi`` (or one amount when they are equal) of a ``{min, max}`` range."""
    if r["min"] == r["max"]:
        return _money(r["min"])
    return f"{_money(r['min'])} - {_money(r['max'])}"


def money_at_count(r: dict[str, float | None]) -> str:
    """``$count (autoscaling $min - $max)``, or one amount when the range is one value."""
    if r["min"] == r["max"]:
        return _money(r["count"])
    return f"{_money(r['count'])} (autoscaling {money_span(r)})"


def summary_line(cost: dict[str, Any]) -> str:
    """One line for the plan's summary: the monthly cost at the configured count and over
    the autoscaling range, and what is not priced."""
    monthly, hourly = cost["total"]["monthly"], cost["total"]["hourly"]
    line = f"fleet cost: {_money(monthly['count'])} / month at the configured count"
    if monthly["min"] != monthly["max"]:
        line += f", {money_span(monthly)} over the autoscaling range"
    line += (f" ({_money(hourly['count'])} / hour at count; {cost['currency']} list prices of "
             f"{cost['prices']['date']})")
    if cost["unpriced"]:
        line += f"; not priced: {', '.join(cost['unpriced'])}"
    return line
