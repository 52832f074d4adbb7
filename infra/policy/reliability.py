"""The reliability rules (advisory): deletion protection in production, versioned checkpoint
buckets, images by digest, TPU pools shaped as whole slices."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import PolicyConfigSchema, ReportViolation, ResourceValidationArgs
from raytpu.facts import catalog
from raytpu.facts.urns import stack_of
from raytpu.policy.props import (
    BUCKET,
    CLUSTER,
    NODE_POOL,
    policy_config,
    prop,
    ray_specs,
    seq,
    stack_in,
    tpu_generation,
)

DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")

PRODUCTION_SCHEMA = PolicyConfigSchema(properties={
    "productionStacks": {
        "type": "array", "items": {"type": "string"}, "default": ["prod", "production"],
        "description": "Stacks whose clusters must keep deletion protection",
    },
})


def deletion_protection(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != CLUSTER:
        return
    cfg = policy_config(args, PRODUCTION_SCHEMA)
    if stack_in(args.urn, cfg["productionStacks"]) and (
            prop(args.props, "deletionProtection") is False):
        report(f"stack {stack_of(args.urn)!r} is production but the cluster has "
               "deletionProtection: false", None)


BUCKET_SCHEMA = PolicyConfigSchema(properties={
    "bucketNamePattern": {
        "type": "string", "default": ".*",
        "description": "Regular expression of the checkpoint buckets' names",
    },
})


def bucket_versioning(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != BUCKET:
        return
    name = str(prop(args.props, "name") or args.name)
    if not re.fullmatch(policy_config(args, BUCKET_SCHEMA)["bucketNamePattern"], name):
        return
    if prop(args.props, "versioning", "enabled") is not True:
        report(f"bucket {name!r} keeps no object versions: an overwritten or deleted "
               "checkpoint is gone; set versioning.enabled", None)


def _pod_images(where: str, template: Any) -> Iterator[tuple[str, str]]:
    spec = prop(template, "spec")
    for kind in ("initContainers", "containers"):
        for i, c in enumerate(seq(prop(spec, kind))):
            yield f"{where}.spec.{kind}[{i}]", str(prop(c, "image") or "")


def image_digest(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for where, spec in ray_specs(args):
        images = list(_pod_images(f"{where}.headGroupSpec.template",
                                  prop(spec, "headGroupSpec", "template")))
        for i, w in enumerate(seq(prop(spec, "workerGroupSpecs"))):
            images += _pod_images(f"{where}.workerGroupSpecs[{i}].template", prop(w, "template"))
        if prop(spec, "autoscalerOptions", "image"):
            images.append((f"{where}.autoscalerOptions", str(prop(spec, "autoscalerOptions",
                                                                    "image"))))
        for at, image in images:
            if not DIGEST.search(image):
                report(f"{at}.image {image!r} is not pinned by digest (@sha256:...): a moved "
                       "tag gives the hosts of one slice different images", None)


def tpu_placement(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != NODE_POOL:
        return
    p = args.props
    tpu = tpu_generation(prop(p, "nodeConfig", "machineType"))
    if tpu is None:
        return
    gen, _ = tpu
    topology = prop(p, "placementPolicy", "tpuTopology")
    if not topology:
        return  # single-host: GKE rejects a topology there, and any node count is valid
    try:
        chips = catalog.topology_chips(str(topology))
        shape = catalog.slice_shape(gen.accelerator_type(chips), str(topology),
                                    prop(p, "nodeConfig", "machineType"))
    except (ValueError, catalog.CatalogError) as e:
        report(f"placementPolicy.tpuTopology {topology!r} is not a TPU {gen.name} topology "
               f"for {prop(p, 'nodeConfig', 'machineType')}: {e}", None)
        return
    if not shape.multi_host:
        report(f"placementPolicy.tpuTopology {topology!r} fits one {shape.machine_type} VM: "
               "GKE rejects a topology on a single-host pool", None)
        return
    if shape.workload_policy:
        if not prop(p, "placementPolicy", "policyName") or prop(
                p, "placementPolicy", "type") == "COMPACT":
            report(f"multi-host TPU pool ({shape.accelerator_type}, {topology}) needs a "
                   "workload policy as placementPolicy.policyName and no COMPACT type (GKE: "
                   "\"Use workload policy instead\")", None)
    elif prop(p, "placementPolicy", "type") != "COMPACT":
        report(f"multi-host TPU pool ({shape.accelerator_type}, {topology}) needs "
               "placementPolicy.type COMPACT", None)
    zones = len(seq(prop(p, "nodeLocations"))) or 1
    auto = prop(p, "autoscaling")
    if isinstance(auto, Mapping):
        sizes = {"autoscaling.maxNodeCount": prop(auto, "maxNodeCount")}
        if prop(auto, "totalMaxNodeCount") is not None:
            sizes = {"autoscaling.totalMaxNodeCount": prop(auto, "totalMaxNodeCount")}
        # All of a slice's hosts or none: the other bounds may only be 0 or hosts.
        for key in ("initialNodeCount", "autoscaling.minNodeCount"):
            value = prop(p, *key.split("."))
            if value not in (None, 0, shape.hosts):
                sizes[key] = value
    else:
        sizes = {"nodeCount": prop(p, "nodeCount") if prop(p, "nodeCount") is not None
                 else prop(p, "initialNodeCount")}
    for key, value in sizes.items():
        if value is None or int(value) * (1 if "total" in key else zones) != shape.hosts:
            report(f"{key} is {value} (x{zones} zone(s)) but a {shape.accelerator_type} "
                   f"({topology}) slice is {shape.hosts} {shape.machine_type} hosts: a slice "
                   "pool is all its hosts or nothing", None)


def gcs_fault_tolerance(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Elastic TPU groups are the ones a lost head costs most: their pools may scale to zero
    and wait for capacity the run already had."""
    for where, spec in ray_specs(args):
        elastic = [str(prop(w, "groupName")) for w in seq(prop(spec, "workerGroupSpecs"))
                   if prop(w, "minReplicas") != prop(w, "maxReplicas")]
        if elastic and prop(spec, "gcsFaultToleranceOptions") is None:
            report(f"{where}: elastic TPU groups {elastic} without gcsFaultToleranceOptions: a "
                   "lost head restarts every worker and the slices may be re-provisioned; set "
                   "raytpu:ray.gcsFaultTolerance", None)
