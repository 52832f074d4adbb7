"""Isolation in the whole stack program: Dataplane V2 on the cluster, NetworkPolicy in the
Ray namespace, the replacement warning, Google Groups for RBAC."""

from __future__ import annotations

from typing import Any

import pytest
from infra_support import CLUSTER, STACKS, raw_config
from raytpu.config.stack import ConfigError
from raytpu.plan.engine import PlanResult, run_program
from raytpu.plan.policies import evaluate

NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def _cluster(plan: PlanResult) -> dict[str, Any]:
    (c,) = [r for r in plan.resources if r.type == CLUSTER]
    return c.inputs


@pytest.mark.parametrize("stack", STACKS)
def test_stack_clusters_enforce_their_network_policies(
    stack: str, stack_plans: dict[str, PlanResult],
) -> None:
    plan = stack_plans[stack]
    assert _cluster(plan)["datapathProvider"] == "ADVANCED_DATAPATH"
    namespaces = {r.inputs["metadata"]["namespace"] for r in plan.resources
                  if r.type == NETWORK_POLICY}
    assert plan.config.ray.namespace in namespaces
    assert not [w for w in plan.warnings if "dataplaneV2" in w]  # stated in the stack file
    assert not [v for v in evaluate(plan) if v.policy == "dataplane-v2-for-network-policies"]


def test_unset_dataplane_v2_warns_that_an_older_cluster_is_replaced() -> None:
    plan = run_program("test", raw_config())
    assert _cluster(plan)["datapathProvider"] == "ADVANCED_DATAPATH"
    (warning,) = [w for w in plan.warnings if w.startswith("raytpu:cluster.dataplaneV2")]
    assert "REPLACED by the next `pulumi up`" in warning


def test_dataplane_v2_off_keeps_the_cluster_and_declares_no_dead_policies() -> None:
    plan = run_program("test", raw_config(raytpu_cluster={
        "name": "raytpu-test", "deletionProtection": False, "dataplaneV2": False}))
    assert "datapathProvider" not in _cluster(plan)
    assert not [r for r in plan.resources if r.type == NETWORK_POLICY]
    assert any("does not enforce NetworkPolicy" in w for w in plan.warnings)


def test_security_group_reaches_the_cluster_and_is_checked() -> None:
    group = "gke-security-groups@example.com"
    plan = run_program("test", raw_config(raytpu_cluster={
        "name": "raytpu-test", "deletionProtection": False, "securityGroup": group}))
    assert _cluster(plan)["authenticatorGroupsConfig"] == {"securityGroup": group}
    with pytest.raises(ConfigError) as info:
        run_program("test", raw_config(raytpu_cluster={"securityGroup": "ml@example.com"}))
    assert any(p.startswith("raytpu:cluster.securityGroup: 'ml@example.com' must be "
                            "gke-security-groups@") for p in info.value.problems), \
        info.value.problems
