"""The fake nodes mirror the plan's pools as GKE makes them (no binaries needed)."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
import yaml
from raytpu.facts.catalog import ACCELERATOR_LABEL, TOPOLOGY_LABEL, TPU_RESOURCE
from raytpu.facts.machines import node_allocatable
from raytpu.facts.names import NODEPOOL_LABEL
from raytpu.plan.engine import PlanResult, run_plan
from raytpu.rehearse.kwok_stages import STAGE_NAMES, config_yaml
from raytpu.rehearse.nodes import PUBLISHED_ALLOCATABLE, fake_nodes


@cache
def _plan(stack: str) -> PlanResult:
    return run_plan(stack, preview=True)


def _by_pool(nodes: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for n in nodes:
        out.setdefault(n["metadata"]["labels"][NODEPOOL_LABEL], []).append(n)
    return out


def test_staging_v4_16_is_two_tainted_hosts_of_four_chips() -> None:
    _, nodes = fake_nodes(_plan("staging"))
    pools = _by_pool(nodes)
    assert len(pools["v4-16-0"]) == 2  # v4-16 counts TensorCores: 8 chips, 2 hosts
    for n in pools["v4-16-0"]:
        labels = n["metadata"]["labels"]
        assert labels[ACCELERATOR_LABEL] == "tpu-v4-podslice"
        assert labels[TOPOLOGY_LABEL] == "2x2x2"
        assert n["status"]["capacity"][TPU_RESOURCE] == "4"
        assert {"key": TPU_RESOURCE, "value": "present", "effect": "NoSchedule"} in \
            n["spec"]["taints"]
    (system,) = pools["system"]
    assert "taints" not in system["spec"]
    assert TPU_RESOURCE not in system["status"]["capacity"]


def test_single_host_pool_gets_the_topology_label_gke_gives_it() -> None:
    _, nodes = fake_nodes(_plan("dev"))
    (v5e4,) = _by_pool(nodes)["v5e-4"]
    assert v5e4["metadata"]["labels"][TOPOLOGY_LABEL] == "2x2"
    assert v5e4["status"]["allocatable"][TPU_RESOURCE] == "4"


def test_elastic_pools_start_at_their_initial_size_and_at_max_fill_every_slice() -> None:
    pools, _ = fake_nodes(_plan("prod"))
    initial = {p.name: p.nodes for p in pools}
    assert initial["v5e-16-0"] == 4 and initial["v5e-16-1"] == 0
    pools_max, nodes = fake_nodes(_plan("prod"), at_max=True)
    at_max = {p.name: p.nodes for p in pools_max}
    assert all(at_max[f"v5e-16-{i}"] == 4 for i in range(4))
    assert len({n["metadata"]["name"] for n in nodes}) == len(nodes)


def test_system_node_has_gkes_published_allocatable_not_the_projects_formula() -> None:
    _, nodes = fake_nodes(_plan("dev"))
    (system,) = _by_pool(nodes)["system"]
    assert system["status"]["allocatable"]["memory"] == "13498416Ki"
    # The published figure is below the formula (the kernel keeps some): a head sized by
    # the formula alone could pass here and fail on GKE, so the rehearsal uses GKE's.
    formula = node_allocatable("n2-standard-4")
    assert formula is not None
    assert formula.memory_bytes > 13498416 * 1024


@pytest.mark.parametrize("machine_type", sorted(PUBLISHED_ALLOCATABLE))
def test_published_allocatable_is_near_gkes_formula(machine_type: str) -> None:
    cpu, memory = PUBLISHED_ALLOCATABLE[machine_type]
    formula = node_allocatable(machine_type)
    assert formula is not None
    assert abs(int(cpu.removesuffix("m")) / 1000 - formula.cpu) < 0.05
    assert abs(int(memory.removesuffix("Ki")) * 1024 / formula.memory_bytes - 1) < 0.04


def test_kwok_config_has_the_stages_kwok_needs() -> None:
    docs = list(yaml.safe_load_all(config_yaml()))
    assert [d["metadata"]["name"] for d in docs] == list(STAGE_NAMES)
    assert {d["spec"]["resourceRef"]["kind"] for d in docs} == {"Node", "Pod"}
    assert all(d["apiVersion"] == "kwok.x-k8s.io/v1alpha1" and d["kind"] == "Stage"
               for d in docs)


def test_ironwood_pools_get_tpu7x_nodes_from_the_catalog() -> None:
    """No special case: the machine type finds the generation, the pool's topology (a
    workload-policy pool carries it too) labels the nodes."""
    from raytpu.plan.engine import run_program

    raw = {"gcp:project": "acme-ml", "raytpu:zone": "us-central1-c",
           "raytpu:cluster": {"name": "iron", "dataplaneV2": True},
           "raytpu:slices": [
               {"name": "iw-16", "tpu": "tpu7x-16", "count": 0, "capacity": "flex-start",
                "autoscaling": {"min": 0, "max": 2}},
               {"name": "iw-8", "tpu": "tpu7x-8"}]}
    plan = run_program("t", raw, preview=True)
    pools, _ = fake_nodes(plan)
    assert {p.name: p.nodes for p in pools if p.tpu_chips} == {
        "iw-16-0": 0, "iw-16-1": 0, "iw-8": 1}  # flex-start pools start empty
    _, nodes = fake_nodes(plan, at_max=True)
    by_pool = _by_pool(nodes)
    for pool, topology, hosts in (("iw-16-0", "2x2x2", 2), ("iw-16-1", "2x2x2", 2),
                                  ("iw-8", "2x2x1", 1)):
        assert len(by_pool[pool]) == hosts
        for n in by_pool[pool]:
            labels = n["metadata"]["labels"]
            assert labels[ACCELERATOR_LABEL] == "tpu7x"
            assert labels[TOPOLOGY_LABEL] == topology
            assert n["status"]["capacity"][TPU_RESOURCE] == "4"
