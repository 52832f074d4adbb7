"""``raytpu plan``'s job table: each ``raytpu:jobs`` entry's bytes per chip against HBM and
whether it fits, by the very estimate ``raytpu submit`` refuses a job by (the same ``fit``
object for the same trainer on the same slices), in the human plan and in ``--json``."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from ray_support import SAMPLES, plan_ray
from raytpu.operations.submit import DoesNotFit, build_submission
from raytpu.plan.engine import PlanResult
from raytpu.plan.job_tables import job_tables
from raytpu.plan.render import render_plan
from raytpu.spec.memory_fit import gib
from raytpu.spec.train_options import BadFlags, trainer_defaults
from rich.console import Console

# A byte GPT of ~9.7 B parameters, replicated on each chip (no preset: no FSDP), cannot fit a
# v5e chip's 16 GB; a small one on two slices of 16 chips can.
HUGE = {"nLayers": 48, "dModel": 4096, "nHeads": 32, "batchPerHost": 1, "seqLen": 512}
SMALL = {"nLayers": 4, "dModel": 256, "nHeads": 8, "batchPerHost": 8, "seqLen": 1024}
JOBS = [
    {"name": "small", "sliceGroup": "pod16", "slices": 2, "train": SMALL, "mtbfHours": 4},
    {"name": "huge", "sliceGroup": "single8", "train": HUGE},
]
# The jobs' clusters hold slices outside the shared RayCluster: their groups are elastic,
# with pools for both (a fixed group's are all the shared cluster's), and pod16 leaves the
# shared cluster the 2 slices `submit` sizes the same run on.
JOB_SLICES = [{"name": "pod16", "tpu": "v5litepod-16", "autoscaling": {"min": 0, "max": 4}},
              {"name": "single8", "tpu": "v5litepod-8", "autoscaling": {"min": 0, "max": 2}}]
# zone us-west4-a: v5e only
RAW = {**SAMPLES["v5e-elastic"], "raytpu:slices": JOB_SLICES, "raytpu:jobs": JOBS}
IMAGE = "us-west4-docker.pkg.dev/acme-ml/raytpu/raytpu@sha256:" + "ab" * 32
SNAKE = {"nLayers": "n_layers", "dModel": "d_model", "nHeads": "n_heads",
         "batchPerHost": "batch_per_host", "seqLen": "seq_len"}


@pytest.fixture(scope="module")
def plan() -> PlanResult:
    return plan_ray(RAW, image=IMAGE)


def _submit_fit(tmp_path: Path, group: str, slices: int | None, train: dict[str, Any],
                key: str = "fit", mtbf_hours: float | None = None) -> dict[str, Any]:
    """``raytpu submit --dry-run``'s ``fit`` (or ``key``) for the same trainer on the same
    slice group."""
    stacks = tmp_path / "stacks"
    stacks.mkdir(exist_ok=True)
    (stacks / "Pulumi.t.yaml").write_text(yaml.safe_dump({"config": RAW}))
    trainer = {**trainer_defaults(), **{SNAKE[k]: v for k, v in train.items()}}
    try:
        sub = build_submission(stack="t", stacks_dir=stacks, slice_group=group, slices=slices,
                               address="http://127.0.0.1:8265", run_name="r", max_failures=0,
                               trainer=trainer, mtbf_hours=mtbf_hours)
    except DoesNotFit as e:
        sub = e.submission
    fit: dict[str, Any] = sub.extra[key]
    return fit


def _rows(plan: PlanResult) -> dict[str, dict[str, str]]:
    (table,) = job_tables(plan)
    return {row[0]: dict(zip(table.columns, row, strict=True)) for row in table.rows}


def test_the_job_table_has_submits_estimate_for_each_job(plan: PlanResult,
                                                         tmp_path: Path) -> None:
    rows = _rows(plan)
    assert sorted(rows) == ["huge", "small"]
    small = _submit_fit(tmp_path, "pod16", 2, SMALL)
    huge = _submit_fit(tmp_path, "single8", None, HUGE)
    # The estimate itself: the small job fits, the huge one does not (by a wide margin).
    assert small["fits"] is True and huge["fits"] is False
    assert huge["bytes_per_chip"]["total"] > 2 * huge["hbm_per_chip"]

    assert rows["small"]["fits"] == "yes"
    assert rows["small"]["slices"] == "2 x v5litepod-16 (4x4, 32 chips)"
    assert rows["small"]["batch/host x context"] == "8 x 1024"
    assert rows["small"]["bytes per chip"] == gib(small["bytes_per_chip"]["total"])
    assert rows["huge"]["fits"] == "no"
    assert rows["huge"]["slices"] == "v5litepod-8 (2x4, 8 chips)"
    assert rows["huge"]["bytes per chip"] == gib(huge["bytes_per_chip"]["total"])
    assert rows["huge"]["usable HBM per chip"] == "13.4 GiB of 14.9 GiB"  # 90 % of 16 GB
    # Replicated state does not shrink with more chips, so no v5e slice holds it.
    assert rows["huge"]["smallest that fits"] == "none" == str(huge["smallest_fitting"]).lower()
    assert rows["small"]["smallest that fits"] == small["smallest_fitting"]


def test_the_human_plan_shows_the_table_and_why_a_job_does_not_fit(plan: PlanResult) -> None:
    out = io.StringIO()
    render_plan(plan, [], Console(file=out, width=250, color_system=None))
    text = out.getvalue()
    assert "Jobs (raytpu:jobs RayJobs: fit per chip)" in text
    (line,) = [ln for ln in text.splitlines() if ln.startswith("huge  ")]  # its grid row
    assert line.split() == " ".join(_rows(plan)["huge"].values()).split()
    assert line.split()[-9:-2] == ["13.4", "GiB", "of", "14.9", "GiB", "no", "none"]
    assert "huge does not fit: per chip params " in text
    assert "small does not fit" not in text


def test_plan_json_has_each_jobs_fit(plan: PlanResult, tmp_path: Path) -> None:
    doc = json.loads(plan.to_json())
    jobs = {j["name"]: j for j in doc["jobs"]}
    assert jobs["huge"]["slice_group"] == "single8"
    assert jobs["huge"]["fit"] == _submit_fit(tmp_path, "single8", None, HUGE)
    assert jobs["small"]["fit"]["fits"] is True and jobs["small"]["fit"]["slices"] == 2


def test_the_job_table_shows_young_dalys_interval_beside_the_configured_one(
        plan: PlanResult, tmp_path: Path) -> None:
    jobs = {j["name"]: j for j in json.loads(plan.to_json())["jobs"]}
    small = jobs["small"]["checkpoint_interval"]
    # The same estimate as submit's for the same trainer and MTBF (the job's mtbfHours: 4).
    assert small == _submit_fit(tmp_path, "pod16", 2, SMALL, "checkpoint_interval", 4.0)
    assert small["mtbf_hours"] == 4.0 and jobs["huge"]["checkpoint_interval"]["mtbf_hours"] == 24
    assert small["configured_steps"] == trainer_defaults()["checkpoint_every"]
    assert small["young_daly_overhead"] <= small["configured_overhead"]
    assert _rows(plan)["small"]["checkpoint every (Young/Daly)"] == (
        f"{small['configured_steps']} ({small['young_daly_steps']})")
    # A job that fails more often checkpoints more often.
    daily = _submit_fit(tmp_path, "pod16", 2, SMALL, "checkpoint_interval")
    assert daily["young_daly_steps"] > small["young_daly_steps"]


def test_a_stack_without_jobs_has_no_job_table(sample_plans: dict[str, PlanResult]) -> None:
    assert job_tables(sample_plans["v5e-elastic"]) == []
    assert sample_plans["v5e-elastic"].to_dict()["jobs"] == []


def test_submit_refuses_an_mtbf_that_is_not_positive(tmp_path: Path) -> None:
    with pytest.raises(BadFlags, match=r"--mtbf-hours: -1.0 must be a positive number"):
        _submit_fit(tmp_path, "pod16", 2, SMALL, "checkpoint_interval", -1.0)
