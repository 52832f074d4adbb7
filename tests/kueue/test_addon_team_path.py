"""Prod's team path in GKE add-on mode (fidelity-findings.md "Second review", M-1, L-4,
L-6): what the hosted operator needs to reach, what each team namespace scrapes, what the
warnings must say."""

from __future__ import annotations

from typing import Any

import pytest
from kueue_support import REPO
from raytpu.plan.engine import PlanResult, run_plan
from raytpu.plan.objects import objects

STACKS = REPO / "stacks"
DASHBOARD = 8265


@pytest.fixture(scope="module")
def prod() -> PlanResult:
    return run_plan("prod", STACKS)


def _policies(plan: PlanResult, namespace: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects(plan)
            if o["kind"] == "NetworkPolicy" and o["metadata"]["namespace"] == namespace}


@pytest.mark.parametrize("namespace", ["vision", "speech", "ray"])
def test_head_dashboard_admits_the_control_plane_and_its_tunnel(
        prod: PlanResult, namespace: str) -> None:
    # M-1: KubeRay (hosted by GKE in add-on mode) polls the head's dashboard for RayJob
    # status; no source says whether that comes from the control-plane range or through the
    # konnectivity agents, so both are admitted on 8265.
    head = _policies(prod, namespace)["raytpu-ray-head"]
    peers = [p for rule in head["spec"]["ingress"]
             if {"protocol": "TCP", "port": DASHBOARD} in rule.get("ports", [])
             for p in rule.get("from", [])]
    assert {"ipBlock": {"cidr": "172.16.0.64/28"}} in peers
    assert {"namespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "konnectivity-agent"}}} in peers


def test_addon_warnings_name_what_is_unverified_and_the_live_checks(prod: PlanResult) -> None:
    text = "\n".join(prod.warnings)
    # M-1: the operator's source is unverified; the live check is named.
    assert "GKE does not document where its hosted operator connects from" in text
    assert "hubble observe --to-port 8265 --verdict DROPPED" in text
    # L-6: Pod Security depends on the add-on's KubeRay version.
    assert "Pod Security 'restricted'" in text and "violates PodSecurity" in text
    # An add-on KubeRay older than 1.3.0 prunes gcsFaultToleranceOptions (prod asks for it).
    assert ("raytpu:ray.gcsFaultTolerance needs the add-on's RayCluster CRD to have "
            "gcsFaultToleranceOptions (KubeRay >= 1.3.0); an older one prunes the field") in text
    assert "RAY_REDIS_ADDRESS and ray.io/ft-enabled=true" in text


def test_helm_mode_has_no_addon_warnings() -> None:
    staging = run_plan("staging", STACKS)
    assert staging.config.kuberay.mode == "helm"
    assert not [w for w in staging.warnings if "hosted operator" in w or "PodSecurity" in w]


@pytest.mark.parametrize("team", ["vision", "speech"])
def test_each_team_namespace_is_scraped(prod: PlanResult, team: str) -> None:
    # L-4: team RayJob clusters have generated names: the PodMonitoring selects every Ray
    # pod of the namespace, on the port its NetworkPolicy opens to the GMP collectors.
    (pm,) = [o for o in objects(prod) if o["kind"] == "PodMonitoring"
             and o["metadata"]["namespace"] == team]
    assert pm["spec"]["selector"]["matchLabels"] == {"ray.io/is-ray-node": "yes"}
    (endpoint,) = pm["spec"]["endpoints"]
    metrics = _policies(prod, team)["raytpu-ray-metrics"]
    ports = {p["port"] for rule in metrics["spec"]["ingress"] for p in rule.get("ports", [])}
    assert endpoint["port"] == "metrics" and 8080 in ports

