"""``raytpu:slices[].capacity``, ``maxRunDuration``, ``count: 0`` and Ironwood's GKE version:
each bad input of issue 44 is refused with the key, the value and the fix, before anything
is declared (``raytpu plan`` exits 2); the older ``spot`` / ``reservation`` keys keep working
and a warning names the new key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from raytpu.config.stack import ConfigError
from raytpu.config.validate import parse_stack_config, stack_warnings

ROOT = Path(__file__).resolve().parents[1]


def stack(zone: str = "us-east5-a", cluster: dict[str, Any] | None = None,
          **slice_keys: Any) -> dict[str, Any]:
    group = {"name": "train", "tpu": "v6e-16", **slice_keys}
    return {"gcp:project": "acme-ml", "raytpu:zone": zone, "raytpu:slices": [group],
            **({"raytpu:cluster": cluster} if cluster else {})}


def problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_stack_config("t", raw)
    return info.value.problems


# (stack, the start of the problem line, words the line must hold: value and fix)
BAD = [
    pytest.param(stack(zone="us-central1-c", tpu="tpu7x-16",
                       cluster={"minMasterVersion": "1.33.5-gke.100"}),
                 "raytpu:cluster.minMasterVersion: '1.33.5-gke.100' is too old for TPU tpu7x",
                 ["1.34.0-gke.2201000"], id="tpu7x-on-old-gke"),
    pytest.param(stack(capacity="flex-start", spot=True),
                 "raytpu:slices[0].spot: True contradicts capacity 'flex-start'", ["drop spot"],
                 id="flex-with-spot"),
    pytest.param(stack(capacity="flex-start", reservation="r1"),
                 "raytpu:slices[0].reservation: 'r1' is consumed only with capacity "
                 "'reservation', not 'flex-start'", ["set capacity: reservation"],
                 id="flex-with-reservation"),
    pytest.param(stack(capacity="flex-start", maxRunDuration="8d"),
                 "raytpu:slices[0].maxRunDuration: '8d' is longer than the 7d", ["at most 7d"],
                 id="run-longer-than-7-days"),
    pytest.param(stack(capacity="flex-start", maxRunDuration="soon"),
                 "raytpu:slices[0].maxRunDuration: 'soon' is not a duration", ["e.g. 72h"],
                 id="run-not-a-duration"),
    pytest.param(stack(maxRunDuration="3d"),
                 "raytpu:slices[0].maxRunDuration: '3d' applies only to capacity 'flex-start'",
                 ["drop it"], id="run-limit-without-flex"),
    pytest.param(stack(zone="us-central2-b", tpu="v4-16", capacity="flex-start"),
                 "raytpu:slices[0].capacity: 'flex-start' is not offered for TPU v4",
                 ["use on-demand"], id="flex-where-gke-does-not-offer-it"),
    pytest.param(stack(capacity="flex-start", cluster={"minMasterVersion": "1.32.1-gke.1"}),
                 "raytpu:cluster.minMasterVersion: '1.32.1-gke.1' is too old for flex-start",
                 ["1.33.0-gke.1712000"], id="flex-on-old-gke"),
    pytest.param(stack(count=3, autoscaling={"min": 0, "max": 2}),
                 "raytpu:slices[0].count: 3 is outside autoscaling [0, 2]", [],
                 id="count-above-max"),
    pytest.param(stack(count=0),
                 "raytpu:slices[0].count: 0 on a fixed group", ["add autoscaling"],
                 id="count-0-on-fixed-group"),
    pytest.param(stack(capacity="flex"),
                 "raytpu:slices[0].capacity: 'flex'", ["flex-start"], id="unknown-mode"),
    pytest.param(stack(capacity="reservation"),
                 "raytpu:slices[0].reservation: required with capacity 'reservation'", [],
                 id="reservation-without-name"),
]


@pytest.mark.parametrize(("raw", "start", "words"), BAD)
def test_bad_capacity_input_names_key_value_and_fix(
    raw: dict[str, Any], start: str, words: list[str]
) -> None:
    found = [p for p in problems(raw) if p.startswith(start)]
    assert found, problems(raw)
    assert all(w in found[0] for w in words), found[0]


def test_plan_exits_2_before_declaring_anything(tmp_path: Path) -> None:
    raw = stack(capacity="flex-start", maxRunDuration="8d")
    (tmp_path / "Pulumi.bad.yaml").write_text(yaml.safe_dump({"config": raw}))
    proc = subprocess.run(
        [sys.executable, "-m", "raytpu", "plan", "--stack", "bad", "--stacks-dir",
         str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "raytpu:slices[0].maxRunDuration: '8d'" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_older_spot_and_reservation_keys_keep_working_and_name_the_new_key() -> None:
    spot = parse_stack_config("t", stack(spot=True))
    assert spot.slices[0].group.capacity == "spot" and spot.slices[0].group.spot
    assert any("write capacity: spot" in w for w in stack_warnings(spot))
    reserved = parse_stack_config("t", stack(reservation="r1"))
    assert reserved.slices[0].group.capacity == "reservation"
    assert reserved.slices[0].group.reservation == "r1"
    assert any("write capacity: reservation" in w for w in stack_warnings(reserved))
    new = parse_stack_config("t", stack(capacity="spot"))
    assert new.slices[0].group.spot and not any("capacity" in w for w in stack_warnings(new))


def test_flex_start_defaults_to_seven_days_and_reads_a_shorter_limit() -> None:
    cfg = parse_stack_config("t", stack(capacity="flex-start"))
    assert cfg.slices[0].group.max_run_seconds == 7 * 86400
    cfg = parse_stack_config("t", stack(capacity="flex-start", maxRunDuration="36h"))
    assert cfg.slices[0].group.max_run_seconds == 36 * 3600


def test_flex_start_zone_off_the_list_or_unlisted_is_a_warning() -> None:
    off = parse_stack_config("t", stack(zone="us-central1-b", capacity="flex-start"))
    assert any("not among the flex-start zones" in w for w in stack_warnings(off))
    ironwood = parse_stack_config(
        "t", stack(zone="us-central1-c", tpu="tpu7x-16", capacity="flex-start"))
    assert any("no stored source lists its zones" in w for w in stack_warnings(ironwood))


def test_count_zero_on_an_elastic_group_starts_at_zero() -> None:
    cfg = parse_stack_config("t", stack(count=0, autoscaling={"min": 0, "max": 2}))
    g = cfg.slices[0].group
    assert (g.min_slices, g.initial_slices, g.max_slices) == (0, 0, 2)
