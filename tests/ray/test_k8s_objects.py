"""The thin Kubernetes kinds must be declared exactly as pulumi_kubernetes declares them,
and the typed pod templates must reach the wire as written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
from ray_support import SAMPLES
from raytpu.components import k8s_objects as thin
from raytpu.plan.engine import PlannedResource, run_program

META: thin.ObjectMeta = {
    "name": "x", "namespace": "ray", "labels": {"a": "b"}, "annotations": {"k": "v"},
}
META_ARGS = k8s.meta.v1.ObjectMetaArgs(name="x", namespace="ray", labels={"a": "b"},
                                       annotations={"k": "v"})

Case = tuple[Callable[[str], pulumi.CustomResource], Callable[[str], thin.KubeObject]]
CASES: dict[str, Case] = {
    "namespace": (
        lambda n: k8s.core.v1.Namespace(n, metadata=k8s.meta.v1.ObjectMetaArgs(name="ray")),
        lambda n: thin.Namespace(n, metadata={"name": "ray"}),
    ),
    "service-account": (
        lambda n: k8s.core.v1.ServiceAccount(n, metadata=META_ARGS),
        lambda n: thin.ServiceAccount(n, metadata=META),
    ),
    "service": (
        lambda n: k8s.core.v1.Service(n, metadata=META_ARGS, spec=k8s.core.v1.ServiceSpecArgs(
            type="LoadBalancer", load_balancer_source_ranges=["10.0.0.0/8"],
            selector={"ray.io/node-type": "head"},
            ports=[k8s.core.v1.ServicePortArgs(name="dashboard", port=8265, target_port=8265)])),
        lambda n: thin.Service(n, metadata=META, spec={
            "type": "LoadBalancer", "loadBalancerSourceRanges": ["10.0.0.0/8"],
            "selector": {"ray.io/node-type": "head"},
            "ports": [{"name": "dashboard", "port": 8265, "targetPort": 8265}]}),
    ),
    "config-map": (
        lambda n: k8s.core.v1.ConfigMap(n, metadata=META_ARGS, data={"ca.crt": "PEM"}),
        lambda n: thin.ConfigMap(n, metadata=META, fields={"data": {"ca.crt": "PEM"}}),
    ),
    "secret": (
        lambda n: k8s.core.v1.Secret(n, metadata=META_ARGS, string_data={"password": "p"}),
        lambda n: thin.Secret(n, metadata=META, fields={"stringData": {"password": "p"}}),
    ),
    "job": (
        lambda n: k8s.batch.v1.Job(n, metadata=META_ARGS, spec=k8s.batch.v1.JobSpecArgs(
            backoff_limit=0, template=k8s.core.v1.PodTemplateSpecArgs(
                spec=k8s.core.v1.PodSpecArgs(restart_policy="Never", containers=[
                    k8s.core.v1.ContainerArgs(name="c", image="i", command=["true"])])))),
        lambda n: thin.Job(n, metadata=META, spec={
            "backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "i", "command": ["true"]}]}}}),
    ),
    "cluster-role": (
        lambda n: k8s.rbac.v1.ClusterRole(n, metadata=k8s.meta.v1.ObjectMetaArgs(name="r"),
                                          rules=[k8s.rbac.v1.PolicyRuleArgs(
                                              api_groups=["apiextensions.k8s.io"],
                                              resources=["customresourcedefinitions"],
                                              verbs=["get"])]),
        lambda n: thin.ClusterRole(n, metadata={"name": "r"}, fields={"rules": [
            {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
             "verbs": ["get"]}]}),
    ),
    "cluster-role-binding": (
        lambda n: k8s.rbac.v1.ClusterRoleBinding(
            n, metadata=k8s.meta.v1.ObjectMetaArgs(name="b"),
            role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io",
                                             kind="ClusterRole", name="r"),
            subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name="s",
                                              namespace="default")]),
        lambda n: thin.ClusterRoleBinding(n, metadata={"name": "b"}, fields={
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "s", "namespace": "default"}]}),
    ),
    "network-policy": (
        lambda n: k8s.networking.v1.NetworkPolicy(
            n, metadata=META_ARGS, spec=k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"a": "b"}),
                policy_types=["Ingress"],
                ingress=[k8s.networking.v1.NetworkPolicyIngressRuleArgs(
                    from_=[k8s.networking.v1.NetworkPolicyPeerArgs(
                        ip_block=k8s.networking.v1.IPBlockArgs(cidr="10.0.0.0/8"))],
                    ports=[k8s.networking.v1.NetworkPolicyPortArgs(protocol="TCP",
                                                                   port=8265)])])),
        lambda n: thin.NetworkPolicy(n, metadata=META, spec={
            "podSelector": {"matchLabels": {"a": "b"}}, "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}}],
                         "ports": [{"protocol": "TCP", "port": 8265}]}]}),
    ),
    "role": (
        lambda n: k8s.rbac.v1.Role(n, metadata=META_ARGS, rules=[k8s.rbac.v1.PolicyRuleArgs(
            api_groups=["ray.io"], resources=["rayjobs"], verbs=["get"])]),
        lambda n: thin.Role(n, metadata=META, fields={"rules": [
            {"apiGroups": ["ray.io"], "resources": ["rayjobs"], "verbs": ["get"]}]}),
    ),
    "role-binding": (
        lambda n: k8s.rbac.v1.RoleBinding(
            n, metadata=META_ARGS,
            role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io",
                                             kind="Role", name="r"),
            subjects=[k8s.rbac.v1.SubjectArgs(kind="Group", name="g@example.com",
                                              api_group="rbac.authorization.k8s.io")]),
        lambda n: thin.RoleBinding(n, metadata=META, fields={
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
            "subjects": [{"kind": "Group", "name": "g@example.com",
                          "apiGroup": "rbac.authorization.k8s.io"}]}),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_kind_is_declared_as_pulumi_kubernetes_declares_it(case: str) -> None:
    generated, binding = CASES[case]
    made: dict[str, Any] = {}

    def program() -> None:
        made["real"] = generated("real")
        made["thin"] = binding("thin")

    plan = run_program("dev", dict(SAMPLES["v4-fixed"]), program)
    by_name: dict[str, PlannedResource] = {r.name: r for r in plan.resources}
    real, mine = by_name["real"], by_name["thin"]
    assert mine.type == real.type
    assert mine.inputs == real.inputs
    assert mine.options == real.options
    assert mine.provider_version == real.provider_version != ""


def test_metadata_name_resolves_from_the_api_object() -> None:
    names: list[str] = []

    def program() -> None:
        ns = thin.Namespace("ns", metadata={"name": "ray", "labels": {"a": "b"}})
        ns.metadata_name.apply(names.append)

    run_program("dev", dict(SAMPLES["v4-fixed"]), program)
    assert names == ["ray"]


def test_unset_fields_never_reach_the_wire() -> None:
    def program() -> None:
        thin.Service("svc", metadata={"name": "s"},
                     spec={"type": "ClusterIP", "selector": None})

    plan = run_program("dev", dict(SAMPLES["v4-fixed"]), program)
    (svc,) = plan.resources
    assert svc.inputs["spec"] == {"type": "ClusterIP"}
