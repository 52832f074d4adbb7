"""The slice's shape travels with the job: for every slice group of every shipped stack and
sample, ``raytpu submit --dry-run``'s entrypoint runs the launcher, whose ``--dry-run``
scaling must agree with the RayCluster worker group the stack declares -- and with what
Ray's own code derives from that group (the autoscaler's ``TPU-<pod type>-head`` resource,
Ray Train's slice reservation)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from ray_support import RAYCLUSTER, SAMPLES, STACKS_DIR, as_object, plan_ray, stack_files
from raytpu.facts.catalog import ACCELERATOR_LABEL, TOPOLOGY_LABEL, TPU_RESOURCE
from raytpu.facts.names import SLICE_GROUP_LABEL
from raytpu.operations.submit import build_submission
from raytpu.plan.engine import PlanResult, load_stack_file

ray_autoscaler = pytest.importorskip("ray.autoscaler._private.kuberay.autoscaling_config")
ray_tpu = pytest.importorskip("ray._private.accelerators.tpu")
launcher = pytest.importorskip("raytpu.workloads.launcher")


def _stacks() -> dict[str, dict[str, Any]]:
    return {**{f"stacks/{s}": load_stack_file(s, STACKS_DIR) for s in stack_files()},
            **{f"sample/{s}": raw for s, raw in SAMPLES.items()}}


STACKS = _stacks()
CASES = [(name, g["name"]) for name, raw in STACKS.items() for g in raw["raytpu:slices"]]


@pytest.fixture(scope="module")
def plans() -> dict[str, PlanResult]:
    return {name: plan_ray(raw) for name, raw in STACKS.items()}


def _dry_runs(tmp_path: Path, raw: dict[str, Any], group: str, slices: int | None,
              capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(submission, the launcher's --dry-run JSON) for one slice group."""
    (tmp_path / "Pulumi.s.yaml").write_text(yaml.safe_dump({"config": raw}))
    sub = build_submission(stack="s", stacks_dir=tmp_path, slice_group=group, slices=slices,
                           address="http://127.0.0.1:8265", run_name="r", max_failures=1,
                           trainer={"steps": 10, "data": None, "checkpoint_every": 5,
                                    "batch_per_host": 2, "n_layers": 1, "d_model": 32,
                                    "n_heads": 2, "seq_len": 16, "lr": 1e-3,
                                    "warmup_steps": 1, "seed": 0, "log_every": 1})
    argv = shlex.split(sub.entrypoint)
    assert argv[:3] == ["python", "-m", "raytpu.workloads.launcher"]
    capsys.readouterr()
    assert launcher.main([*argv[3:], "--dry-run"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1, out  # one JSON object, nothing else on stdout
    return sub.to_dict(), json.loads(out[0])


def _group(plan: PlanResult, name: str) -> dict[str, Any]:
    (rc,) = plan.by_type(RAYCLUSTER)
    (group,) = [g for g in as_object(rc.inputs)["spec"]["workerGroupSpecs"]
                if g["groupName"] == name]
    return group


@pytest.mark.parametrize(("stack", "group_name"), CASES)
def test_submit_and_launcher_agree_with_the_worker_group(
    stack: str, group_name: str, plans: dict[str, PlanResult], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    group = _group(plans[stack], group_name)
    # Up to what the shared RayCluster's group may hold (its pools less the teams' quotas).
    for slices in sorted({1, group["maxReplicas"]}):
        sub, scaling = _dry_runs(tmp_path, STACKS[stack], group_name, slices, capsys)
        pod = group["template"]["spec"]
        (container,) = pod["containers"]
        chips = int(container["resources"]["limits"][TPU_RESOURCE])
        assert int(container["resources"]["requests"][TPU_RESOURCE]) == chips
        assert scaling["slices"] == slices
        assert scaling["num_workers"] == group["numOfHosts"] * slices
        assert scaling["resources_per_worker"]["TPU"] == chips == scaling["chips_per_host"]
        assert scaling["topology"] == pod["nodeSelector"][TOPOLOGY_LABEL]
        # Ray Train reserves TPU-<pod type>-head; the autoscaler gives the group that resource.
        pod_type = ray_tpu.infer_tpu_pod_type_from_topology(scaling["topology"],
                                                             scaling["accelerator_type"])
        assert pod_type == scaling["pod_type"]
        node_type = ray_autoscaler._node_type_from_group_spec(group, is_head=False)
        assert node_type["resources"].get(f"TPU-{pod_type}-head") == 1
        assert node_type["resources"]["TPU"] == chips
        # Scale-from-zero: the autoscaler's node type for this group carries the label the
        # capacity request selects; Ray Train's own head reservation selects
        # ray.io/tpu-worker-id, which no node type has before a raylet runs.
        assert node_type["labels"].get(SLICE_GROUP_LABEL) == group_name
        assert "ray.io/tpu-worker-id" not in node_type["labels"]
        assert node_type["max_workers"] == group["maxReplicas"] * group["numOfHosts"]
        assert pod["nodeSelector"][ACCELERATOR_LABEL]
        # The capacity request selects exactly this group, one bundle per host.
        assert scaling["slice_group"] == group_name
        assert len(scaling["capacity_request"]) == scaling["num_workers"]
        for bundle in scaling["capacity_request"]:
            assert bundle["label_selector"] == {SLICE_GROUP_LABEL: group_name}
            assert bundle["resources"] == scaling["resources_per_worker"]
        assert sub["slice_group"] == group_name
        assert (sub["topology"], sub["hosts_per_slice"], sub["chips_per_host"]) == (
            scaling["topology"], group["numOfHosts"], chips)


def test_prod_eval_group_is_two_hosts_of_four_chips(
    plans: dict[str, PlanResult], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """The case that used to hang: v5litepod-8 on ct5lp-hightpu-4t is 2 x 4, not 1 x 8."""
    _, scaling = _dry_runs(tmp_path, STACKS["stacks/prod"], "v5e-8-eval", None, capsys)
    assert (scaling["num_workers"], scaling["resources_per_worker"]["TPU"]) == (2, 4)
    assert _group(plans["stacks/prod"], "v5e-8-eval")["numOfHosts"] == 2


@pytest.mark.parametrize(("stack", "group_name"), CASES)
def test_own_code_dry_run_agrees_with_the_worker_group(
    stack: str, group_name: str, plans: dict[str, PlanResult], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``raytpu submit --dry-run -- CMD``: the same launcher path, the same shape, and the
    command reaching every host unchanged."""
    from raytpu.cli.app import app
    from typer.testing import CliRunner

    (tmp_path / "Pulumi.s.yaml").write_text(yaml.safe_dump({"config": STACKS[stack]}))
    work = tmp_path / "code"
    work.mkdir()
    (work / "train.py").write_text("print('hi')\n")
    group = _group(plans[stack], group_name)
    # As many slices as the shared RayCluster's group may hold (the pools less team quotas).
    most = int(group["maxReplicas"])
    command = ["python", "train.py", "--lr", "3", "--", "x y"]
    result = CliRunner().invoke(app, [
        "submit", "--stack", "s", "--stacks-dir", str(tmp_path), "--slice-group", group_name,
        "--slices", str(most), "--working-dir", str(work), "--env", "A=1",
        "--dry-run", "--", *command])
    assert result.exit_code == 0, result.output
    sub = json.loads(result.stdout)
    argv = shlex.split(sub["entrypoint"])
    assert argv[:3] == ["python", "-m", "raytpu.workloads.launcher"]
    cut = argv.index("--")
    assert argv[cut + 1:] == command == sub["command"]
    capsys.readouterr()
    assert launcher.main([*argv[3:cut], "--dry-run"]) == 0
    scaling = json.loads(capsys.readouterr().out)
    (container,) = group["template"]["spec"]["containers"]
    chips = int(container["resources"]["limits"][TPU_RESOURCE])
    assert (scaling["num_workers"], scaling["chips_per_host"], scaling["slice_group"]) == (
        group["numOfHosts"] * most, chips, group_name)
    assert (sub["hosts_per_slice"], sub["hosts"], sub["slices"], sub["chips_per_host"]) == (
        group["numOfHosts"], group["numOfHosts"] * most, most, chips)
    assert sub["topology"] == scaling["topology"] == group["template"]["spec"][
        "nodeSelector"][TOPOLOGY_LABEL]
    env = sub["runtime_env"]
    assert env["working_dir"] == str(work.resolve()) and env["env_vars"]["A"] == "1"
    assert ".git" in env["excludes"] and sub["queue"] is None
