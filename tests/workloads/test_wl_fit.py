"""The fit estimate (pure arithmetic): bytes per chip by kind against the catalog's HBM,
FLOPs per step against the catalog's peak, and the smallest shape that fits."""

from __future__ import annotations

import pytest
from raytpu.facts.catalog import GENERATIONS, accelerator_types, slice_shape
from raytpu.spec.flops import param_count, train_flops_per_step
from raytpu.spec.memory_fit import (
    USABLE_FRACTION,
    check_run,
    estimate,
    fit_for,
    render_refusal,
    smallest_fitting,
)
from raytpu.spec.presets import preset
from raytpu.spec.training import ModelConfig, TrainConfig

EIGHT_B = preset("8b")


def test_hbm_per_chip_is_the_catalogs_sourced_figure() -> None:
    # As each generation's Cloud TPU page states it (GiB where it says GiB, else GB).
    assert {g: GENERATIONS[g].hbm_bytes_per_chip for g in GENERATIONS} == {
        "v4": 32 * 2**30, "v5e": 16 * 10**9, "v5p": 95 * 2**30, "v6e": 32 * 10**9,
        "tpu7x": 192 * 2**30,  # the TPU7x page: "HBM capacity per chip (GiB) 192"
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
    # us-west4-a offers v5e alone (the catalog's zones), so the way out is a bigger v5e.
    smallest = smallest_fitting(EIGHT_B, slice_shape("v5litepod-8"), zone="us-west4-a", **args)
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
    assert lines[1].startswith("no TPU slice in the catalog fits it at this batch")
    assert "lower --batch-per-host or --seq-len, or add --remat" in lines[1]
    lines = render_refusal(estimate(EIGHT_B, slice_shape("v6e-8"), **huge), None, "8b",
                           zone="us-east5-a")
    assert lines[1].startswith("no TPU slice offered in us-east5-a fits it at this batch")


def test_fit_object_for_the_dry_run() -> None:
    out = fit_for(preset("tiny"), slice_shape("v4-8"), batch_per_host=8, seq_len=128,
                  zone="us-central2-b")  # v4's only zone: v4 alone is offered there
    assert set(out["bytes_per_chip"]) == {"params", "grads", "optimizer", "activations", "total"}
    assert out["fits"] is True
    assert out["hbm_per_chip"] == 32 * 2**30
    assert out["smallest_fitting"] == "v4-8"
    assert {"flops_per_step", "peak_flops", "hbm_source", "usable_fraction"} <= set(out)


def test_a_run_is_checked_with_its_own_settings() -> None:
    run = TrainConfig(tpu="v5litepod-8", preset="8b", batch_per_host=4, remat=True,
                      model=ModelConfig(seq_len=2048))
    fit, refusal = check_run(run, run.shape(), zone="us-west4-a")
    assert fit["fits"] is False and fit["smallest_fitting"] == "v5litepod-32"
    assert refusal is not None and refusal[0].startswith("--model 8b: does not fit v5litepod-8")
    fit, refusal = check_run(TrainConfig(tpu="v5litepod-32", preset="8b", batch_per_host=4,
                                         remat=True, model=ModelConfig(seq_len=2048)),
                             TrainConfig(tpu="v5litepod-32").shape())
    assert fit["fits"] is True and refusal is None
    byte_gpt, refusal = check_run(TrainConfig(), TrainConfig().shape())  # the default job
    assert byte_gpt["fits"] is True and byte_gpt["fsdp"] is False and refusal is None


EIGHT_B_REMAT = dict(batch_per_host=4, seq_len=2048, remat=True)


def test_the_smallest_fitting_shape_is_searched_in_every_generation_of_the_zone() -> None:
    small = slice_shape("v5litepod-8")
    # us-east5-a offers v5e, v5p and v6e: 4 v5p chips of 95 GiB hold what takes 32 of v5e's.
    east = smallest_fitting(EIGHT_B, small, zone="us-east5-a", **EIGHT_B_REMAT)
    assert east is not None and east.fits and east.accelerator_type == "v5p-8"
    assert east.hbm_per_chip == GENERATIONS["v5p"].hbm_bytes_per_chip
    # us-central1-b offers v6e (and the stack's own v5e): 8 chips of 32 GB.
    central = smallest_fitting(EIGHT_B, small, zone="us-central1-b", **EIGHT_B_REMAT)
    assert central is not None and central.accelerator_type == "v6e-8"
    # No zone known: the whole catalog, and no shape of any generation with fewer chips fits.
    anywhere = smallest_fitting(EIGHT_B, small, **EIGHT_B_REMAT)
    assert anywhere is not None and anywhere.accelerator_type == "v5p-8"
    for gen in GENERATIONS:
        for name in accelerator_types(gen):
            shape = slice_shape(name)
            if shape.chips < anywhere.chips:
                assert not estimate(EIGHT_B, shape, **EIGHT_B_REMAT).fits, name


def test_a_tie_in_chips_goes_to_the_jobs_own_generation() -> None:
    # One chip of v5e or of v6e (both offered in us-east5-a) holds `tiny`: v6e's job stays v6e.
    args = dict(batch_per_host=8, seq_len=128)
    assert fit_for(preset("tiny"), slice_shape("v6e-8"), zone="us-east5-a",
                   **args)["smallest_fitting"] == "v6e-1"
    assert fit_for(preset("tiny"), slice_shape("v5litepod-8"), zone="us-east5-a",
                   **args)["smallest_fitting"] == "v5litepod-1"
    # v4's smallest slice has 4 chips: with no zone, one chip of v5e (first in the catalog).
    assert fit_for(preset("tiny"), slice_shape("v4-8"), **args)["smallest_fitting"] == (
        "v5litepod-1")


def test_a_multi_slice_run_is_named_as_its_slices_not_as_one_bigger_slice() -> None:
    run = TrainConfig(tpu="v5litepod-8", slices=2, preset="8b", batch_per_host=4, remat=True,
                      model=ModelConfig(seq_len=2048))
    fit, refusal = check_run(run, run.shape(), zone="us-west4-a")
    assert fit["fits"] is False and fit["slices"] == 2 and fit["chips"] == 16
    # Two slices of 32 chips (64 in all), not one v5litepod-32 nor a v5litepod-64.
    assert fit["smallest_fitting"] == "2 x v5litepod-32"
    assert refusal is not None
    assert refusal[0].startswith("--model 8b: does not fit 2 x v5litepod-8 (2x4): ")
    assert refusal[1].startswith("the smallest that fits is 2 x v5litepod-32 (4x8, 64 chips): ")
    # Data-parallel slices do not shrink the bytes per chip: 2 x v5litepod-16 is as full as one.
    one = estimate(EIGHT_B, slice_shape("v5litepod-16"), **EIGHT_B_REMAT)
    two = estimate(EIGHT_B, slice_shape("v5litepod-16"), slices=2, **EIGHT_B_REMAT)
    assert one.bytes_per_chip == two.bytes_per_chip and not two.fits
