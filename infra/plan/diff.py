"""``raytpu plan --diff BASE.json``: what ``pulumi preview --diff`` would report between a
plan saved earlier (``raytpu plan --json > BASE.json``) and the current one.

Resources are matched by URN, or by an alias the current resource declares (``aliases``:
the engine matches the old URN to it, so it is no delete and create). A resource only in the
current plan is a *create*, only in the base a *delete*; one whose inputs changed is an
*update*, or a *replace* when a changed path forces it (:mod:`raytpu.facts.replacements`, or
its ``replaceOnChanges`` option). Paths under the current resource's ``ignoreChanges`` are
not compared: the engine diffs them with their old value (pulumi/pulumi
``pkg/resource/deploy/step_generator.go`` ``processIgnoreChanges``), so ``pulumi preview
--diff`` shows no change there (an elastic pool's ``initialNodeCount``, an autoscaled
worker group's ``replicas``).
Values that are secret in the current plan print as ``[secret]`` on both sides (a base
saved without ``--show-secrets`` holds only ``[secret]``, so a changed secret is found only
when the base was saved with it); values unknown before ``pulumi up`` compare as unknown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raytpu.facts.replacements import CLUSTER_TYPE, NODE_POOL_TYPE, TPU_MACHINE_TYPES, forcing_paths
from raytpu.plan.cost import _money
from raytpu.plan.engine import PlannedResource, PlanResult
from raytpu.plan.policies import Violation
from raytpu.plan.render import policy_lines, render_warnings
from raytpu.plan.values import (
    SECRET_TEXT,
    UNKNOWN_TEXT,
    is_secret,
    is_unknown,
    join_path,
)
from rich.console import Console
from rich.text import Text


class DiffError(Exception):
    """The base plan cannot be compared (not a ``raytpu plan --json`` object)."""


@dataclass(frozen=True)
class _Secret:
    value: Any


_ABSENT = object()


def _leaves(value: Any, path: str, out: dict[str, Any]) -> dict[str, Any]:
    """Flatten to ``{path: leaf}``; a secret or an empty container is one leaf."""
    if is_secret(value):
        out[path] = _Secret(value["value"])
    elif isinstance(value, dict) and (value or not path):  # the root is never a leaf
        for k, v in value.items():
            _leaves(v, join_path(path, k), out)
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            _leaves(v, join_path(path, i), out)
    else:
        out[path] = None if is_unknown(value) else value
    return out


def _shown(value: Any) -> Any:
    if isinstance(value, _Secret):
        return SECRET_TEXT
    return None if value is _ABSENT else value


@dataclass(frozen=True)
class Change:
    path: str
    old: Any
    new: Any
    """None: absent, or (``unknown``) computed by the provider on ``pulumi up``."""
    unknown: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "old": self.old, "new": self.new}


@dataclass(frozen=True)
class Changed:
    urn: str
    type: str
    name: str
    changes: list[Change]
    forced_by: list[str] = field(default_factory=list)
    """Replace only: the changed paths that force it."""
    tpu_pool: bool = False

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"urn": self.urn, "changes": [c.to_dict() for c in self.changes]}
        if self.forced_by:
            doc["forcedBy"] = self.forced_by
        return doc


@dataclass
class PlanDiff:
    stack: str
    create: list[str]
    delete: list[str]
    update: list[Changed]
    replace: list[Changed]
    deleted_tpu_pools: list[str]
    """Names of deleted TPU node pools (a changed slice shape renames its pools)."""
    deleted_cluster: str | None
    chips: dict[str, tuple[int, int]]
    """``count``/``max``: (base, current) TPU chips."""
    monthly: tuple[dict[str, float | None], dict[str, float | None]]
    """(base, current) monthly cost ``{min, count, max}``."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "create": self.create,
            "delete": self.delete,
            "update": [u.to_dict() for u in self.update],
            "replace": [r.to_dict() for r in self.replace],
        }

    @property
    def empty(self) -> bool:
        return not (self.create or self.delete or self.update or self.replace)


def _json_container(value: Any) -> Any:
    """``value`` parsed when it is a string holding a JSON object or list, else None."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict | list) else None
    return None


def _inputs_changes(old: Any, new: Any, prefix: str = "") -> list[Change]:
    """Changed leaves; a string input holding JSON (a dashboard) is compared inside, its
    paths written ``<input>:<path in the JSON>``."""
    before, after = _leaves(old, prefix, {}), _leaves(new, prefix, {})
    changes = []
    for path in sorted(before.keys() | after.keys()):
        a, b = before.get(path, _ABSENT), after.get(path, _ABSENT)
        if isinstance(b, _Secret):
            if a == SECRET_TEXT or (isinstance(a, str) and b.value == a):
                continue  # masked in the base: unknowable, or the same value
            changes.append(Change(path, SECRET_TEXT if a is not _ABSENT else None, SECRET_TEXT))
        elif a != b:
            inner_a, inner_b = _json_container(a), _json_container(b)
            if inner_a is not None and inner_b is not None:
                changes += _inputs_changes(inner_a, inner_b, f"{path}:")
            else:
                changes.append(Change(path, _shown(a), _shown(b), unknown=b is None))
    return changes


_SEGMENT = re.compile(r'\.?([A-Za-z_$][\w$-]*|\*)|\[(\d+|\*)\]|\["((?:[^"\\]|\\.)*)"\]')


def _segments(path: str) -> list[str]:
    """``spec.groups[0]["a.b"]`` -> ``["spec", "groups", "0", "a.b"]``; Pulumi's property path
    syntax (``ignoreChanges``) and this module's paths alike; a path inside a JSON string
    input (``dashboardJson:...``) is one segment after its input's."""
    head, sep, inner = path.partition(":")
    out: list[str] = []
    pos = 0
    while pos < len(head):
        m = _SEGMENT.match(head, pos)
        if m is None or m.end() == pos:
            return [*out, head[pos:]]  # not a path we parse: compare the rest as one segment
        out.append(next(g for g in m.groups() if g is not None))
        pos = m.end()
    return [*out, inner] if sep else out


def ignored(path: str, ignore_changes: Sequence[str]) -> bool:
    """Whether ``ignoreChanges`` covers ``path``: a pattern is a prefix of it, ``*`` (or
    ``[*]``) matching any one key or index."""
    parts = _segments(path)
    for pattern in ignore_changes:
        want = _segments(pattern)
        if len(want) <= len(parts) and all(w in ("*", p) for w, p in zip(want, parts,
                                                                          strict=False)):
            return True
    return False


def _alias_urns(r: PlannedResource) -> list[str]:
    """The URNs ``r``'s alias types give it (the same name and parent, an older type)."""
    head, _, name = r.urn.rpartition("::")
    prefix, _, types = head.rpartition("::")
    parents = types.rsplit("$", 1)[0] + "$" if "$" in types else ""
    return [f"{prefix}::{parents}{t}::{name}" for t in r.options.get("aliasTypes", [])]


def _count(r: dict[str, Any]) -> Any:
    """A ``{min, count, max}`` range's configured count; a base saved before ``count``
    existed called it ``min``."""
    return r["count"] if "count" in r else r["min"]


def _chips(cost: dict[str, Any]) -> tuple[int, int]:
    groups = cost.get("groups", [])
    return (sum(g["chips"] * _count(g["slices"]) for g in groups),
            sum(g["chips"] * g["slices"]["max"] for g in groups))


def _is_tpu_pool(r: PlannedResource | dict[str, Any]) -> bool:
    inputs = r.inputs if isinstance(r, PlannedResource) else r.get("inputs", {})
    machine = (inputs.get("nodeConfig") or {}).get("machineType")
    return machine in TPU_MACHINE_TYPES


def diff_plans(base: dict[str, Any], current: PlanResult) -> PlanDiff:
    """The diff from ``base`` (a ``raytpu plan --json`` object) to ``current``."""
    if not isinstance(base, dict) or not isinstance(base.get("resources"), list):
        raise DiffError("not a `raytpu plan --json` object (no resources list)")
    if any("urn" not in r for r in base["resources"]):
        raise DiffError("its resources have no URNs: save it again with this version's "
                        "`raytpu plan --stack S --json`")
    if base.get("stack") != current.stack:
        raise DiffError(f"it is a plan of stack {base.get('stack')!r}, not {current.stack!r}")
    old = {r["urn"]: r for r in base["resources"]}
    new = {r.urn: r for r in current.resources}
    for r in current.resources:  # an alias matches the old URN to the new resource
        if r.urn not in old:
            alias = next((a for a in _alias_urns(r) if a in old and a not in new), None)
            if alias is not None:
                old[r.urn] = old.pop(alias)
    update: list[Changed] = []
    replace: list[Changed] = []
    for urn in [u for u in new if u in old]:
        r = new[urn]
        ignore = r.options.get("ignoreChanges", [])
        changes = [c for c in _inputs_changes(old[urn].get("inputs", {}), r.inputs)
                   if not ignored(c.path, ignore)]
        if not changes:
            continue
        forced = forcing_paths(r.type, [c.path for c in changes],
                               r.options.get("replaceOnChanges", []))
        item = Changed(urn, r.type, r.name, changes, forced,
                       r.type == NODE_POOL_TYPE and (_is_tpu_pool(r) or _is_tpu_pool(old[urn])))
        (replace if forced else update).append(item)
    current_cost = current.to_dict()["cost"]
    base_cost = base.get("cost") or {"groups": [], "total": {"monthly": {"min": None,
                                                                          "max": None}}}
    (b_count, b_max), (c_count, c_max) = _chips(base_cost), _chips(current_cost)
    deleted = [old[u] for u in old if u not in new]
    return PlanDiff(
        stack=current.stack,
        create=sorted(u for u in new if u not in old),
        delete=sorted(r["urn"] for r in deleted),
        deleted_tpu_pools=[r["name"] for r in sorted(deleted, key=lambda r: r["urn"])
                           if r.get("type") == NODE_POOL_TYPE and _is_tpu_pool(r)],
        deleted_cluster=next((r["name"] for r in deleted if r.get("type") == CLUSTER_TYPE),
                             None),
        update=sorted(update, key=lambda c: c.urn),
        replace=sorted(replace, key=lambda c: c.urn),
        chips={"count": (b_count, c_count), "max": (b_max, c_max)},
        monthly=(base_cost["total"]["monthly"], current_cost["total"]["monthly"]),
    )


def load_base(path: str | Path) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            doc: dict[str, Any] = json.load(f)
    except (OSError, ValueError) as e:
        raise DiffError(str(e)) from None
    return doc


# ---------------------------------------------------------------------------------------
# Text


def _name(urn: str) -> str:
    """``NodePool v5e-4-0`` from a URN."""
    kind = urn.split("::")[2].rsplit("$", 1)[-1].rsplit(":", 1)[-1]
    return f"{kind} {urn.rsplit('::', 1)[-1]}"


def _value(value: Any) -> str:
    if value is None:
        return "(none)"
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _change_line(c: Change) -> str:
    new = UNKNOWN_TEXT if c.unknown else _value(c.new)
    return f"      {c.path}: {_value(c.old)} => {new}"


def callouts(diff: PlanDiff) -> list[str]:
    """Replacements a reviewer must not miss: the cluster, TPU node pools."""
    lines = []
    for r in diff.replace:
        why = ", ".join(r.forced_by)
        if r.type == CLUSTER_TYPE:
            lines.append(f"DANGER: the GKE cluster {r.name} will be DELETED and CREATED AGAIN "
                         f"(forced by {why}): every node pool, workload and Ray job on it is "
                         "lost.")
        elif r.tpu_pool:
            lines.append(f"DANGER: TPU node pool {r.name} will be DELETED and CREATED AGAIN "
                         f"(forced by {why}): jobs on that slice stop, and its capacity may "
                         "not come back.")
    if diff.deleted_cluster:
        lines.append(f"DANGER: the GKE cluster {diff.deleted_cluster} will be DELETED: every "
                     "node pool, workload and Ray job on it is lost.")
    if diff.deleted_tpu_pools:
        lines.append(f"DANGER: TPU node pools {', '.join(diff.deleted_tpu_pools)} will be "
                     "DELETED: jobs on those slices stop, and their capacity may not come back "
                     "(a changed slice shape or machine type renames a group's pools).")
    return lines


def diff_lines(diff: PlanDiff) -> list[tuple[str, str]]:
    """(text, style) lines of the human diff, danger first, summary last."""
    out: list[tuple[str, str]] = [(line, "bold red") for line in callouts(diff)]
    out.append((f"Diff of stack {diff.stack} against the base plan", "bold"))
    out += [(f"  + create   {_name(u)}", "green") for u in diff.create]
    for r in diff.replace:
        out.append((f"  +- replace {_name(r.urn)} (forced by {', '.join(r.forced_by)})",
                    "magenta"))
        out += [(_change_line(c), "") for c in r.changes]
    for r in diff.update:
        out.append((f"  ~ update   {_name(r.urn)}", "yellow"))
        out += [(_change_line(c), "") for c in r.changes]
    out += [(f"  - delete   {_name(u)}", "red") for u in diff.delete]
    (b, c), (bm, cm) = diff.chips["count"], diff.chips["max"]
    (base_month, month) = diff.monthly
    out.append((f"TPU chips at the configured count: {b} => {c} (max {bm} => {cm}); "
                f"monthly cost at count: {_money(_count(base_month))} => "
                f"{_money(_count(month))} (max {_money(base_month['max'])} => "
                f"{_money(month['max'])})", ""))
    counts = (f"+ {len(diff.create)} to create, ~ {len(diff.update)} to update, "
              f"+- {len(diff.replace)} to replace, - {len(diff.delete)} to delete")
    out.append(("Diff: no changes" if diff.empty else f"Diff: {counts}", "bold"))
    return out


def render_diff(diff: PlanDiff, violations: Sequence[Violation] | None = None,
                console: Console | None = None, warnings: Sequence[str] = ()) -> None:
    """The human diff; the warnings and the policy results (``violations``, None: off)
    before its summary."""
    console = console or Console()
    lines = diff_lines(diff)
    for text, style in lines[:-1]:
        console.print(Text(text, style=style), overflow="fold")
    render_warnings(console, warnings)
    if violations is not None:
        for line in policy_lines(violations):
            console.print(line, overflow="fold")
    text, style = lines[-1]
    console.print(Text(text, style=style), overflow="fold")
