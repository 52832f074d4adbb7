"""Pods that must schedule and slices Ray must accept: checked at config time
(raytpu.config.node_fit)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from raytpu.config.node_fit import HEADROOM, parse_quantity, request_problems
from raytpu.config.validate import parse_stack_config, stack_warnings
from raytpu.facts.catalog import GENERATIONS, slice_shape
from raytpu.facts.machines import GENERAL_PURPOSE_MACHINES, MACHINE_RESOURCES, node_allocatable
from raytpu.spec.pod_resources import worker_resources
from stack_configs import problems_of, stack_config


def _raw(**overrides: Any) -> dict[str, Any]:
    return stack_config(**overrides)


_problems = problems_of


# -- GKE's allocatable ---------------------------------------------------------------------


def test_allocatable_follows_gkes_reservation_tiers() -> None:
    """plan-node-sizes: CPU 6 % / 1 % / 0.5 % x2 / 0.25 %; memory 25 % of 4 GiB, 20 % of 4,
    10 % of 8, 6 % of 112, 2 % above; plus the 100 MiB eviction threshold."""
    n4 = node_allocatable("n2-standard-4")
    assert n4 is not None and n4.cpu == pytest.approx(3.92)
    assert n4.memory_bytes == pytest.approx(16 * 2**30 - 2.6 * 2**30 - 100 * 2**20, abs=1024)
    n8 = node_allocatable("n2-standard-8")
    assert n8 is not None and n8.cpu == pytest.approx(7.91)
    assert n8.memory_gib_allocatable == pytest.approx(32 - 3.56 - 100 / 1024)
    big = node_allocatable("n2-highmem-128")  # 864 GB: the 2 % tier
    assert big is not None
    reserved = 1 + 0.8 + 0.8 + 112 * 0.06 + (864 - 128) * 0.02
    assert big.memory_gib_allocatable == pytest.approx(864 - reserved - 100 / 1024)
    assert big.cpu == pytest.approx(128 - (0.06 + 0.01 + 0.01 + 124 * 0.0025))


def test_headroom_covers_the_kernel_share_in_gkes_own_example() -> None:
    """GKE's plan-node-sizes page shows a 4 vCPU / 16 GB node with 3920m and 13498416Ki
    allocatable: the formula is ~3 % above that (kernel memory), inside the headroom."""
    n4 = node_allocatable("n2-standard-4")
    assert n4 is not None
    observed = 13498416 * 1024
    assert round(n4.cpu * 1000) == 3920
    assert n4.memory_bytes * (1 - HEADROOM) < observed < n4.memory_bytes


def test_machine_type_tables() -> None:
    assert GENERAL_PURPOSE_MACHINES["n2-standard-4"] == (4, 16)
    assert GENERAL_PURPOSE_MACHINES["e2-standard-8"] == (8, 32)
    assert GENERAL_PURPOSE_MACHINES["n1-standard-4"] == (4, 15)
    assert GENERAL_PURPOSE_MACHINES["c3-standard-22"] == (22, 88)
    assert node_allocatable("m3-megamem-64") is None  # not listed: not checked


@pytest.mark.parametrize(
    ("text", "value"),
    [("4", 4), ("500m", Decimal("0.5")), ("1.5", Decimal("1.5")), ("16Gi", 16 * 2**30),
     ("64G", 64 * 10**9), ("512Mi", 512 * 2**20), ("1e3", 1000), ("2k", 2000),
     (".5", Decimal("0.5"))],
)
def test_kubernetes_quantities(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["four", "16GB", "1.2.3", "", "4 Gi", "Gi"])
def test_malformed_quantities(text: str) -> None:
    with pytest.raises(ValueError, match="is not a Kubernetes quantity"):
        parse_quantity(text)


# -- the Ray head on the system pool -------------------------------------------------------


def test_head_too_big_for_the_system_pool_names_both_keys_and_the_machine_type() -> None:
    """The dev stack's old head (4 CPU / 16Gi, requests = limits) on n2-standard-4."""
    problems = _problems(_raw(**{
        "raytpu:cluster": {"systemPool": {"machineType": "n2-standard-4"}},
        "raytpu:ray": {"headCpu": "4", "headMemory": "16Gi"},
    }))
    assert len(problems) == 2
    for p in problems:
        assert p.startswith("raytpu:ray.headCpu '4' / headMemory '16Gi': the Ray head pod on "
                            "raytpu:cluster.systemPool.machineType 'n2-standard-4' would")
    assert "request 4 CPU" in problems[0] and "3.92 allocatable" in problems[0]
    assert "request 16.0 GiB of memory" in problems[1] and "13.3 GiB allocatable" in problems[1]


def test_head_that_fits_is_accepted() -> None:
    parse_stack_config("dev", _raw(**{
        "raytpu:cluster": {"systemPool": {"machineType": "n2-standard-4"}},
        "raytpu:ray": {"headCpu": "2", "headMemory": "8Gi"},
    }))


def test_autoscaler_sidecar_counts_against_the_head_when_a_group_is_elastic() -> None:
    head = {"headCpu": "3.2", "headMemory": "8Gi"}  # 3.2 + 0.5 > 3.53 usable on n2-standard-4
    pool = {"systemPool": {"machineType": "n2-standard-4"}}
    parse_stack_config("dev", _raw(**{"raytpu:cluster": pool, "raytpu:ray": head}))
    elastic = [{"name": "v5e-4", "tpu": "v5litepod-4", "autoscaling": {"min": 0, "max": 2}}]
    (problem,) = _problems(_raw(**{"raytpu:cluster": pool, "raytpu:ray": head,
                                   "raytpu:slices": elastic}))
    assert "autoscaler sidecar" in problem and "request 3.7 CPU" in problem


@pytest.mark.parametrize(("key", "value"), [("headCpu", "four"), ("headMemory", "16GB")])
def test_malformed_head_quantities(key: str, value: str) -> None:
    (problem,) = _problems(_raw(**{"raytpu:ray": {key: value}}))
    assert problem.startswith(f"raytpu:ray.{key}: {value!r} is not a Kubernetes quantity")


def test_unknown_system_machine_type_is_a_warning() -> None:
    cfg = parse_stack_config("dev", _raw(**{
        "raytpu:cluster": {"systemPool": {"machineType": "m3-megamem-64"}}}))
    assert any("'m3-megamem-64' is not in the catalog" in w for w in stack_warnings(cfg))


# -- TPU workers on their VMs --------------------------------------------------------------


@pytest.mark.parametrize(
    ("gen", "chips", "machine"),
    [(g.name, c, m) for g in GENERATIONS.values() for c, m in g.machine_types.items()],
)
def test_every_tpu_worker_pod_fits_its_vm(gen: str, chips: int, machine: str) -> None:
    """Workers request 80 % of the VM's vCPUs and memory: inside its allocatable, with the
    same headroom as the head."""
    shape = slice_shape(GENERATIONS[gen].accelerator_type(chips), machine_type=machine)
    res = worker_resources(shape)["requests"]
    assert request_problems(parse_quantity(res["cpu"]), parse_quantity(res["memory"]),
                            machine, "worker") == []


def test_every_tpu_machine_type_has_resources() -> None:
    machines = {m for g in GENERATIONS.values() for m in g.machine_types.values()}
    assert machines == set(MACHINE_RESOURCES)
    assert all(node_allocatable(m) is not None for m in machines)


def test_a_worker_request_above_the_vm_is_refused() -> None:
    problems = request_problems(Decimal(112), Decimal(100 * 2**30), "ct5lp-hightpu-4t", "w")
    assert len(problems) == 1 and "request 112 CPU" in problems[0]
    assert "111.65 allocatable of 112 vCPUs" in problems[0]


# -- Ray's TPU topologies ------------------------------------------------------------------


def test_topology_ray_rejects_is_a_config_error() -> None:
    raw = _raw(**{"raytpu:zone": "us-central2-b",
                  "raytpu:slices": [{"name": "big", "tpu": "v4-4096", "topology": "8x16x16"}]})
    (problem,) = _problems(raw)
    assert problem.startswith("raytpu:slices[0].topology: '8x16x16' (v4-4096): GKE accepts it "
                              "but Ray 2.60.0 rejects it")
    assert "multiples of 4 up to 12x12x16" in problem


def test_rejected_topology_names_the_ones_ray_accepts_for_the_same_chips() -> None:
    raw = _raw(**{"raytpu:zone": "us-central2-b",
                  "raytpu:slices": [{"name": "big", "tpu": "v4-2048", "topology": "4x4x64"}]})
    (problem,) = _problems(raw)
    assert problem.endswith("same chips, accepted by Ray: 8x8x16")


def test_accelerator_type_without_a_ray_topology_is_an_error_on_tpu() -> None:
    raw = _raw(**{"raytpu:zone": "us-central2-b",
                  "raytpu:slices": [{"name": "big", "tpu": "v4-4096"}]})
    (problem,) = _problems(raw)
    assert problem.startswith("raytpu:slices[0].tpu: 'v4-4096' has no topology Ray accepts")
    assert problem.endswith("the largest is v4-4608 (12x12x16)")


def test_topology_ray_accepts_passes() -> None:
    parse_stack_config("dev", _raw(**{
        "raytpu:zone": "us-central2-b",
        "raytpu:slices": [{"name": "big", "tpu": "v4-2048", "topology": "8x8x16"}]}))


# -- slice groups that share a selector ----------------------------------------------------


def test_two_groups_of_one_shape_and_machine_type_warn() -> None:
    cfg = parse_stack_config("dev", _raw(**{"raytpu:slices": [
        {"name": "a", "tpu": "v5litepod-8", "machineType": "ct5lp-hightpu-4t"},
        {"name": "b", "tpu": "v5litepod-8", "machineType": "ct5lp-hightpu-8t"},
        {"name": "c", "tpu": "v5litepod-8", "machineType": "ct5lp-hightpu-4t", "spot": True},
    ]}))
    (warning,) = [w for w in stack_warnings(cfg) if "each other's node pools" in w]
    assert warning.startswith("raytpu:slices[2]: same TPU shape and machine type as "
                              "raytpu:slices[0]")


def test_cli_plan_exits_2_on_a_head_that_cannot_schedule(tmp_path: Path) -> None:
    from raytpu.cli.app import app
    from typer.testing import CliRunner

    raw = _raw(**{"raytpu:cluster": {"systemPool": {"machineType": "n2-standard-4"}},
                  "raytpu:ray": {"headCpu": "4", "headMemory": "16Gi"}})
    (tmp_path / "Pulumi.big.yaml").write_text(yaml.safe_dump({"config": raw}))
    result = CliRunner().invoke(app, ["plan", "--stack", "big", "--stacks-dir", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "error: raytpu:ray.headCpu '4' / headMemory '16Gi'" in result.output
    assert "'n2-standard-4'" in result.output
