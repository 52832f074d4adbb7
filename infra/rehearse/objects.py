"""What the rehearsal applies: the CRDs the stack installs and the stack's own objects as the
program declares them, with the values only ``pulumi up`` knows filled by visible
placeholders.

The objects are the preview's (``run_plan(..., preview=True)``): a provider-computed value
is unknown there, never one of the mocks' stand-ins, and the rehearsal writes an obvious
placeholder in its place and lists it (``placeholders``), so nothing it applies looks like
a real digest or e-mail address.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import yaml
from raytpu.plan.objects import is_object, to_manifest
from raytpu.plan.values import is_unknown, join_path, reveal

if TYPE_CHECKING:
    from raytpu.plan.engine import PlannedResource


class Declared(Protocol):
    """What a program declared: a :class:`~raytpu.plan.engine.PlanResult`, or the record of
    any Pulumi program run under mocks (the examples)."""

    @property
    def stack(self) -> str: ...

    @property
    def resources(self) -> list[PlannedResource]: ...

CRDS_ENV = "RAYTPU_CRDS"
# Images are never pulled (no kubelet); a name no registry serves, so it cannot be mistaken.
PLACEHOLDER_IMAGE = "known-after-up.rehearsal.invalid/raytpu-trainer:placeholder"
PLACEHOLDER = "known-after-up@rehearsal.invalid"
# Which CRD folder a stack needs, by the API group of the objects it declares; KubeRay's are
# always there (the operator watches all three kinds, Helm chart or GKE add-on alike).
CRD_FOLDERS = {"ray.io": "kuberay", "kueue.x-k8s.io": "kueue",
               "monitoring.googleapis.com": "gmp"}


class CrdsNotFound(Exception):
    """The CRD folder is missing (the message says how to give it)."""


@dataclass(frozen=True)
class Placeholder:
    kind: str
    namespace: str | None
    name: str
    path: str
    value: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _fill(value: Any, path: str, found: list[str]) -> Any:
    if is_unknown(value):
        found.append(path)
        return PLACEHOLDER_IMAGE if path.endswith(".image") else PLACEHOLDER
    if isinstance(value, dict):
        return {k: _fill(v, join_path(path, k), found) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, join_path(path, i), found) for i, v in enumerate(value)]
    return value


def stack_objects(result: Declared) -> tuple[list[dict[str, Any]], list[Placeholder]]:
    """The stack's Kubernetes objects in the plan's order (a resource after everything it
    depends on), secrets as the program made them, unknowns filled and listed."""
    objs, placeholders = [], []
    for r in result.resources:
        if not is_object(r):
            continue
        found: list[str] = []
        filled = _fill(reveal(r.inputs), "", found)
        obj = to_manifest(dataclasses.replace(r, inputs=filled), redact_secrets=False)
        meta = obj["metadata"]
        placeholders += [Placeholder(obj["kind"], meta.get("namespace"), meta["name"], p,
                                     PLACEHOLDER_IMAGE if p.endswith(".image") else PLACEHOLDER)
                         for p in found]
        objs.append(obj)
    # Namespaces first, as `kubectl apply` of the manifests folder is told to; the rest keep
    # the plan's order.
    objs.sort(key=lambda o: o["kind"] != "Namespace")
    return objs, placeholders


def crd_folder(given: Path | None) -> Path:
    """``--crds``, else ``$RAYTPU_CRDS``, else ``../shared/ref`` from the working directory."""
    candidates = ([given] if given else []) + (
        [Path(os.environ[CRDS_ENV])] if os.environ.get(CRDS_ENV) else []) + (
        [] if given or os.environ.get(CRDS_ENV) else [Path("..") / "shared" / "ref"])
    for folder in candidates:
        if (folder / "kuberay").is_dir():
            return folder.resolve()
    where = candidates[0] if candidates else Path("../shared/ref")
    raise CrdsNotFound(f"no CRD folder at {where} (expected kuberay/, kueue/, gmp/ with the "
                       f"CRD YAML files): give --crds DIR or ${CRDS_ENV}")


def stack_crds(objs: list[dict[str, Any]], folder: Path) -> list[dict[str, Any]]:
    """The CRDs the stack installs: KubeRay's, and Kueue's and managed Prometheus' when the
    stack declares objects of theirs."""
    groups = {"ray.io"} | {o["apiVersion"].split("/")[0] for o in objs if "/" in o["apiVersion"]}
    crds = []
    for group, sub in CRD_FOLDERS.items():
        if group not in groups:
            continue
        files = sorted((folder / sub).glob("*.yaml"))
        if not files:
            raise CrdsNotFound(f"no CRD files in {folder / sub}")
        for f in files:
            crds += [d for d in yaml.safe_load_all(f.read_text())
                     if d and d.get("kind") == "CustomResourceDefinition"]
    return crds
