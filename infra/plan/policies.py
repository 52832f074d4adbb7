"""The guardrails in ``raytpu plan``: the policy pack's rules run on the mocked plan.

Each planned resource is handed to the rules as the policy SDK's analyzer hands a resource
during ``pulumi preview``: its type token, its wire-format inputs behind the SDK's
``unknown_checking_proxy``, its URN, name and options; stack policies get every custom
resource with its parent and dependencies. So the rules do not know whether they run
here or in the engine. Config: each policy's schema defaults, overridden by a
``--policy-pack-config``-shaped mapping (``{"<policy>": {"<key>": value}}``).

The analyzer builds a fresh proxy per policy and resource; here each resource gets one,
shared by every policy (and its provider one, shared by the resources it serves): the
proxy copies every dict and list it wraps, so the plan's own inputs are never reachable
from a rule, and the rules only read. Building 13 proxies of each of a few hundred
resources was most of the time the policies took.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from inspect import isawaitable
from pathlib import Path
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy
from raytpu.config.stack import ConfigError
from raytpu.plan.engine import PlannedResource, PlanResult
from raytpu.policy.rules import POLICIES


@dataclass(frozen=True)
class Violation:
    policy: str
    level: str
    """``mandatory`` or ``advisory``."""
    urn: str
    """The resource's URN; empty for a stack-wide violation."""
    message: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def _options(r: PlannedResource) -> PolicyResourceOptions:
    o = r.options
    return PolicyResourceOptions(
        protect=bool(o.get("protect")),
        ignore_changes=list(o.get("ignoreChanges", [])),
        delete_before_replace=o.get("deleteBeforeReplace"),
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=list(o.get("additionalSecretOutputs", [])),
        parent=r.parent_urn or None,
    )


class _Proxies:
    """Each resource's inputs and provider as the rules see them, built once per plan."""

    def __init__(self, result: PlanResult) -> None:
        self.by_urn = {r.urn: r for r in result.resources}
        self._props: dict[str, Any] = {}
        self._providers: dict[str, PolicyProviderResource | None] = {}

    def props(self, r: PlannedResource) -> Any:
        if r.urn not in self._props:
            self._props[r.urn] = unknown_checking_proxy(r.inputs)
        return self._props[r.urn]

    def provider(self, r: PlannedResource) -> PolicyProviderResource | None:
        urn = str(r.options.get("provider", ""))
        if urn not in self._providers:
            p = self.by_urn.get(urn)
            self._providers[urn] = (None if p is None else
                                    PolicyProviderResource(p.type, self.props(p), p.urn, p.name))
        return self._providers[urn]


def _level(policy: ResourceValidationPolicy | StackValidationPolicy,
           config: Mapping[str, Any]) -> EnforcementLevel:
    override = (config.get(policy.name) or {}).get("enforcementLevel")
    if override:
        return EnforcementLevel(override)
    return policy.enforcement_level or EnforcementLevel.ADVISORY


def _run(policy: ResourceValidationPolicy | StackValidationPolicy, args: Any,
         out: list[Violation], level: EnforcementLevel, urn: str) -> None:
    def report(message: str, violation_urn: str | None = None) -> None:
        out.append(Violation(policy.name, level.value, violation_urn or urn, message))

    try:
        result = policy.validate(args, report)
        if isawaitable(result):
            asyncio.run(result)  # type: ignore[arg-type]
    except UnknownValueError as e:  # the analyzer reports these as advisory notes
        out.append(Violation(policy.name, EnforcementLevel.ADVISORY.value, urn,
                             f"can't run during preview: {e.message}"))


def evaluate(result: PlanResult, config: Mapping[str, Any] | None = None,
             policies: list[ResourceValidationPolicy | StackValidationPolicy] | None = None,
             ) -> list[Violation]:
    """Every violation of ``policies`` (default: the pack) in the plan."""
    config = config or {}
    custom = [r for r in result.resources if r.custom]
    proxies = _Proxies(result)
    options = {r.urn: _options(r) for r in custom}
    stack: list[PolicyResource] | None = None
    out: list[Violation] = []
    for policy in policies if policies is not None else POLICIES:
        level = _level(policy, config)
        if level == EnforcementLevel.DISABLED:
            continue
        own = dict(config.get(policy.name) or {})
        own.pop("enforcementLevel", None)
        if isinstance(policy, ResourceValidationPolicy):
            for r in custom:
                args = ResourceValidationArgs(r.type, proxies.props(r), r.urn, r.name,
                                              options[r.urn], proxies.provider(r), own)
                _run(policy, args, out, level, r.urn)
        else:
            stack = stack if stack is not None else stack_resources(result, proxies)
            _run(policy, StackValidationArgs(stack, own), out, level, "")
    return out


def stack_resources(result: PlanResult, proxies: _Proxies | None = None
                    ) -> list[PolicyResource]:
    """The plan's custom resources as a stack policy sees them (parents, dependencies)."""
    proxies = proxies or _Proxies(result)
    made: dict[str, PolicyResource] = {}
    for r in result.resources:
        made[r.urn] = PolicyResource(r.type, proxies.props(r), r.urn, r.name, _options(r),
                                     proxies.provider(r), None, [], {})
    for r in result.resources:
        pr = made[r.urn]
        pr.parent = made.get(r.parent_urn or "")
        pr.dependencies = [made[u] for u in r.options.get("dependsOn", []) if u in made]
    return [made[r.urn] for r in result.resources if r.custom]


def mandatory(violations: list[Violation]) -> list[Violation]:
    return [v for v in violations if v.level == EnforcementLevel.MANDATORY.value]


def plan_document(result: PlanResult, violations: list[Violation] | None, *,
                  show_secrets: bool = False) -> dict[str, Any]:
    """``raytpu plan --json``'s object (docs/plan.md): the plan's view model,
    with the policy results unless the policies were turned off (``violations`` None)."""
    doc = result.to_dict(show_secrets)
    if violations is not None:
        doc["policies"] = [v.to_dict() for v in violations]
    return doc


def plan_policies(result: PlanResult, *, enabled: bool = True,
                  config: Mapping[str, Any] | None = None,
                  ) -> tuple[list[Violation] | None, list[str]]:
    """What ``raytpu plan`` adds: the violations (None when turned off) and one line per
    mandatory violation (the plan then exits 3, after printing everything)."""
    if not enabled:
        return None, []
    violations = evaluate(result, config)
    blocking = [f"policy {v.policy} ({v.urn or 'stack'}): {v.message}"
                for v in mandatory(violations)]
    return violations, blocking


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "integer": (int,), "number": (int, float), "string": (str,), "array": (list,),
    "boolean": (bool,), "object": (dict,),
}


def load_policy_config(path: Path | None) -> dict[str, Any]:
    """A ``--policy-pack-config`` file (``{"<policy>": {"enforcementLevel": ..., "<key>":
    value}}`` or ``{"<policy>": "<level>"}``), checked against the policies' schemas.
    Raises :class:`ConfigError` naming the key at fault."""
    if path is None:
        return {}
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError([f"--policy-config: {path}: {e}"]) from None
    if not isinstance(raw, dict):
        raise ConfigError([f"--policy-config: {path}: must be a JSON object"])
    known = {p.name: p for p in POLICIES}
    levels = [lv.value for lv in EnforcementLevel if lv != EnforcementLevel.REMEDIATE]
    out: dict[str, Any] = {}
    problems: list[str] = []
    for name, value in raw.items():
        key = f"--policy-config {name}"
        if name not in known:
            problems.append(f"{key}: unknown policy; valid: {', '.join(known)}")
            continue
        if isinstance(value, str):
            value = {"enforcementLevel": value}
        if not isinstance(value, dict):
            problems.append(f"{key}: {value!r} must be an enforcement level or an object")
            continue
        schema = known[name].config_schema
        props = schema.properties if schema else {}
        for k, v in value.items():
            if k == "enforcementLevel":
                if v not in levels:
                    problems.append(f"{key}.enforcementLevel: {v!r} is not valid; valid: "
                                    f"{', '.join(levels)}")
            elif k not in props:
                problems.append(f"{key}.{k}: unknown key; valid: "
                                f"{', '.join(['enforcementLevel', *props])}")
            else:
                want = _JSON_TYPES[props[k]["type"]]
                items = props[k].get("items", {}).get("type")
                elements = v if isinstance(v, list) else []
                if (not isinstance(v, want) or (isinstance(v, bool) and bool not in want)
                        or (items and not all(isinstance(i, _JSON_TYPES[items])
                                              for i in elements))):
                    problems.append(f"{key}.{k}: {v!r} is not valid: expected "
                                    f"{props[k]['type']}" + (f" of {items}" if items else ""))
        out[name] = value
    if problems:
        raise ConfigError(problems)
    return out
