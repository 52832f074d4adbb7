"""Network alone: VPC, subnet ranges, NAT, and firewall rules that are never world-open."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from infra_support import (
    FIREWALL,
    PROJECT,
    REGION,
    custom,
    refused_alone,
    run_alone,
)
from raytpu.components import ExistingNetwork, Network, NetworkArgs
from raytpu.facts.versions import IAP_SOURCE_RANGE
from raytpu.plan.engine import PlanResult

MASTER = "172.16.0.32/28"


def net_args(**kw: Any) -> NetworkArgs:
    base: dict[str, Any] = dict(
        project=PROJECT, region=REGION, node_tag="c-node", tpu_node_tag="c-tpu",
        master_ipv4_cidr_block=MASTER,
    )
    return NetworkArgs(**{**base, **kw})


def plan_network(**kw: Any) -> PlanResult:
    return run_alone(lambda: Network("net", net_args(**kw)))


def rules(plan: PlanResult) -> dict[str, dict[str, Any]]:
    return {r.name.removeprefix("net-allow-"): r.inputs for r in plan.by_type(FIREWALL)}


def assert_rule_safe(inputs: dict[str, Any]) -> None:
    for cidr in inputs.get("sourceRanges") or []:
        assert ipaddress.ip_network(cidr).prefixlen > 0, inputs
    assert inputs.get("targetTags") or inputs.get("targetServiceAccounts"), inputs
    assert inputs["direction"] == "INGRESS"
    assert inputs.get("sourceRanges") or inputs.get("sourceTags"), inputs


def test_creates_vpc_subnet_router_nat_and_rules_as_children() -> None:
    plan = plan_network()
    types = sorted(r.type for r in custom(plan))
    assert types == sorted([
        "gcp:compute/network:Network", "gcp:compute/subnetwork:Subnetwork",
        "gcp:compute/router:Router", "gcp:compute/routerNat:RouterNat", FIREWALL, FIREWALL,
    ])
    assert all(r.parent == "net" for r in custom(plan))
    assert plan.get("raytpu:network:Network", "net").custom is False

    vpc = plan.get("gcp:compute/network:Network", "net").inputs
    assert vpc["autoCreateSubnetworks"] is False
    subnet = plan.get("gcp:compute/subnetwork:Subnetwork", "net-nodes").inputs
    assert subnet["ipCidrRange"] == "10.0.0.0/20"
    assert subnet["privateIpGoogleAccess"] is True
    assert subnet["secondaryIpRanges"] == [
        {"rangeName": "net-pods", "ipCidrRange": "10.16.0.0/14"},
        {"rangeName": "net-services", "ipCidrRange": "10.20.0.0/20"},
    ]
    nat = plan.get("gcp:compute/routerNat:RouterNat", "net-nat").inputs
    assert nat["router"] == "net-router"
    assert nat["sourceSubnetworkIpRangesToNat"] == "LIST_OF_SUBNETWORKS"
    assert nat["subnetworks"][0]["sourceIpRangesToNats"] == ["ALL_IP_RANGES"]
    assert nat["natIpAllocateOption"] == "AUTO_ONLY"


def test_webhook_and_multislice_rules() -> None:
    r = rules(plan_network())
    assert set(r) == {"webhooks", "multislice"}
    assert r["webhooks"]["sourceRanges"] == [MASTER]
    assert r["webhooks"]["targetTags"] == ["c-node"]
    assert r["webhooks"]["allows"] == [{"protocol": "tcp", "ports": ["8443", "9443", "15017"]}]
    assert r["multislice"]["sourceTags"] == ["c-tpu"]
    assert r["multislice"]["targetTags"] == ["c-tpu"]
    assert "sourceRanges" not in r["multislice"]
    assert r["multislice"]["allows"] == [{"protocol": "tcp", "ports": ["8081", "8471"]}]


def test_the_multislice_rule_only_where_a_group_can_span_slices(
        stack_plans: dict[str, PlanResult]) -> None:
    assert "multislice" not in rules(plan_network(multislice=False))

    def names(stack: str) -> set[str]:
        return {r.name.split("-allow-", 1)[1] for r in stack_plans[stack].by_type(FIREWALL)}

    # prod's v5e-16 scales to 6 slices; dev and staging have one slice per group.
    assert "multislice" in names("prod")
    assert "multislice" not in names("dev")
    assert "multislice" not in names("staging")


def test_no_webhook_rule_without_private_control_plane() -> None:
    assert set(rules(plan_network(master_ipv4_cidr_block=None))) == {"multislice"}


@pytest.mark.parametrize("enabled", [False, True])
def test_iap_ssh_rule_only_when_enabled(enabled: bool) -> None:
    r = rules(plan_network(iap_ssh=enabled))
    assert ("iap-ssh" in r) is enabled
    if enabled:
        assert r["iap-ssh"]["sourceRanges"] == [IAP_SOURCE_RANGE]
        assert r["iap-ssh"]["allows"] == [{"protocol": "tcp", "ports": ["22"]}]
        assert r["iap-ssh"]["targetTags"] == ["c-node"]


def test_ray_access_rule_from_allow_list_only() -> None:
    r = rules(plan_network(ray_access_cidrs=("10.128.0.0/24", "192.168.7.0/24")))
    assert r["ray-access"]["sourceRanges"] == ["10.128.0.0/24", "192.168.7.0/24"]
    assert r["ray-access"]["allows"] == [{"protocol": "tcp", "ports": ["8265", "10001"]}]
    assert "ray-access" not in rules(plan_network())


def test_every_rule_is_targeted_and_never_world_open(stack_plans: dict[str, PlanResult]) -> None:
    plans = [*stack_plans.values(),
             plan_network(iap_ssh=True, ray_access_cidrs=("10.128.0.0/24",))]
    seen = 0
    for plan in plans:
        for fw in plan.by_type(FIREWALL):
            assert_rule_safe(fw.inputs)
            seen += 1
    assert seen >= 8


def test_existing_network_gets_only_firewall_rules() -> None:
    existing = ExistingNetwork(network="shared-vpc", subnetwork="gke-subnet",
                               pods_range_name="pods", services_range_name="svcs")
    plan = plan_network(create=False, existing=existing, iap_ssh=True)
    assert {r.type for r in custom(plan)} == {FIREWALL}
    assert {r.inputs["network"] for r in plan.by_type(FIREWALL)} == {"shared-vpc"}
    outputs: dict[str, Any] = {}

    def program() -> None:
        n = Network("net", net_args(create=False, existing=existing))
        outputs.update(pods=n.pods_range_name, services=n.services_range_name)

    run_alone(program)
    assert outputs == {"pods": "pods", "services": "svcs"}


@pytest.mark.parametrize(("kw", "message"), [
    ({"ray_access_cidrs": ("0.0.0.0/0",)}, r"ray_access_cidrs\[0\].*whole internet"),
    ({"ray_access_cidrs": ("10.0.0.0/33",)}, r"ray_access_cidrs\[0\].*not a CIDR"),
    ({"master_ipv4_cidr_block": "0.0.0.0/0"}, r"master_ipv4_cidr_block.*whole internet"),
    ({"master_ipv4_cidr_block": "172.16.0.0/24"}, r"master_ipv4_cidr_block.*/28"),
    ({"create": False}, r"existing: required when create=False"),
    ({"pods_cidr": "10.0.0.0/14"}, r"subnet_cidr: 10\.0\.0\.0/20 overlaps .*pods_cidr"),
    ({"node_tag": "Bad_Tag"}, r"node_tag: 'Bad_Tag'"),
    ({"region": "us-west4-a"}, r"region: 'us-west4-a' is not a GCP region"),
    ({"webhook_ports": (70000,)}, r"webhook_ports: 70000"),
])
def test_bad_args_are_refused(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        net_args(**kw)


def test_bad_component_registers_nothing() -> None:
    (error,) = refused_alone(
        lambda: Network("this-name-is-far-too-long-for-gce-child-names", net_args()))
    assert isinstance(error, ValueError) and "at most 40" in str(error)
