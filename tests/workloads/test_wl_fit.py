"""The fit estimate (pure arithmetic): bytes per chip by kind against the catalog's HBM,
FLOPs per step against the catalog's peak, and the smallest shape that fits."""

from __future__ import annotations

import pytest
from raytpu.facts.catalog import GENERATIONS, slice_shape
from raytpu.workloads.fit import (
    USABLE_FRACTION,
    estimate,
    fit_for,
    render_refusal,
    smallest_fitting,
)
from raytpu.workloads.flops import param_count, train_flops_per_step
from raytpu.workloads.presets import preset

EIGHT_B = preset("8b")


def test_hbm_per_chip_is_the_catalogs_sourced_figure() -> None:
    # As each generation's Cloud TPU page states it (GiB where it says GiB, else GB).
    assert {g: GENERATIONS[g].hbm_bytes_per_chip for g in GENERATIONS} == {
        "v4": 32 * 2**30, "v5e": 16 * 10**9, "v5p": 95 * 2**30, "v6e": 32 * 10**9,
    }
    fit = estimate(EIGHT_B, slice_shape("v5p-8"), batch_per_host=1, seq_len=1024)
    assert fit.hbm_per_chip == 95 * 2**30
    assert fit.hbm_source == "cloud.google.com/tpu/docs/v5p"


def test_state_bytes_per_chip_are_16_bytes_per_parameter_over_the_chips() -> None:
    shape = slice_shape("v5p-32")  # 16 chips
    fit = estimate(EIGHT_B, shape, batch_per_host=4, seq_len=2048)
    n = param_count(EIGHT_B)
    assert fit.bytes_per_chip["params"] == 4 * n // 16
    assert fit.bytes_per_chip["grads"] == 4 * n // 16
    assert fit.bytes_per_chip["optimizer"] == 8 * n // 16
    kinds = ("params", "grads", "optimizer", "activations")
    assert fit.bytes_per_chip["total"] == sum(fit.bytes_per_chip[k] for k in kinds)
    replicated = estimate(EIGHT_B, shape, batch_per_host=4, seq_len=2048, fsdp=False)
    assert replicated.bytes_per_chip["params"] == 4 * n


def test_flops_per_step_use_the_mfu_formula_and_the_catalog_peak() -> None:
    fit = estimate(EIGHT_B, slice_shape("v6e-16"), slices=2, batch_per_host=8, seq_len=4096)
    global_batch = 8 * 4 * 2  # 4 hosts of 4 chips, 2 slices
    assert fit.flops_per_step == train_flops_per_step(EIGHT_B, 4096, global_batch)
    assert fit.peak_flops == 2 * 16 * 918e12
    assert fit.chips == 32
    assert fit.step_time_at_peak_s == pytest.approx(fit.flops_per_step / fit.peak_flops)


def test_remat_and_shorter_contexts_lower_the_activations() -> None:
    shape = slice_shape("v5p-64")
    full = estimate(EIGHT_B, shape, batch_per_host=4, seq_len=4096).bytes_per_chip
    remat = estimate(EIGHT_B, shape, batch_per_host=4, seq_len=4096, remat=True).bytes_per_chip
    short = estimate(EIGHT_B, shape, batch_per_host=4, seq_len=1024).bytes_per_chip
    assert remat["activations"] < full["activations"] / 4
    assert short["activations"] < full["activations"] / 4
    assert remat["params"] == full["params"]


def test_8b_is_refused_on_a_small_slice_and_accepted_on_one_that_fits() -> None:
    args = dict(batch_per_host=4, seq_len=2048, remat=True)
    small = estimate(EIGHT_B, slice_shape("v5litepod-8"), **args)  # 8 x 16 GB
    assert not small.fits
    assert small.bytes_per_chip["total"] > USABLE_FRACTION * 16 * 10**9
    smallest = smallest_fitting(EIGHT_B, slice_shape("v5litepod-8"), **args)
    assert smallest is not None and smallest.fits
    assert smallest.accelerator_type == "v5litepod-32"
    # Every smaller v5e shape with the same 4-chip hosts really does not fit.
    for name in ("v5litepod-16",):
        assert not estimate(EIGHT_B, slice_shape(name), **args).fits
    lines = render_refusal(small, smallest, "8b")
    assert lines[0].startswith("--model 8b: does not fit v5litepod-8 (2x4): ")
    assert "usable of 14.9 GiB HBM per chip (cloud.google.com/tpu/docs/v5e)" in lines[0]
    assert lines[1].startswith("the smallest that fits is v5litepod-32 (4x8, 32 chips)")


def test_no_shape_fits_when_the_activations_alone_overflow_a_chip() -> None:
    huge = dict(batch_per_host=64, seq_len=8192)
    assert smallest_fitting(EIGHT_B, slice_shape("v6e-8"), **huge) is None
    lines = render_refusal(estimate(EIGHT_B, slice_shape("v6e-8"), **huge), None, "8b")
    assert "lower --batch-per-host or --seq-len, or add --remat" in lines[1]


def test_fit_object_for_the_dry_run() -> None:
    out = fit_for(preset("tiny"), slice_shape("v4-8"), batch_per_host=8, seq_len=128)
    assert set(out["bytes_per_chip"]) == {"params", "grads", "optimizer", "activations", "total"}
    assert out["fits"] is True
    assert out["hbm_per_chip"] == 32 * 2**30
    assert out["smallest_fitting"] == "v4-8"
    assert {"flops_per_step", "peak_flops", "hbm_source", "usable_fraction"} <= set(out)


def test_a_run_is_checked_with_its_own_settings() -> None:
    from raytpu.workloads.config import ModelConfig, TrainConfig
    from raytpu.workloads.fit import check_run

    run = TrainConfig(tpu="v5litepod-8", preset="8b", batch_per_host=4, remat=True,
                      model=ModelConfig(seq_len=2048))
    fit, refusal = check_run(run, run.shape())
    assert fit["fits"] is False and fit["smallest_fitting"] == "v5litepod-32"
    assert refusal is not None and refusal[0].startswith("--model 8b: does not fit v5litepod-8")
    fit, refusal = check_run(TrainConfig(tpu="v5litepod-32", preset="8b", batch_per_host=4,
                                         remat=True, model=ModelConfig(seq_len=2048)),
                             TrainConfig(tpu="v5litepod-32").shape())
    assert fit["fits"] is True and refusal is None
    byte_gpt, refusal = check_run(TrainConfig(), TrainConfig().shape())  # the default job
    assert byte_gpt["fits"] is True and byte_gpt["fsdp"] is False and refusal is None
