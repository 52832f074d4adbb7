"""`raytpu cost` / `cost_of`: chips x price per chip-hour over the autoscaling range, the
system pool's VMs, overrides from the stack, and the plan's `cost` object."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from infra_support import BASE_CONFIG, REPO, STACKS_DIR, raw_config
from raytpu.config.stack import ConfigError
from raytpu.config.validate import parse_stack_config
from raytpu.facts import prices
from raytpu.facts.catalog import GENERATIONS
from raytpu.plan.cost import cost_of
from raytpu.plan.engine import load_stack_file, run_plan

H = prices.HOURS_PER_MONTH


def cost(**overrides: Any) -> dict[str, Any]:
    return cost_of(parse_stack_config("test", raw_config(**overrides)))


def test_prod_groups_price_chips_times_list_price_over_the_range() -> None:
    c = cost_of(parse_stack_config("prod", load_stack_file("prod", STACKS_DIR)))
    v5e = prices.chip_price("v5e", "us-west4")
    assert v5e is not None
    by_name = {g["name"]: g for g in c["groups"]}
    elastic = by_name["v5e-16"]  # count 1, autoscaling 0..6, 16 chips per slice
    assert (elastic["chips"], elastic["capacity"]) == (16, "on-demand")
    assert elastic["price_per_chip_hour"] == v5e.on_demand
    # min/max: the autoscaling range; count: the configured count, under its own name.
    assert elastic["slices"] == {"min": 0, "count": 1, "max": 6}
    assert elastic["hourly"]["min"] == 0
    assert elastic["hourly"]["count"] == pytest.approx(16 * v5e.on_demand)
    assert elastic["hourly"]["max"] == pytest.approx(6 * 16 * v5e.on_demand)
    assert elastic["monthly"]["max"] == pytest.approx(6 * 16 * v5e.on_demand * H)
    fixed = by_name["v5e-8-eval"]
    assert fixed["hourly"]["min"] == fixed["hourly"]["max"] == pytest.approx(8 * v5e.on_demand)
    sp = c["system_pool"]
    n2 = prices.machine_price("n2-standard-8", "us-west4")
    assert n2 is not None
    assert sp["nodes"] == {"min": 1, "count": 1, "max": 4}
    assert sp["hourly"]["max"] == pytest.approx(4 * n2.on_demand)
    # GCS fault tolerance: 1 GB of Standard-tier Memorystore, with no sourced price: shown
    # unpriced, out of the totals, saying where to look and what prices it.
    redis = c["gcs_redis"]
    assert (redis["tier"], redis["memory_size_gb"]) == ("STANDARD_HA", 1)
    assert redis["price_per_gb_hour"] is None
    assert redis["hourly"] == {b: None for b in ("min", "count", "max")}
    assert prices.MEMORYSTORE_PRICING in redis["price_source"]
    assert "set raytpu:cost.memorystore.STANDARD_HA (USD per GB-hour)" in redis["price_source"]
    parts = [*c["groups"], sp]
    for bound in ("min", "count", "max"):
        assert c["total"]["hourly"][bound] == pytest.approx(
            sum(p["hourly"][bound] for p in parts), abs=1e-3)
        assert c["total"]["monthly"][bound] == pytest.approx(
            c["total"]["hourly"][bound] * H, abs=0.05)
    assert c["currency"] == "USD" and c["prices"]["source"].startswith("https://")
    assert c["unpriced"] == ["gcs-redis"]


def test_spot_and_reservation_use_their_own_prices() -> None:
    spot = cost(raytpu_slices=[{"name": "s", "tpu": "v5litepod-4", "spot": True}])["groups"][0]
    listed = prices.chip_price("v5e", "us-west4")
    assert listed is not None and listed.spot is not None
    assert (spot["capacity"], spot["price_per_chip_hour"]) == ("spot", listed.spot)
    assert spot["hourly"]["max"] == pytest.approx(4 * listed.spot)

    # v6e lists a one-year commitment price: a reservation is billed at it.
    v6e = cost(raytpu_zone="us-east5-b",
               raytpu_slices=[{"name": "r", "tpu": "v6e-8", "reservation": "res-1"}])["groups"][0]
    v6 = prices.chip_price("v6e", "us-east5")
    assert v6 is not None
    assert (v6e["capacity"], v6e["price_per_chip_hour"]) == ("reservation", v6.commitment_1y)
    # v5e lists none: on-demand, and the output says so.
    v5 = cost(raytpu_slices=[{"name": "r", "tpu": "v5litepod-4", "reservation": "r"}])["groups"][0]
    assert v5["price_per_chip_hour"] == listed.on_demand
    assert "raytpu:cost.prices.v5e.reservation" in v5["price_source"]


def test_negotiated_prices_override_the_list() -> None:
    c = cost(raytpu_slices=[{"name": "a", "tpu": "v5litepod-16", "autoscaling": {"min": 0,
                                                                                 "max": 2}}],
             raytpu_cost={"prices": {"v5e": {"onDemand": 0.9}},
                          "machines": {"n2-standard-8": 0.3}})
    g = c["groups"][0]
    assert (g["price_per_chip_hour"], g["price_source"]) == (0.9, "raytpu:cost.prices.v5e")
    assert g["hourly"] == {"min": 0, "count": pytest.approx(16 * 0.9),
                           "max": pytest.approx(2 * 16 * 0.9)}
    assert c["system_pool"]["price_per_node_hour"] == 0.3


def test_unknown_region_is_reported_not_priced_as_zero() -> None:
    c = cost(raytpu_zone="us-central2-b", raytpu_slices=[{"name": "a", "tpu": "v4-16"}])
    assert c["groups"][0]["price_per_chip_hour"] == prices.chip_price("v4", "us-central2").on_demand  # type: ignore[union-attr]
    # No n2 list price in us-central2: the system pool is unpriced, and said to be.
    assert c["unpriced"] == ["system"]
    assert c["system_pool"]["hourly"] == {"min": None, "count": None, "max": None}
    assert c["total"]["hourly"]["min"] == pytest.approx(c["groups"][0]["hourly"]["min"])


def test_regional_cluster_counts_system_nodes_per_zone() -> None:
    zonal = cost()["system_pool"]["nodes"]
    regional = cost(raytpu_cluster={"name": "raytpu-test", "regional": True,
                                    "deletionProtection": False})["system_pool"]["nodes"]
    assert regional == {"min": zonal["min"] * 3, "count": zonal["min"] * 3,
                        "max": zonal["max"] * 3}


def test_bad_cost_and_monitoring_keys_name_the_key() -> None:
    with pytest.raises(ConfigError) as e:
        parse_stack_config("test", raw_config(
            raytpu_cost={"prices": {"v9": {"onDemand": 1}}, "machines": {"n2-standard-8": -1}},
            raytpu_monitoring={"alertAfter": "90s", "notificationChannels": ["email:me"]},
        ))
    text = "\n".join(e.value.problems)
    assert "raytpu:cost.prices.v9: unknown TPU generation" in text
    assert "raytpu:cost.machines.n2-standard-8" in text
    assert "raytpu:monitoring.alertAfter: '90s'" in text
    assert "raytpu:monitoring.notificationChannels[0]: 'email:me'" in text


def test_price_table_is_consistent() -> None:
    # TPU7x has no list price in the stored catalog: its rows say "not priced" until
    # raytpu:cost.prices.tpu7x is set (docs/capacity.md).
    assert set(GENERATIONS) - set(prices.TPU_PRICES) == {"tpu7x"}
    assert set(prices.TPU_PRICES) <= set(GENERATIONS)
    for gen, regions in prices.TPU_PRICES.items():
        for region, p in regions.items():
            assert p.spot is None or 0 < p.spot <= p.on_demand, (gen, region)
            assert p.commitment_1y is None or p.commitment_1y < p.on_demand
            assert (p.commitment_1y is None) == (p.commitment_source is None)
        # The catalog's documented zones of a generation are mostly priced.
        zones = {z.rsplit("-", 1)[0] for z in GENERATIONS[gen].zones}
        assert zones & set(regions), gen


def test_plan_json_carries_the_same_cost_and_the_summary_the_range() -> None:
    result = run_plan("prod", STACKS_DIR)
    assert result.to_dict()["cost"] == cost_of(result.config)


def raytpu(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "raytpu", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)


def test_cost_cli_json_and_bad_stack(tmp_path: Path) -> None:
    proc = raytpu("cost", "--stack", "dev", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert {"currency", "prices", "groups", "system_pool", "total"} <= set(doc)
    (g,) = doc["groups"]
    assert {"name", "tpu", "chips", "capacity", "price_per_chip_hour", "hourly",
            "monthly"} <= set(g)
    assert g["capacity"] == "spot"
    config = dict(BASE_CONFIG, **{"raytpu:cost": {"prices": {"v9": {"spot": 1}}}})
    (tmp_path / "Pulumi.bad.yaml").write_text(yaml.safe_dump({"config": config}))
    bad = raytpu("cost", "--stack", "bad", "--stacks-dir", str(tmp_path))
    assert bad.returncode == 2 and "raytpu:cost.prices.v9" in bad.stderr
    assert "Traceback" not in bad.stderr
    text = raytpu("plan", "--stack", "dev")
    assert text.returncode == 0, text.stderr
    assert "fleet cost:" in text.stdout and "/ month" in text.stdout


def test_every_node_pool_and_bucket_carries_cost_allocation_labels() -> None:
    from infra_support import NODE_POOL
    from raytpu.plan.engine import run_program

    raw = raw_config(
        # Elastic: teams hold quota only where the shared RayCluster leaves pools.
        raytpu_slices=[{"name": "shared", "tpu": "v5litepod-16",
                        "autoscaling": {"min": 0, "max": 3}},
                       {"name": "solo", "tpu": "v5litepod-4",
                        "autoscaling": {"min": 0, "max": 2}}],
        raytpu_teams=[
            {"name": "team-a", "members": ["group:a@example.com"],
             "quota": {"shared": 1, "solo": 1}},
            {"name": "team-b", "members": ["group:b@example.com"], "quota": {"shared": 1}},
        ],
    )
    plan = run_program("test", raw)
    pools = {r.inputs["name"]: r.inputs["nodeConfig"]["resourceLabels"]
             for r in plan.by_type(NODE_POOL)}
    assert set(pools) == {"system", "shared-0", "shared-1", "shared-2", "solo"}
    for labels in pools.values():
        assert labels["stack"] == "test"
    assert pools["shared-0"]["slice-group"] == "shared" and "team" not in pools["shared-0"]
    assert pools["solo"] == {**pools["solo"], "slice-group": "solo", "team": "team-a"}
    (bucket,) = plan.by_type("gcp:storage/bucket:Bucket")
    assert bucket.inputs["labels"]["stack"] == "test"


def test_bad_label_is_refused_before_anything_is_declared() -> None:
    from infra_support import refused_alone
    from raytpu.components import TpuSlicePool, TpuSlicePoolArgs
    from raytpu.facts.catalog import slice_shape

    (err,) = refused_alone(lambda: TpuSlicePool("p", TpuSlicePoolArgs(
        shape=slice_shape("v5litepod-4"), cluster="c", zone="us-west4-a",
        node_service_account="sa", project="p", resource_labels={"Team": "A"})))
    assert "resource_labels: 'Team': 'A'" in str(err)


def test_prod_eval_slice_costs_the_published_list_price() -> None:
    # Published, not computed from prices.py: Cloud TPU v5e on-demand is $1.20 per
    # chip-hour in us-west4 (cloud.google.com/tpu/pricing; the same figure as SkyPilot's
    # catalog row tpu-v5litepod-16, $19.20 for 16 chips, shared/ref/notes/platform.md §4.1).
    # prod's v5e-8-eval is one fixed v5litepod-8 slice: 8 chips x $1.20 = $9.60 an hour,
    # x 730 h = $7,008.00 a month.
    c = cost_of(parse_stack_config("prod", load_stack_file("prod", STACKS_DIR)))
    (eval_group,) = [g for g in c["groups"] if g["name"] == "v5e-8-eval"]
    assert eval_group["hourly"] == {"min": 9.6, "count": 9.6, "max": 9.6}
    assert eval_group["monthly"] == {"min": 7008.0, "count": 7008.0, "max": 7008.0}


def test_dev_has_no_gcs_redis_to_pay_for() -> None:
    c = cost_of(parse_stack_config("dev", load_stack_file("dev", STACKS_DIR)))
    assert c["gcs_redis"] is None
    assert c["total"]["hourly"]["count"] == pytest.approx(
        sum(p["hourly"]["count"] for p in [*c["groups"], c["system_pool"]]), abs=1e-3)


def test_memorystore_is_priced_only_by_the_stack() -> None:
    raw = load_stack_file("prod", STACKS_DIR)
    unpriced = cost_of(parse_stack_config("prod", raw))
    priced = cost_of(parse_stack_config("prod", {**raw, "raytpu:cost": {
        **raw.get("raytpu:cost", {}), "memorystore": {"STANDARD_HA": 0.05}}}))
    redis = priced["gcs_redis"]
    assert redis["price_source"] == "raytpu:cost.memorystore.STANDARD_HA"
    assert redis["hourly"]["count"] == pytest.approx(0.05)
    assert priced["unpriced"] == []
    for bound in ("min", "count", "max"):  # the override, and only it, joins the total
        assert priced["total"]["hourly"][bound] == pytest.approx(
            unpriced["total"]["hourly"][bound] + 0.05, abs=1e-3)
    with pytest.raises(ConfigError, match=r"raytpu:cost\.memorystore\.STANDARD: unknown "
                       r"Memorystore tier; valid: BASIC, STANDARD_HA"):
        parse_stack_config("prod", {**raw, "raytpu:cost": {"memorystore": {"STANDARD": 0.05}}})
