"""NetworkPolicy for a namespace that runs Ray pods: ingress denied unless listed here.

What each rule is for (ports: ``raytpu.facts.versions.Ports``; labels: KubeRay 1.7.0
``ray-operator/controllers/ray/utils/constant.go``):

* **Ray pods reach each other on every port.** GCS, raylets, object managers, workers and
  the dashboard agent use random ports (Ray ``configure.rst``), so a port list would break.
  Scope: one RayCluster (``ray.io/cluster``) when its name is known (the stack's own
  cluster), else every Ray pod of the namespace (``ray.io/is-ray-node: yes``): a team's
  RayJobs create RayClusters with generated names, and NetworkPolicy cannot match "the same
  label value". Another namespace (another team) is never a peer.
* **The KubeRay operator reaches the head's dashboard port** (RayJob status and the Job API
  go there). Helm mode: pods ``app.kubernetes.io/name: kuberay-operator`` in the operator's
  namespace, never that label alone (any team could put it on a pod). GKE add-on mode: GKE
  hosts the operator, so its calls come from the control plane's range.
* **RayJob submitter pods** (K8sJobMode; KubeRay labels them ``ray.io/originated-from-crd:
  RayJob``) reach the head's dashboard port, in their own namespace only.
* **Managed Prometheus** (GMP) collectors, pods ``app.kubernetes.io/name: collector`` in
  ``gmp-system`` (prometheus-engine ``manifests/operator.yaml``; not host-network), scrape
  Ray's metrics port.
* **The dashboard and Ray client** are reachable from ``raytpu:network.rayAccessCidrs``
  only (the internal load balancer keeps client IPs: ``externalTrafficPolicy: Local``).

Always allowed without a rule: traffic from the pod's own node (kubelet probes, node-local
host-network agents such as the TPU device plugin reading TPU metrics): "traffic to and from
the node where a Pod is running is always allowed" (Kubernetes NetworkPolicy docs), and
``kubectl port-forward`` (it enters the pod's network namespace through the kubelet).
Egress is not restricted: Ray pods call Cloud Storage, the GKE metadata server (Workload
Identity), the API server (the autoscaler) and package indexes; DNS therefore keeps working.

GKE enforces NetworkPolicy only with Dataplane V2 (or the Calico add-on); elsewhere these
objects are accepted and silently ignored.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

import pulumi
from raytpu.components._options import depends_on_of
from raytpu.components.k8s_objects import NetworkPolicy
from raytpu.facts.versions import Ports

RAY_CLUSTER_LABEL = "ray.io/cluster"
RAY_NODE_LABEL = "ray.io/is-ray-node"  # "yes" on every head and worker pod
NODE_TYPE_LABEL = "ray.io/node-type"
ORIGIN_CRD_LABEL = "ray.io/originated-from-crd"  # "RayJob" on K8sJobMode submitter pods
NAMESPACE_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace
OPERATOR_POD_LABELS: Mapping[str, str] = {"app.kubernetes.io/name": "kuberay-operator"}
GMP_NAMESPACE = "gmp-system"
GMP_COLLECTOR_LABELS: Mapping[str, str] = {"app.kubernetes.io/name": "collector"}


class LabelSelector(TypedDict, total=False):
    matchLabels: Mapping[str, str]


class IPBlock(TypedDict):
    cidr: str


class PolicyPeer(TypedDict, total=False):
    podSelector: LabelSelector
    namespaceSelector: LabelSelector
    ipBlock: IPBlock


class PolicyPort(TypedDict):
    protocol: str
    port: int


class IngressRule(TypedDict, total=False):
    """``from`` is a Python keyword: build these with :func:`ingress`."""

    ports: Sequence[PolicyPort]


class NetworkPolicySpec(TypedDict, total=False):
    podSelector: LabelSelector
    policyTypes: Sequence[str]
    ingress: Sequence[IngressRule]


def ingress(peers: Sequence[PolicyPeer], ports: Sequence[int] = ()) -> IngressRule:
    """One ingress rule: any of ``peers`` (all of them: empty), on ``ports`` (all: empty)."""
    rule: dict[str, object] = {}
    if peers:
        rule["from"] = list(peers)
    if ports:
        rule["ports"] = [{"protocol": "TCP", "port": p} for p in ports]
    return rule  # type: ignore[return-value]  # "from" cannot be a TypedDict key


# GKE's control-plane-to-node tunnel: traffic the control plane sends to pods arrives from
# these agent pods in kube-system, not from the control plane's range.
KONNECTIVITY_AGENT: PolicyPeer = {
    "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: "kube-system"}},
    "podSelector": {"matchLabels": {"k8s-app": "konnectivity-agent"}},
}


@dataclass(frozen=True)
class OperatorPeer:
    """Where the KubeRay operator's calls to Ray heads come from: pods of ``namespace``
    (Helm install) or, for the GKE-hosted add-on, the control plane's ``cidr`` and (unless
    ``konnectivity`` is off) the konnectivity agents that tunnel control-plane traffic to
    pods. No source says which of the two GKE's hosted operator uses (it polls every running
    RayJob's head dashboard, KubeRay v1.7.0 rayjob_controller.go GetJobInfo), so both are
    admitted; the README names the live check."""

    namespace: str | None = None
    """The operator's namespace (Helm install): its ``kuberay-operator`` pods."""
    cidr: str | None = None
    """The source range of a GKE-hosted operator (the control plane's)."""
    konnectivity: bool = True
    """With ``cidr``: also admit kube-system's ``k8s-app: konnectivity-agent`` pods."""

    def __post_init__(self) -> None:
        if (self.namespace is None) == (self.cidr is None):
            raise ValueError("OperatorPeer: give exactly one of namespace or cidr")

    def peers(self) -> list[PolicyPeer]:
        if self.cidr is not None:
            return [{"ipBlock": {"cidr": self.cidr}},
                    *([KONNECTIVITY_AGENT] if self.konnectivity else [])]
        assert self.namespace is not None
        return [{"namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: self.namespace}},
                 "podSelector": {"matchLabels": dict(OPERATOR_POD_LABELS)}}]


@dataclass(frozen=True)
class RayNetworkPoliciesArgs:
    """Inputs of :class:`RayNetworkPolicies`: one namespace and who may reach its Ray pods."""

    namespace: pulumi.Input[str]
    """The namespace that runs the Ray pods (it must exist: pass its creator in dependsOn)."""
    operator: OperatorPeer
    """Where the KubeRay operator calls the heads from."""
    ray_cluster: str | None = None
    """The RayCluster whose pods are peers; None: every Ray pod of the namespace."""
    access_cidrs: Sequence[str] = ()
    """Source ranges allowed to the head's dashboard and Ray client ports."""
    rayjob_submitters: bool = False
    """Allow RayJob submitter pods (K8sJobMode) of the namespace to the dashboard port."""
    deny_all_pods: bool = True
    """Deny ingress to every pod of the namespace; False: to Ray pods only (a namespace
    shared with other components, e.g. the TPU webhook's)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Extra labels of the NetworkPolicy objects."""

    def __post_init__(self) -> None:
        for i, cidr in enumerate(self.access_cidrs):
            try:
                ipaddress.ip_network(cidr)
            except ValueError:
                raise ValueError(f"access_cidrs[{i}]: {cidr!r} is not a CIDR block") from None


def policy_specs(args: RayNetworkPoliciesArgs) -> dict[str, NetworkPolicySpec]:
    """The namespace's policies by name: plain data, what :class:`RayNetworkPolicies`
    declares."""
    ray_pods: dict[str, str] = ({RAY_CLUSTER_LABEL: args.ray_cluster} if args.ray_cluster
                                else {RAY_NODE_LABEL: "yes"})
    heads = {**ray_pods, NODE_TYPE_LABEL: "head"}
    dashboard = Ports.RAY_DASHBOARD
    head_rules = [ingress(args.operator.peers(), [dashboard])]
    if args.rayjob_submitters:
        head_rules.append(ingress([{"podSelector": {"matchLabels": {ORIGIN_CRD_LABEL: "RayJob"}}}],
                                  [dashboard]))
    if args.access_cidrs:
        head_rules.append(ingress([{"ipBlock": {"cidr": c}} for c in args.access_cidrs],
                                  [dashboard, Ports.RAY_CLIENT]))
    return {
        "raytpu-deny-ingress": {
            "podSelector": {} if args.deny_all_pods else {"matchLabels": {RAY_NODE_LABEL: "yes"}},
            "policyTypes": ["Ingress"],
        },
        "raytpu-ray-peers": {
            "podSelector": {"matchLabels": ray_pods},
            "policyTypes": ["Ingress"],
            "ingress": [ingress([{"podSelector": {"matchLabels": ray_pods}}])],
        },
        "raytpu-ray-head": {
            "podSelector": {"matchLabels": heads},
            "policyTypes": ["Ingress"],
            "ingress": head_rules,
        },
        "raytpu-ray-metrics": {
            "podSelector": {"matchLabels": ray_pods},
            "policyTypes": ["Ingress"],
            "ingress": [ingress([{
                "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: GMP_NAMESPACE}},
                "podSelector": {"matchLabels": dict(GMP_COLLECTOR_LABELS)},
            }], [Ports.RAY_METRICS])],
        },
    }


class RayNetworkPolicies(pulumi.ComponentResource):
    """The NetworkPolicies of one namespace that runs Ray pods (see the module docstring)."""

    policies: dict[str, NetworkPolicy]

    def __init__(self, name: str, args: RayNetworkPoliciesArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("raytpu:network_policy:RayNetworkPolicies", name, None, opts)
        # Children do not inherit a component's dependsOn (the namespace): pass it down.
        child = pulumi.ResourceOptions(parent=self, depends_on=depends_on_of(opts))
        labels = {"app.kubernetes.io/part-of": "raytpu", **args.labels}
        self.policies = {
            policy: NetworkPolicy(
                f"{name}-{policy.removeprefix('raytpu-')}",
                metadata={"name": policy, "namespace": args.namespace, "labels": labels},
                spec=spec, opts=child)
            for policy, spec in policy_specs(args).items()
        }
        self.register_outputs({"policies": sorted(self.policies)})
