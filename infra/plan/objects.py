"""The Kubernetes objects a plan declares, as the provider would receive them (camelCase,
the typed ``*Args`` already translated): one rendering path for ``raytpu manifests``, the
plan's tables and the rehearsal."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from raytpu.plan.engine import PlannedResource, PlanResult

CHART_TYPES = ("kubernetes:helm.sh/v4:Chart", "kubernetes:helm.sh/v3:Release")
_TOKEN = re.compile(r"^kubernetes:(?P<gv>[^:]+/[^:]+):(?P<kind>[A-Za-z0-9]+)$")
_TOP = ("apiVersion", "kind", "metadata")


def api_version_of(type_token: str) -> str | None:
    """``kubernetes:core/v1:Namespace`` -> ``v1``; ``kubernetes:ray.io/v1:RayCluster`` ->
    ``ray.io/v1``; None for anything that is not a Kubernetes object."""
    m = _TOKEN.match(type_token)
    if not m or type_token.startswith("kubernetes:helm.sh/"):
        return None
    gv = m.group("gv")
    return gv.removeprefix("core/")


def is_object(r: PlannedResource) -> bool:
    """A real API object: not a provider, not a Helm chart/release, not a component."""
    return r.custom and api_version_of(r.type) is not None


def sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: sorted_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(v) for v in value]
    return value


def to_manifest(r: PlannedResource, *, redact_secrets: bool = True) -> dict[str, Any]:
    api_version = api_version_of(r.type)
    kind = r.type.rsplit(":", 1)[1]
    inputs = dict(r.inputs)
    metadata = sorted_keys(dict(inputs.get("metadata") or {}))
    metadata.setdefault("name", r.name)  # auto-named by Pulumi at apply time otherwise
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": metadata}
    for key in sorted(inputs):
        if key not in _TOP:
            obj[key] = sorted_keys(inputs[key])
    if kind == "Secret" and redact_secrets:
        for key in ("data", "stringData"):
            if key in obj:
                obj[key] = {k: "<redacted>" for k in obj[key]}
    return obj


def objects(result: PlanResult) -> list[dict[str, Any]]:
    return [to_manifest(r) for r in result.resources if is_object(r)]


