"""Which input changes make the provider replace a resource (delete and create) instead of
updating it in place: the facts ``raytpu plan --diff`` calls a change a *replace* by.

Read from the providers' sources, not guessed. ``gcp`` resources: the ``ForceNew`` fields
of terraform-provider-google's schemas, which pulumi-gcp bridges (for example
``google/services/container/resource_container_node_pool.go``: ``placement_policy``,
``initial_node_count``, ``name``, ``cluster``, ``location`` are ForceNew; ``node_config``'s
``spot``, ``service_account``, ``oauth_scopes``, ``reservation_affinity``, ``metadata``
are ForceNew in ``node_config.go``, while its ``machine_type`` is updated in place, GKE
recreating the nodes). Paths are the Pulumi input names; a rule covers the paths under it.
Kubernetes objects: a new name or namespace is a new object; a Job's pod template and
selector are immutable in the API, so pulumi-kubernetes replaces the Job.
"""

from __future__ import annotations

from collections.abc import Iterable

from raytpu.facts.catalog import GENERATIONS

# terraform-provider-google node_config.go: ForceNew fields of a node pool's (and the
# cluster's default pool's) node_config.
_NODE_CONFIG = tuple(f"nodeConfig.{f}" for f in (
    "spot", "serviceAccount", "oauthScopes", "reservationAffinity", "metadata",
    "minCpuPlatform", "guestAccelerators"))

REPLACE_ON: dict[str, tuple[str, ...]] = {
    "gcp:container/cluster:Cluster": (
        "name", "location", "project", "network", "subnetwork", "ipAllocationPolicy",
        "networkingMode", "datapathProvider", "initialNodeCount", "defaultMaxPodsPerNode",
        "enableTpu", "enableAutopilot", "clusterIpv4Cidr", "description",
        "enableKubernetesAlpha", "confidentialNodes",
        "privateClusterConfig.masterIpv4CidrBlock",
        "privateClusterConfig.privateEndpointSubnetwork", *_NODE_CONFIG),
    "gcp:container/nodePool:NodePool": (
        "name", "namePrefix", "location", "cluster", "project", "placementPolicy",
        "queuedProvisioning", "maxPodsPerNode", "initialNodeCount", *_NODE_CONFIG),
    "gcp:storage/bucket:Bucket": ("name", "location", "project", "hierarchicalNamespace"),
    "gcp:serviceaccount/account:Account": ("accountId", "project"),
    "gcp:compute/network:Network": ("name", "project", "autoCreateSubnetworks", "description"),
    "gcp:compute/subnetwork:Subnetwork": ("name", "project", "region", "network", "description"),
    "gcp:compute/router:Router": ("name", "project", "region", "network"),
    "gcp:compute/firewall:Firewall": ("name", "project", "direction"),
    "gcp:artifactregistry/repository:Repository": (
        "repositoryId", "location", "format", "mode", "kmsKeyName", "project"),
    "kubernetes:batch/v1:Job": ("spec.template", "spec.selector"),
}
KUBERNETES_REPLACE_ON = ("metadata.name", "metadata.namespace")

CLUSTER_TYPE = "gcp:container/cluster:Cluster"
NODE_POOL_TYPE = "gcp:container/nodePool:NodePool"
TPU_MACHINE_TYPES = frozenset(m for g in GENERATIONS.values() for m in g.machine_types.values())


def _covers(rule: str, path: str) -> bool:
    return path == rule or path.startswith((f"{rule}.", f"{rule}[", f"{rule}:"))


def forcing_paths(type_: str, changed: Iterable[str],
                  replace_on_changes: Iterable[str] = ()) -> list[str]:
    """The changed input paths that force ``type_`` to be replaced (``replace_on_changes``:
    the resource's own ``replaceOnChanges`` option; ``*`` is every input)."""
    rules = [*REPLACE_ON.get(type_, ()), *replace_on_changes]
    if type_.startswith("kubernetes:") and not type_.startswith("kubernetes:helm.sh/"):
        rules += KUBERNETES_REPLACE_ON
    return [p for p in changed if "*" in rules or any(_covers(r, p) for r in rules)]
