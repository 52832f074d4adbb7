"""Name and address rules of GCP and Kubernetes objects, checked before anything is declared:
one function per rule, used by the stack config and the component Args alike."""

from __future__ import annotations

import ipaddress
import re

# RFC 1035 label: GCE resources, GKE clusters and node pools, Artifact Registry repositories.
DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# RFC 1123 label: Kubernetes namespaces and service accounts may start with a digit.
K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Service account ids: 6-30 characters.
ACCOUNT_ID = re.compile(r"^[a-z]([-a-z0-9]{4,28}[a-z0-9])$")
REGION = re.compile(r"^[a-z]+-[a-z]+\d+$")
ZONE = re.compile(r"^([a-z]+-[a-z]+\d+)-[a-z]$")
LOCATION = re.compile(r"^[a-z]+-[a-z]+\d+(-[a-z])?$")  # a region or a zone

# GKE cluster names: "up to 40 lowercase letters, numbers, and hyphens", starting with a
# letter, not ending with a hyphen (gcloud container clusters create). One check for the
# stack config and GkeClusterArgs.
CLUSTER_NAME_MAX_LEN = 40
# KubeRay 1.7.0 utils/constant.go MaxRayClusterNameLength = 53 (63 less "-serve-svc", its
# longest service suffix), refused by utils/validation.go ValidateRayClusterMetadata.
RAYCLUSTER_NAME_MAX_LEN = 53
# MaxRayJobNameLength = MaxRayClusterNameLength - 6: room for the "-xxxxx" suffix of the
# RayCluster a RayJob creates (a DNS-1035 label, ValidateRayJobMetadata).
RAYJOB_NAME_MAX_LEN = RAYCLUSTER_NAME_MAX_LEN - 6
# KubeRay 1.7.0 utils/util.go PodName: the prefix of a worker pod's generated name,
# "<cluster>-<group>", is cut to 50 characters (63 less "-worker-" and 5 random ones); a cut
# prefix no longer names the group (kuberay #2923 broke TPU_WORKER_HOSTNAMES that way).
POD_NAME_PREFIX_MAX_LEN = 50
# GCP project IDs: 6-30 characters, lowercase letters, digits and hyphens, starting with a
# letter, not ending with a hyphen (Resource Manager "Creating and managing projects").
PROJECT_ID = re.compile(r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$")
# What pins an image reference to one build: every host of a slice (and a RayJob's
# submitter) must run the same bits, which a tag does not promise.
IMAGE_DIGEST = "@sha256:"


def cluster_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a GKE cluster name, or ``None``."""
    if not DNS_LABEL.match(name) or len(name) > CLUSTER_NAME_MAX_LEN:
        return (
            f"{name!r} must be a DNS label (lowercase letters, digits, '-', starting with a "
            f"letter) of at most {CLUSTER_NAME_MAX_LEN} characters"
        )
    return None


# GCE labels (cost allocation): keys start with a lowercase letter; keys and values are at
# most 63 lowercase letters, digits, '_' or '-' (cloud.google.com/compute/docs/labeling-resources).
LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")


def cidr_problem(value: str) -> str | None:
    """Why ``value`` cannot be a source or address range, or ``None``."""
    try:
        net = ipaddress.ip_network(value)
    except ValueError:
        return f"{value!r} is not a CIDR block"
    if net.prefixlen == 0:
        return f"{value!r} opens to the whole internet; name a narrower range"
    return None


def control_plane_cidr_problem(value: str) -> str | None:
    """Why ``value`` cannot be a private GKE control plane's range, or ``None``."""
    problem = cidr_problem(value)
    if problem:
        return problem
    net = ipaddress.ip_network(value)
    if net.prefixlen != 28 or not net.is_private:
        return f"{value!r} must be a private /28 (GKE's private control plane)"
    return None


# The Kubernetes label on Ray worker pods and the Ray node label on their raylets naming the
# slice group (``raytpu:slices[].name``): KubeRay copies a worker group's ``labels`` onto
# both, and Ray's autoscaler gives the group's node type the same labels, so a capacity
# request selecting it scales exactly that group (raytpu.spec.scaling).
SLICE_GROUP_LABEL = "raytpu.io/slice-group"


# -- GKE node pools --------------------------------------------------------------------

NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
"""The label GKE puts on every node naming its node pool (the Ray head and the operators
select the system pool by it; ``raytpu status`` groups nodes by it)."""
SYSTEM_POOL = "system"
"""GKE name of the CPU node pool for kube-system, the operators and the Ray head."""
NODE_POOL_NAME_MAX_LEN = 40
"""GKE's limit on node pool names."""
TPU_POOL_NAME = "{group}-{index}"
"""GKE name of pool ``index`` of a multi-host slice group (one pool per slice). A
single-host group has one pool, named after the group. The one naming rule: the pool
component, ``raytpu status`` and the dashboard's filters all derive from it."""


def tpu_pool_names(group: str, multi_host: bool, slices: int) -> list[str]:
    """GKE node pools of a slice group that may hold ``slices`` slices."""
    if not multi_host:
        return [group]
    return [TPU_POOL_NAME.format(group=group, index=i) for i in range(slices)]


def tpu_pool_regex(group: str, multi_host: bool) -> str:
    """An RE2 pattern that fully matches the group's pool names and no other group's (group
    names are DNS labels: nothing to escape)."""
    return TPU_POOL_NAME.format(group=group, index="[0-9]+") if multi_host else group
