"""A NetworkPolicy evaluator for tests: may a connection reach a pod, given the policies?

Follows the Kubernetes semantics (kubernetes.io/docs/concepts/services-networking/
network-policies): a pod selected by no Ingress policy accepts everything; a selected pod
accepts a connection if any rule of any selecting policy allows it; a rule with no ``from``
allows every source, with no ``ports`` every port; a peer with only ``podSelector`` means
pods of the policy's own namespace; ``namespaceSelector`` + ``podSelector`` in one peer
are ANDed; ``ipBlock`` matches source IPs (sources outside the cluster here).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class External:
    """A source outside the pod network (a load balancer client, the control plane)."""

    ip: str


Source = Pod | External


def _matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    unknown = set(selector) - {"matchLabels"}
    assert not unknown, f"evaluator does not model {unknown}"
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def _peer_allows(peer: Mapping[str, Any], policy_ns: str, src: Source) -> bool:
    if "ipBlock" in peer:
        block = peer["ipBlock"]
        assert set(block) == {"cidr"}, "evaluator does not model ipBlock.except"
        return isinstance(src, External) and (
            ipaddress.ip_address(src.ip) in ipaddress.ip_network(block["cidr"]))
    if not isinstance(src, Pod):
        return False
    if "namespaceSelector" in peer:
        ns_ok = _matches(peer["namespaceSelector"],
                         {"kubernetes.io/metadata.name": src.namespace})
    else:
        ns_ok = src.namespace == policy_ns
    return ns_ok and _matches(peer.get("podSelector") or {}, src.labels)


def _rule_allows(rule: Mapping[str, Any], policy_ns: str, src: Source, port: int) -> bool:
    ports = rule.get("ports")
    if ports and not any(p.get("port") == port and p.get("protocol", "TCP") == "TCP"
                         for p in ports):
        return False
    peers = rule.get("from")
    return not peers or any(_peer_allows(p, policy_ns, src) for p in peers)


def allowed(policies: Iterable[Mapping[str, Any]], src: Source, dst: Pod, port: int) -> bool:
    """May ``src`` open a TCP connection to ``dst`` on ``port``? ``policies``: NetworkPolicy
    objects (``metadata.namespace``, ``spec``)."""
    selecting = [
        p for p in policies
        if p["metadata"]["namespace"] == dst.namespace
        and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
        and _matches(p["spec"]["podSelector"], dst.labels)
    ]
    if not selecting:
        return True
    return any(_rule_allows(rule, p["metadata"]["namespace"], src, port)
               for p in selecting for rule in p["spec"].get("ingress") or [])
