"""`raytpu submit --model PRESET --dry-run` carries the fit estimate; a job that cannot fit
its slice is refused (exit 2) with the numbers and the smallest shape that fits."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from raytpu.cli.app import app
from raytpu.facts.catalog import GENERATIONS, slice_shape
from typer.testing import CliRunner

EIGHT_B = ["--model", "8b", "--seq-len", "2048", "--batch-per-host", "4", "--remat"]


def _stacks(tmp_path: Path, zone: str = "us-west4-a") -> Path:
    d = tmp_path / "stacks"
    d.mkdir()
    config = {
        "gcp:project": "proj-1",
        "raytpu:zone": zone,
        "raytpu:slices": [{"name": "small", "tpu": "v5litepod-8"},
                          {"name": "big", "tpu": "v5litepod-32"},
                          {"name": "pair", "tpu": "v5litepod-8", "count": 2}],
        "raytpu:ray": {"clusterName": "rc-test", "namespace": "ray-ns"},
        "raytpu:storage": {"bucket": "ckpt-bucket"},
    }
    (d / "Pulumi.t1.yaml").write_text(yaml.safe_dump({"config": config}))
    return d


def _submit(tmp_path: Path, group: str, *flags: str, zone: str = "us-west4-a",
            ) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["submit", "--stack", "t1", "--stacks-dir",
                                      str(_stacks(tmp_path, zone)), "--slice-group", group,
                                      "--dry-run", *flags])
    return result.exit_code, result.stdout, result.stderr


def test_8b_is_refused_on_a_slice_too_small(tmp_path: Path) -> None:
    code, out, err = _submit(tmp_path, "small", *EIGHT_B)
    assert code == 2
    fit = json.loads(out)["fit"]  # the dry run still shows the numbers
    assert fit["fits"] is False
    assert fit["hbm_per_chip"] == GENERATIONS["v5e"].hbm_bytes_per_chip
    assert fit["peak_flops"] == slice_shape("v5litepod-8").peak_bf16_flops
    assert fit["bytes_per_chip"]["total"] > 0.9 * fit["hbm_per_chip"]
    assert fit["smallest_fitting"] == "v5litepod-32"
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: --model 8b: does not fit v5litepod-8 (2x4): ")
    assert "(cloud.google.com/tpu/docs/v5e)" in lines[0]
    assert lines[1].startswith("error: the smallest that fits is v5litepod-32")


def test_8b_is_accepted_on_a_slice_that_fits(tmp_path: Path) -> None:
    code, out, err = _submit(tmp_path, "big", *EIGHT_B)
    assert code == 0, err
    fit = json.loads(out)["fit"]
    assert fit["fits"] is True and fit["chips"] == 32
    kinds = {"params", "grads", "optimizer", "activations", "total"}
    assert set(fit["bytes_per_chip"]) == kinds
    assert fit["bytes_per_chip"]["total"] <= 0.9 * fit["hbm_per_chip"]
    assert fit["flops_per_step"] > 0


def test_the_default_byte_gpt_fits_and_says_so(tmp_path: Path) -> None:
    code, out, err = _submit(tmp_path, "small")
    assert code == 0, err
    fit = json.loads(out)["fit"]
    assert fit["fits"] is True and fit["fsdp"] is False


def test_the_way_out_is_searched_in_the_stacks_zone(tmp_path: Path) -> None:
    # us-east5-a offers v5p too: 4 of its 95 GiB chips hold 8b, where v5e needs 32 chips.
    code, out, err = _submit(tmp_path, "small", *EIGHT_B, zone="us-east5-a")
    assert code == 2
    assert json.loads(out)["fit"]["smallest_fitting"] == "v5p-8"
    assert err.strip().splitlines()[1].startswith(
        "error: the smallest that fits is v5p-8 (2x2x1, 4 chips)")


def test_a_multi_slice_submission_names_its_slices(tmp_path: Path) -> None:
    code, out, err = _submit(tmp_path, "pair", *EIGHT_B)  # its count: 2 slices
    assert code == 2
    fit = json.loads(out)["fit"]
    assert fit["slices"] == 2 and fit["smallest_fitting"] == "2 x v5litepod-32"
    assert err.strip().splitlines()[0].startswith(
        "error: --model 8b: does not fit 2 x v5litepod-8 (2x4): ")


def test_the_dry_run_shows_young_dalys_interval_beside_the_configured_one(
        tmp_path: Path) -> None:
    code, out, _ = _submit(tmp_path, "big", *EIGHT_B, "--checkpoint-every", "7",
                           "--mtbf-hours", "6")
    assert code == 0
    interval = json.loads(out)["checkpoint_interval"]
    assert interval["configured_steps"] == 7 and interval["mtbf_hours"] == 6.0
    assert interval["source"] == "estimate" and interval["save_s"] > 0
    assert interval["young_daly_overhead"] <= interval["configured_overhead"]
    (tmp_path / "again").mkdir()
    code, _, err = _submit(tmp_path / "again", "big", *EIGHT_B, "--mtbf-hours", "0")
    assert code == 2 and "error: --mtbf-hours: 0.0 must be a positive number" in err
