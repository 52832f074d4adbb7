"""The guardrails: CrossGuard rules every stack that uses these components is held to.

One list, :data:`POLICIES`, of ``pulumi_policy`` policies. Two consumers call them exactly as
the policy SDK's analyzer does (``policy.validate(args, report_violation)`` with
``ResourceValidationArgs`` / ``StackValidationArgs`` built from the resource's type token and
its wire-format, camelCase inputs wrapped in the SDK's unknown-value proxy):

* the policy pack in ``policies/`` (``pulumi preview --policy-pack policies``), which a
  platform team publishes for every stack of its organisation, whatever program composes
  the components;
* ``raytpu plan`` (:mod:`raytpu.plan.policies`), on the mocked plan, without a Pulumi CLI.

Security rules are mandatory, reliability rules advisory, cost rules take their thresholds
from config. Props are read through ``Mapping``/``Sequence`` (the SDK hands proxies, not
dicts); a value unknown during preview raises the SDK's ``UnknownValueError``, which the
analyzer reports as "can't run during preview" rather than a violation.

Nothing here builds a ``PolicyPack``: its constructor starts a gRPC server and blocks.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError
from raytpu.facts import catalog
from raytpu.facts.urns import stack_of
from raytpu.facts.versions import IAP_SOURCE_RANGE

PACK_NAME = "raytpu-guardrails"

FIREWALL = "gcp:compute/firewall:Firewall"
CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
BUCKET = "gcp:storage/bucket:Bucket"
SERVICE = "kubernetes:core/v1:Service"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
RAYCLUSTER = "kubernetes:ray.io/v1:RayCluster"
RAYJOB = "kubernetes:ray.io/v1:RayJob"
RAYSERVICE = "kubernetes:ray.io/v1:RayService"

# Annotations that make GKE provision an internal passthrough load balancer.
ILB_ANNOTATIONS = {
    "networking.gke.io/load-balancer-type": "Internal",
    "cloud.google.com/load-balancer-type": "Internal",  # the older spelling GKE still honours
}
RAY_SELECTOR_KEYS = ("ray.io/cluster", "ray.io/node-type", "ray.io/group")
# The Compute Engine default service account (Editor on the project unless an org policy
# stops the grant): <project number>-compute@developer.gserviceaccount.com.
DEFAULT_COMPUTE_SA = re.compile(r"^\d+-compute@developer\.gserviceaccount\.com$")
DATAPLANE_V2 = "ADVANCED_DATAPATH"
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


# -- reading props ----------------------------------------------------------------------


def _get(props: Any, *path: str | int) -> Any:
    """``props[path[0]][path[1]]...``, or None where a step is missing."""
    cur = props
    for key in path:
        if isinstance(key, int):
            if not isinstance(cur, Sequence) or isinstance(cur, str) or key >= len(cur):
                return None
        elif not isinstance(cur, Mapping) or key not in cur:
            return None
        cur = cur[key]
    return cur


def _seq(value: Any) -> list[Any]:
    if isinstance(value, Sequence) and not isinstance(value, str):
        return list(value)
    return []


def _config(args: ResourceValidationArgs | StackValidationArgs,
            schema: PolicyConfigSchema | None) -> dict[str, Any]:
    """The policy's config over the schema's defaults (the CLI fills them in a preview;
    filled here too so a direct call behaves the same)."""
    defaults = {k: v["default"] for k, v in (schema.properties if schema else {}).items()
                if "default" in v}
    return {**defaults, **dict(args.get_config() or {})}


def _pool_max_nodes(props: Any) -> int:
    """Most nodes a node pool can have: per-zone max x zones, a total max, or its size."""
    zones = len(_seq(_get(props, "nodeLocations"))) or 1
    auto = _get(props, "autoscaling")
    if isinstance(auto, Mapping):
        if _get(auto, "totalMaxNodeCount") is not None:
            return int(_get(auto, "totalMaxNodeCount"))
        if _get(auto, "maxNodeCount") is not None:
            return int(_get(auto, "maxNodeCount")) * zones
    count = _get(props, "nodeCount")
    if count is None:
        count = _get(props, "initialNodeCount")
    return int(count or 0) * zones


def tpu_generation(machine_type: str | None) -> tuple[catalog.Generation, int] | None:
    """(generation, chips per VM) of a TPU machine type (``ct5lp-hightpu-4t``), from the
    catalog; None for a non-TPU machine type."""
    for gen in catalog.GENERATIONS.values():
        for chips, name in gen.machine_types.items():
            if name == machine_type:
                return gen, chips
    return None


def _stack_in(urn: str, stacks: Sequence[str]) -> bool:
    return stack_of(urn) in set(stacks)


# -- security (mandatory) ----------------------------------------------------------------


def _world_open(cidr: str) -> bool:
    try:
        return ipaddress.ip_network(cidr, strict=False).prefixlen == 0
    except ValueError:
        return False


def _firewall(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != FIREWALL:
        return
    p = args.props
    if (_get(p, "direction") or "INGRESS") != "INGRESS" or _get(p, "disabled"):
        return
    if not _seq(_get(p, "allows")):
        return  # a deny rule open to the world only narrows access
    ranges = [str(r) for r in _seq(_get(p, "sourceRanges"))]
    open_ = [r for r in ranges if _world_open(r)]
    if open_:
        report(f"firewall rule {_get(p, 'name') or args.name!r} allows ingress from "
               f"{', '.join(open_)}; name the sources (IAP TCP forwarding is "
               f"{IAP_SOURCE_RANGE})", None)
    elif not (ranges or _seq(_get(p, "sourceTags"))
              or _seq(_get(p, "sourceServiceAccounts"))):
        # GCE defaults an ingress rule without any source to 0.0.0.0/0.
        report(f"firewall rule {_get(p, 'name') or args.name!r} has no source ranges, tags "
               "or service accounts, so GCE applies it to 0.0.0.0/0", None)


def _gke_node_pool(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """A pool can undo the cluster's settings for its own nodes."""
    p = args.props
    if _get(p, "networkConfig", "enablePrivateNodes") is False:
        report("networkConfig.enablePrivateNodes: false gives this pool's nodes public IPs",
               None)
    if _get(p, "nodeConfig", "workloadMetadataConfig", "mode") == "GCE_METADATA":
        report("nodeConfig.workloadMetadataConfig.mode GCE_METADATA turns Workload Identity "
               "off on this pool: its pods get the node's service account", None)


def _gke_cluster(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == NODE_POOL:
        _gke_node_pool(args, report)
        return
    if args.resource_type != CLUSTER or _get(args.props, "enableAutopilot"):
        return  # Autopilot manages nodes, identity and shielding itself
    p = args.props
    if _get(p, "privateClusterConfig", "enablePrivateNodes") is not True:
        report("private nodes are off (privateClusterConfig.enablePrivateNodes): every node "
               "gets a public IP", None)
    if not _get(p, "workloadIdentityConfig", "workloadPool"):
        report("Workload Identity is off (workloadIdentityConfig.workloadPool): pods act as "
               "the node's service account", None)
    if _get(p, "enableShieldedNodes") is False:
        report("shielded nodes are off (enableShieldedNodes: false)", None)


def _ray_selector(selector: Any) -> bool:
    return isinstance(selector, Mapping) and any(k in selector for k in RAY_SELECTOR_KEYS)


def _internal(annotations: Any) -> bool:
    return isinstance(annotations, Mapping) and any(
        str(annotations.get(k, "")).lower() == v.lower() for k, v in ILB_ANNOTATIONS.items())


def _ray_specs(args: ResourceValidationArgs) -> Iterator[tuple[str, Any]]:
    """(where, RayCluster spec) of a RayCluster, a RayJob's or a RayService's cluster."""
    spec = _get(args.props, "spec")
    if args.resource_type == RAYCLUSTER:
        yield "spec", spec
    elif args.resource_type == RAYJOB and _get(spec, "rayClusterSpec") is not None:
        yield "spec.rayClusterSpec", _get(spec, "rayClusterSpec")
    elif args.resource_type == RAYSERVICE and _get(spec, "rayClusterConfig") is not None:
        yield "spec.rayClusterConfig", _get(spec, "rayClusterConfig")


def _public_lb(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == SERVICE:
        p = args.props
        if (_get(p, "spec", "type") == "LoadBalancer" and _ray_selector(_get(p, "spec", "selector"))
                and not _internal(_get(p, "metadata", "annotations"))):
            report(f"Service {_get(p, 'metadata', 'name') or args.name!r} is an external "
                   "LoadBalancer in front of Ray pods (anyone who reaches it can run code); "
                   "annotate it networking.gke.io/load-balancer-type: Internal", None)
        return
    for where, spec in _ray_specs(args):
        head = _get(spec, "headGroupSpec")
        if (_get(head, "serviceType") == "LoadBalancer"
                and not _internal(_get(head, "headService", "metadata", "annotations"))):
            report(f"{where}.headGroupSpec.serviceType LoadBalancer makes KubeRay create an "
                   "external load balancer for the Ray head; use ClusterIP or an internal "
                   "headService", None)


def _ray_auth(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for where, spec in _ray_specs(args):
        mode = _get(spec, "authOptions", "mode")
        if mode != "token":
            report(f"{where}.authOptions.mode is {mode or 'unset'!r}: without Ray token "
                   "authentication anyone who reaches the head's dashboard, Job API or GCS "
                   "port runs code on every slice; set mode: token", None)


def _node_service_account(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == NODE_POOL:
        configs = [("nodeConfig", _get(args.props, "nodeConfig"))]
    elif args.resource_type == CLUSTER:
        if _get(args.props, "enableAutopilot"):
            return
        configs = [("nodeConfig", _get(args.props, "nodeConfig"))]
        configs += [(f"nodePools[{i}].nodeConfig", _get(np, "nodeConfig"))
                    for i, np in enumerate(_seq(_get(args.props, "nodePools")))]
        if _get(args.props, "removeDefaultNodePool") and configs[0][1] is None:
            configs = configs[1:]
    else:
        return
    for where, cfg in configs:
        try:
            sa = _get(cfg, "serviceAccount")
        except UnknownValueError:
            continue  # the email of an account created in this update: not the default one
        if not sa or sa == "default" or DEFAULT_COMPUTE_SA.match(str(sa)):
            report(f"{where}.serviceAccount is {sa or 'unset'!r}: the nodes would run as the "
                   "Compute Engine default service account (Editor); give them a "
                   "least-privilege account", None)


def _dataplane_v2(args: StackValidationArgs, report: ReportViolation) -> None:
    policies = [r for r in args.resources if r.resource_type == NETWORK_POLICY]
    if not policies:
        return
    for r in args.resources:
        if r.resource_type == CLUSTER and _get(r.props, "datapathProvider") != DATAPLANE_V2:
            report(f"the stack declares {len(policies)} NetworkPolicy object(s) but cluster "
                   f"{_get(r.props, 'name') or r.name!r} does not enforce them: set "
                   f"datapathProvider {DATAPLANE_V2} (GKE Dataplane V2)", r.urn)


# -- reliability (advisory) -------------------------------------------------------------

PRODUCTION_SCHEMA = PolicyConfigSchema(properties={
    "productionStacks": {
        "type": "array", "items": {"type": "string"}, "default": ["prod", "production"],
        "description": "Stacks whose clusters must keep deletion protection",
    },
})


def _deletion_protection(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != CLUSTER:
        return
    cfg = _config(args, PRODUCTION_SCHEMA)
    if _stack_in(args.urn, cfg["productionStacks"]) and (
            _get(args.props, "deletionProtection") is False):
        report(f"stack {stack_of(args.urn)!r} is production but the cluster has "
               "deletionProtection: false", None)


BUCKET_SCHEMA = PolicyConfigSchema(properties={
    "bucketNamePattern": {
        "type": "string", "default": ".*",
        "description": "Regular expression of the checkpoint buckets' names",
    },
})


def _bucket_versioning(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != BUCKET:
        return
    name = str(_get(args.props, "name") or args.name)
    if not re.fullmatch(_config(args, BUCKET_SCHEMA)["bucketNamePattern"], name):
        return
    if _get(args.props, "versioning", "enabled") is not True:
        report(f"bucket {name!r} keeps no object versions: an overwritten or deleted "
               "checkpoint is gone; set versioning.enabled", None)


def _pod_images(where: str, template: Any) -> Iterator[tuple[str, str]]:
    spec = _get(template, "spec")
    for kind in ("initContainers", "containers"):
        for i, c in enumerate(_seq(_get(spec, kind))):
            yield f"{where}.spec.{kind}[{i}]", str(_get(c, "image") or "")


def _image_digest(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for where, spec in _ray_specs(args):
        images = list(_pod_images(f"{where}.headGroupSpec.template",
                                  _get(spec, "headGroupSpec", "template")))
        for i, w in enumerate(_seq(_get(spec, "workerGroupSpecs"))):
            images += _pod_images(f"{where}.workerGroupSpecs[{i}].template", _get(w, "template"))
        if _get(spec, "autoscalerOptions", "image"):
            images.append((f"{where}.autoscalerOptions", str(_get(spec, "autoscalerOptions",
                                                                    "image"))))
        for at, image in images:
            if not DIGEST.search(image):
                report(f"{at}.image {image!r} is not pinned by digest (@sha256:...): a moved "
                       "tag gives the hosts of one slice different images", None)


def _tpu_placement(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != NODE_POOL:
        return
    p = args.props
    tpu = tpu_generation(_get(p, "nodeConfig", "machineType"))
    if tpu is None:
        return
    gen, _ = tpu
    topology = _get(p, "placementPolicy", "tpuTopology")
    if not topology:
        return  # single-host: GKE rejects a topology there, and any node count is valid
    try:
        chips = catalog.topology_chips(str(topology))
        shape = catalog.slice_shape(gen.accelerator_type(chips), str(topology),
                                    _get(p, "nodeConfig", "machineType"))
    except (ValueError, catalog.CatalogError) as e:
        report(f"placementPolicy.tpuTopology {topology!r} is not a TPU {gen.name} topology "
               f"for {_get(p, 'nodeConfig', 'machineType')}: {e}", None)
        return
    if not shape.multi_host:
        report(f"placementPolicy.tpuTopology {topology!r} fits one {shape.machine_type} VM: "
               "GKE rejects a topology on a single-host pool", None)
        return
    if _get(p, "placementPolicy", "type") != "COMPACT":
        report(f"multi-host TPU pool ({shape.accelerator_type}, {topology}) needs "
               "placementPolicy.type COMPACT", None)
    zones = len(_seq(_get(p, "nodeLocations"))) or 1
    auto = _get(p, "autoscaling")
    if isinstance(auto, Mapping):
        sizes = {"autoscaling.maxNodeCount": _get(auto, "maxNodeCount")}
        if _get(auto, "totalMaxNodeCount") is not None:
            sizes = {"autoscaling.totalMaxNodeCount": _get(auto, "totalMaxNodeCount")}
        # All of a slice's hosts or none: the other bounds may only be 0 or hosts.
        for key in ("initialNodeCount", "autoscaling.minNodeCount"):
            value = _get(p, *key.split("."))
            if value not in (None, 0, shape.hosts):
                sizes[key] = value
    else:
        sizes = {"nodeCount": _get(p, "nodeCount") if _get(p, "nodeCount") is not None
                 else _get(p, "initialNodeCount")}
    for key, value in sizes.items():
        if value is None or int(value) * (1 if "total" in key else zones) != shape.hosts:
            report(f"{key} is {value} (x{zones} zone(s)) but a {shape.accelerator_type} "
                   f"({topology}) slice is {shape.hosts} {shape.machine_type} hosts: a slice "
                   "pool is all its hosts or nothing", None)


# -- cost (config) ----------------------------------------------------------------------

CHIPS_SCHEMA = PolicyConfigSchema(properties={
    "maxChips": {
        "type": "integer", "minimum": 0, "default": 256,
        "description": "Most TPU chips a stack may hold at its autoscaling maximum",
    },
})


def tpu_chips_at_max(props: Any) -> int:
    """TPU chips of a node pool at its autoscaling maximum (0 for a CPU pool)."""
    tpu = tpu_generation(_get(props, "nodeConfig", "machineType"))
    return 0 if tpu is None else tpu[1] * _pool_max_nodes(props)


def _max_chips(args: StackValidationArgs, report: ReportViolation) -> None:
    limit = int(_config(args, CHIPS_SCHEMA)["maxChips"])
    pools = [(r, tpu_chips_at_max(r.props)) for r in args.resources
             if r.resource_type == NODE_POOL]
    total = sum(c for _, c in pools)
    if total > limit:
        detail = ", ".join(f"{_get(r.props, 'name') or r.name} {c}" for r, c in pools if c)
        report(f"the stack's TPU node pools hold {total} chips at their autoscaling maximum "
               f"({detail}); the limit is {limit} (config maxChips)", None)


SPOT_SCHEMA = PolicyConfigSchema(properties={
    "spotStacks": {
        "type": "array", "items": {"type": "string"}, "default": ["dev"],
        "description": "Stacks whose TPU node pools must use Spot VMs",
    },
})


def _spot(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != NODE_POOL or tpu_generation(
            _get(args.props, "nodeConfig", "machineType")) is None:
        return
    if not _stack_in(args.urn, _config(args, SPOT_SCHEMA)["spotStacks"]):
        return
    cfg = _get(args.props, "nodeConfig")
    if not (_get(cfg, "spot") or _get(cfg, "preemptible")):
        report(f"stack {stack_of(args.urn)!r} runs TPU slices on Spot VMs only; set "
               "nodeConfig.spot", None)


LABELS_SCHEMA = PolicyConfigSchema(properties={
    "requiredLabels": {
        "type": "array", "items": {"type": "string"}, "default": ["stack", "slice-group"],
        "description": "GCE labels (nodeConfig.resourceLabels) every TPU node pool carries, "
                       "for the billing export",
    },
})


def _cost_labels(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != NODE_POOL or tpu_generation(
            _get(args.props, "nodeConfig", "machineType")) is None:
        return
    labels = _get(args.props, "nodeConfig", "resourceLabels")
    have = set(labels) if isinstance(labels, Mapping) else set()
    missing = [k for k in _config(args, LABELS_SCHEMA)["requiredLabels"] if k not in have]
    if missing:
        report(f"TPU node pool {_get(args.props, 'name') or args.name!r} has no cost label(s) "
               f"{', '.join(missing)} in nodeConfig.resourceLabels: its chips cannot be "
               "attributed in the billing export", None)


# -- the pack ---------------------------------------------------------------------------

M, A = EnforcementLevel.MANDATORY, EnforcementLevel.ADVISORY

POLICIES: list[ResourceValidationPolicy | StackValidationPolicy] = [
    ResourceValidationPolicy(
        "no-world-open-firewall", "No ingress firewall rule open to 0.0.0.0/0 (IAP's "
        f"{IAP_SOURCE_RANGE} is the way in for SSH).", _firewall, M),
    ResourceValidationPolicy(
        "gke-cluster-hardened", "GKE clusters have private nodes, Workload Identity and "
        "shielded nodes, and no node pool turns private nodes or Workload Identity off.",
        _gke_cluster, M),
    ResourceValidationPolicy(
        "no-public-ray-load-balancer", "No external LoadBalancer Service in front of Ray "
        "pods.", _public_lb, M),
    ResourceValidationPolicy(
        "ray-token-auth", "RayClusters run with Ray token authentication "
        "(spec.authOptions.mode: token).", _ray_auth, M),
    ResourceValidationPolicy(
        "no-default-node-service-account", "GKE nodes do not run as the Compute Engine "
        "default service account.", _node_service_account, M),
    StackValidationPolicy(
        "dataplane-v2-for-network-policies", "A stack that declares NetworkPolicies runs "
        "them on a cluster that enforces them (GKE Dataplane V2).", _dataplane_v2, M),
    ResourceValidationPolicy(
        "production-deletion-protection", "Clusters of production stacks keep deletion "
        "protection.", _deletion_protection, A, PRODUCTION_SCHEMA),
    ResourceValidationPolicy(
        "checkpoint-bucket-versioning", "Checkpoint buckets keep object versions.",
        _bucket_versioning, A, BUCKET_SCHEMA),
    ResourceValidationPolicy(
        "ray-images-by-digest", "Ray pod images are pinned by digest, not a moving tag.",
        _image_digest, A),
    ResourceValidationPolicy(
        "tpu-slice-pool-shape", "Every multi-host TPU pool is COMPACT with a topology and "
        "as many nodes as the slice has hosts.", _tpu_placement, A),
    StackValidationPolicy(
        "max-tpu-chips", "A stack's TPU node pools hold at most maxChips chips at their "
        "autoscaling maximum.", _max_chips, M, CHIPS_SCHEMA),
    ResourceValidationPolicy(
        "spot-tpu-in-dev", "TPU node pools of the stacks named in spotStacks use Spot VMs.",
        _spot, M, SPOT_SCHEMA),
    ResourceValidationPolicy(
        "tpu-pool-cost-labels", "Every TPU node pool carries the cost labels in "
        "requiredLabels.", _cost_labels, A, LABELS_SCHEMA),
]


def policy(name: str) -> ResourceValidationPolicy | StackValidationPolicy:
    for p in POLICIES:
        if p.name == name:
            return p
    raise KeyError(name)
