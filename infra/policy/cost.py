"""The cost rules (thresholds from config): a chip ceiling per stack, Spot VMs where asked,
cost labels on every TPU pool."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import (
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    StackValidationArgs,
)
from raytpu.facts.urns import stack_of
from raytpu.policy.props import (
    NODE_POOL,
    policy_config,
    pool_max_nodes,
    prop,
    stack_in,
    tpu_generation,
)

CHIPS_SCHEMA = PolicyConfigSchema(properties={
    "maxChips": {
        "type": "integer", "minimum": 0, "default": 256,
        "description": "Most TPU chips a stack may hold at its autoscaling maximum",
    },
})


def tpu_chips_at_max(props: Any) -> int:
    """TPU chips of a node pool at its autoscaling maximum (0 for a CPU pool)."""
    tpu = tpu_generation(prop(props, "nodeConfig", "machineType"))
    return 0 if tpu is None else tpu[1] * pool_max_nodes(props)


def max_chips(args: StackValidationArgs, report: ReportViolation) -> None:
    limit = int(policy_config(args, CHIPS_SCHEMA)["maxChips"])
    pools = [(r, tpu_chips_at_max(r.props)) for r in args.resources
             if r.resource_type == NODE_POOL]
    total = sum(c for _, c in pools)
    if total > limit:
        detail = ", ".join(f"{prop(r.props, 'name') or r.name} {c}" for r, c in pools if c)
        report(f"the stack's TPU node pools hold {total} chips at their autoscaling maximum "
               f"({detail}); the limit is {limit} (config maxChips)", None)


SPOT_SCHEMA = PolicyConfigSchema(properties={
    "spotStacks": {
        "type": "array", "items": {"type": "string"}, "default": ["dev"],
        "description": "Stacks whose TPU node pools must use Spot VMs",
    },
})


def spot(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != NODE_POOL or tpu_generation(
            prop(args.props, "nodeConfig", "machineType")) is None:
        return
    if not stack_in(args.urn, policy_config(args, SPOT_SCHEMA)["spotStacks"]):
        return
    cfg = prop(args.props, "nodeConfig")
    if not (prop(cfg, "spot") or prop(cfg, "preemptible")):
        report(f"stack {stack_of(args.urn)!r} runs TPU slices on Spot VMs only; set "
               "nodeConfig.spot", None)


LABELS_SCHEMA = PolicyConfigSchema(properties={
    "requiredLabels": {
        "type": "array", "items": {"type": "string"}, "default": ["stack", "slice-group"],
        "description": "GCE labels (nodeConfig.resourceLabels) every TPU node pool carries, "
                       "for the billing export",
    },
})


def cost_labels(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != NODE_POOL or tpu_generation(
            prop(args.props, "nodeConfig", "machineType")) is None:
        return
    labels = prop(args.props, "nodeConfig", "resourceLabels")
    have = set(labels) if isinstance(labels, Mapping) else set()
    missing = [k for k in policy_config(args, LABELS_SCHEMA)["requiredLabels"] if k not in have]
    if missing:
        report(f"TPU node pool {prop(args.props, 'name') or args.name!r} has no cost label(s) "
               f"{', '.join(missing)} in nodeConfig.resourceLabels: its chips cannot be "
               "attributed in the billing export", None)
