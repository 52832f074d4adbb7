"""NetworkPolicy of the Ray namespace: valid objects, and what they let through."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
from netpol import External, Pod, allowed
from ray_support import SAMPLES, plan_ray
from raytpu.components.network_policy import OperatorPeer, RayNetworkPoliciesArgs, policy_specs
from raytpu.facts.versions import Ports
from raytpu.plan.engine import PlanResult
from raytpu.plan.objects import objects

GCS, DASHBOARD, CLIENT, METRICS = (Ports.RAY_GCS, Ports.RAY_DASHBOARD, Ports.RAY_CLIENT,
                                   Ports.RAY_METRICS)


def ray_pod(namespace: str, cluster: str, node_type: str) -> Pod:
    """Labels KubeRay 1.7.0 puts on a Ray pod (utils/constant.go, common/pod.go)."""
    return Pod(namespace, {"ray.io/cluster": cluster, "ray.io/node-type": node_type,
                           "ray.io/is-ray-node": "yes", "ray.io/group": "g",
                           "app.kubernetes.io/created-by": "kuberay-operator",
                           "app.kubernetes.io/name": "kuberay"})


OPERATOR = Pod("kuberay-system", {"app.kubernetes.io/name": "kuberay-operator",
                                  "app.kubernetes.io/instance": "kuberay-operator"})
COLLECTOR = Pod("gmp-system", {"app.kubernetes.io/name": "collector",
                               "app": "managed-prometheus-collector"})


def policies(plan: PlanResult) -> list[dict[str, Any]]:
    return [o for o in objects(plan) if o["kind"] == "NetworkPolicy"]


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_policies_are_valid_kubernetes_objects(
    sample: str, sample_plans: dict[str, PlanResult],
) -> None:
    found = policies(sample_plans[sample])
    assert sorted(p["metadata"]["name"] for p in found) == [
        "raytpu-deny-ingress", "raytpu-ray-head", "raytpu-ray-metrics", "raytpu-ray-peers"]
    for obj in found:
        assert obj["metadata"]["namespace"] == "ray"
        kubernetes_validate.validate(obj, "1.33", strict=True)


def test_ray_pods_of_the_cluster_reach_each_other_on_every_port(
    sample_plans: dict[str, PlanResult],
) -> None:
    pols = policies(sample_plans["v4-fixed"])
    head, worker = ray_pod("ray", "raytpu", "head"), ray_pod("ray", "raytpu", "worker")
    for port in (GCS, DASHBOARD, 10002, 19999, 44217):  # GCS, Job API, a worker port, ...
        assert allowed(pols, worker, head, port)
        assert allowed(pols, head, worker, port)
        assert allowed(pols, worker, worker, port)


def test_everything_else_is_denied(sample_plans: dict[str, PlanResult]) -> None:
    pols = policies(sample_plans["v4-fixed"])
    head, worker = ray_pod("ray", "raytpu", "head"), ray_pod("ray", "raytpu", "worker")
    strangers = [
        ray_pod("team-b", "other", "worker"),  # a Ray pod of another namespace
        ray_pod("ray", "other", "head"),  # another RayCluster in the same namespace
        Pod("ray", {"app": "debug"}),  # any other pod of the namespace
        Pod("team-b", {"app.kubernetes.io/name": "kuberay-operator"}),  # a look-alike label
        Pod("default", {}),
        External("10.128.0.5"),
    ]
    for src in strangers:
        for dst, port in ((head, GCS), (head, DASHBOARD), (head, CLIENT), (worker, 10002),
                          (worker, METRICS)):
            assert not allowed(pols, src, dst, port), (src, dst, port)
    # The stack namespace has no RayJobs: a pod claiming to be a submitter gets nothing.
    submitter = Pod("ray", {"ray.io/originated-from-crd": "RayJob"})
    assert not allowed(pols, submitter, head, DASHBOARD)


def test_operator_reaches_the_dashboard_port_only(sample_plans: dict[str, PlanResult]) -> None:
    pols = policies(sample_plans["v4-fixed"])
    head = ray_pod("ray", "raytpu", "head")
    assert allowed(pols, OPERATOR, head, DASHBOARD)
    assert not allowed(pols, OPERATOR, head, GCS)
    assert not allowed(pols, OPERATOR, ray_pod("ray", "raytpu", "worker"), DASHBOARD)


def test_gke_addon_operator_calls_from_the_control_plane_range(
    sample_plans: dict[str, PlanResult],
) -> None:
    pols = policies(sample_plans["v5p-addon"])
    head = ray_pod("ray", "raytpu", "head")
    master = SAMPLES["v5p-addon"].get("raytpu:cluster", {}).get("masterIpv4CidrBlock",
                                                                 "172.16.0.32/28")
    inside = master.split("/")[0].rsplit(".", 1)[0] + ".33"
    assert allowed(pols, External(inside), head, DASHBOARD)
    assert not allowed(pols, External(inside), head, GCS)
    assert not allowed(pols, OPERATOR, head, DASHBOARD)  # no Helm operator in add-on mode


def test_managed_prometheus_scrapes_the_metrics_port(sample_plans: dict[str, PlanResult]) -> None:
    pols = policies(sample_plans["v4-fixed"])
    for node_type in ("head", "worker"):
        pod = ray_pod("ray", "raytpu", node_type)
        assert allowed(pols, COLLECTOR, pod, METRICS)
        assert not allowed(pols, COLLECTOR, pod, GCS)
    assert not allowed(pols, Pod("team-b", {"app.kubernetes.io/name": "collector"}),
                       ray_pod("ray", "raytpu", "worker"), METRICS)


def test_dashboard_and_client_only_from_ray_access_cidrs(
    sample_plans: dict[str, PlanResult],
) -> None:
    pols = policies(sample_plans["v6e-ilb"])  # rayAccessCidrs 10.128.0.0/16, 192.168.10.0/24
    head = ray_pod("ray", "trillium", "head")
    for ip in ("10.128.3.4", "192.168.10.200"):
        assert allowed(pols, External(ip), head, DASHBOARD)
        assert allowed(pols, External(ip), head, CLIENT)
        assert not allowed(pols, External(ip), head, GCS)
        assert not allowed(pols, External(ip), ray_pod("ray", "trillium", "worker"), CLIENT)
    for ip in ("10.129.0.1", "192.168.11.1", "8.8.8.8"):
        assert not allowed(pols, External(ip), head, DASHBOARD)
    # Without rayAccessCidrs nothing outside the cluster reaches the head.
    assert not allowed(policies(plan_ray(SAMPLES["v4-fixed"])), External("10.128.3.4"),
                       ray_pod("ray", "raytpu", "head"), DASHBOARD)


def test_internal_load_balancer_keeps_client_addresses(
    sample_plans: dict[str, PlanResult],
) -> None:
    (svc,) = [o for o in objects(sample_plans["v6e-ilb"]) if o["kind"] == "Service"]
    # With Cluster the node SNATs and the rayAccessCidrs ipBlock could never match.
    assert svc["spec"]["externalTrafficPolicy"] == "Local"


def test_namespace_scope_and_rayjob_submitters() -> None:
    """Team namespaces: RayJob clusters have generated names, so every Ray pod of the
    namespace is a peer, and the submitter reaches the dashboard."""
    specs = policy_specs(RayNetworkPoliciesArgs(namespace="team-a",
                                              operator=OperatorPeer(namespace="kuberay-system"),
                                              rayjob_submitters=True))
    pols = [{"metadata": {"namespace": "team-a", "name": n}, "spec": s}
            for n, s in specs.items()]
    head_a = ray_pod("team-a", "job-1-abcde", "head")
    assert allowed(pols, ray_pod("team-a", "job-1-abcde", "worker"), head_a, GCS)
    assert allowed(pols, Pod("team-a", {"ray.io/originated-from-crd": "RayJob",
                                        "ray.io/originated-from-cr-name": "job-1"}),
                   head_a, DASHBOARD)
    assert not allowed(pols, Pod("team-a", {"ray.io/originated-from-crd": "RayJob"}),
                       head_a, GCS)
    assert not allowed(pols, Pod("team-b", {"ray.io/originated-from-crd": "RayJob"}),
                       head_a, DASHBOARD)
    assert not allowed(pols, ray_pod("team-b", "job-9", "worker"), head_a, GCS)


def test_webhook_namespace_keeps_the_webhook_reachable() -> None:
    raw = {**SAMPLES["v4-fixed"], "raytpu:ray": {"namespace": "ray-system"}}
    pols = policies(plan_ray(raw))
    webhook = Pod("ray-system", {"app": "kuberay-tpu-webhook"})
    assert allowed(pols, External("172.16.0.34"), webhook, 443)  # API server -> webhook
    assert not allowed(pols, External("172.16.0.34"), ray_pod("ray-system", "raytpu", "head"),
                       GCS)


def test_evaluator_follows_kubernetes_semantics() -> None:
    """The evaluator itself: pinned against the cases of the Kubernetes docs."""
    deny = {"metadata": {"namespace": "a"}, "spec": {"podSelector": {},
                                                     "policyTypes": ["Ingress"]}}
    dst = Pod("a", {"x": "1"})
    assert allowed([], Pod("b"), dst, 80)  # not selected: open
    assert not allowed([deny], Pod("a"), dst, 80)
    same_ns = {"metadata": {"namespace": "a"}, "spec": {
        "podSelector": {"matchLabels": {"x": "1"}},
        "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "c"}}}],
                     "ports": [{"protocol": "TCP", "port": 80}]}]}}
    assert allowed([deny, same_ns], Pod("a", {"role": "c"}), dst, 80)
    assert not allowed([deny, same_ns], Pod("b", {"role": "c"}), dst, 80)  # other namespace
    assert not allowed([deny, same_ns], Pod("a", {"role": "c"}), dst, 81)
    and_peer = {"metadata": {"namespace": "a"}, "spec": {"podSelector": {}, "ingress": [{
        "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "m"}},
                  "podSelector": {"matchLabels": {"role": "p"}}}]}]}}
    assert allowed([and_peer], Pod("m", {"role": "p"}), dst, 9)
    assert not allowed([and_peer], Pod("m", {}), dst, 9)
    assert not allowed([and_peer], Pod("n", {"role": "p"}), dst, 9)
