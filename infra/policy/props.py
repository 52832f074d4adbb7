"""Reading a resource the way every rule does: type tokens, nested props, policy config.

The SDK hands ``props`` as proxies (``Mapping``/``Sequence``, not dicts), so
everything here reads through those interfaces; :func:`prop` returns None where a step of
a path is missing, so a rule never fails on an absent field.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pulumi_policy import PolicyConfigSchema, ResourceValidationArgs, StackValidationArgs
from raytpu.facts import catalog
from raytpu.facts.urns import stack_of

FIREWALL = "gcp:compute/firewall:Firewall"
CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
BUCKET = "gcp:storage/bucket:Bucket"
SERVICE = "kubernetes:core/v1:Service"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
RAYCLUSTER = "kubernetes:ray.io/v1:RayCluster"
RAYJOB = "kubernetes:ray.io/v1:RayJob"
RAYSERVICE = "kubernetes:ray.io/v1:RayService"


def prop(props: Any, *path: str | int) -> Any:
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


def seq(value: Any) -> list[Any]:
    if isinstance(value, Sequence) and not isinstance(value, str):
        return list(value)
    return []


def policy_config(args: ResourceValidationArgs | StackValidationArgs,
            schema: PolicyConfigSchema | None) -> dict[str, Any]:
    """The policy's config over the schema's defaults (the CLI fills them in a preview;
    filled here too so a direct call behaves the same)."""
    defaults = {k: v["default"] for k, v in (schema.properties if schema else {}).items()
                if "default" in v}
    return {**defaults, **dict(args.get_config() or {})}


def pool_max_nodes(props: Any) -> int:
    """Most nodes a node pool can have: per-zone max x zones, a total max, or its size."""
    zones = len(seq(prop(props, "nodeLocations"))) or 1
    auto = prop(props, "autoscaling")
    if isinstance(auto, Mapping):
        if prop(auto, "totalMaxNodeCount") is not None:
            return int(prop(auto, "totalMaxNodeCount"))
        if prop(auto, "maxNodeCount") is not None:
            return int(prop(auto, "maxNodeCount")) * zones
    count = prop(props, "nodeCount")
    if count is None:
        count = prop(props, "initialNodeCount")
    return int(count or 0) * zones


def tpu_generation(machine_type: str | None) -> tuple[catalog.Generation, int] | None:
    """(generation, chips per VM) of a TPU machine type (``ct5lp-hightpu-4t``), from the
    catalog; None for a non-TPU machine type."""
    for gen in catalog.GENERATIONS.values():
        for chips, name in gen.machine_types.items():
            if name == machine_type:
                return gen, chips
    return None


def stack_in(urn: str, stacks: Sequence[str]) -> bool:
    return stack_of(urn) in set(stacks)


def ray_specs(args: ResourceValidationArgs) -> Iterator[tuple[str, Any]]:
    """(where, RayCluster spec) of a RayCluster, a RayJob's or a RayService's cluster."""
    spec = prop(args.props, "spec")
    if args.resource_type == RAYCLUSTER:
        yield "spec", spec
    elif args.resource_type == RAYJOB and prop(spec, "rayClusterSpec") is not None:
        yield "spec.rayClusterSpec", prop(spec, "rayClusterSpec")
    elif args.resource_type == RAYSERVICE and prop(spec, "rayClusterConfig") is not None:
        yield "spec.rayClusterConfig", prop(spec, "rayClusterConfig")
