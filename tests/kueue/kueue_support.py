"""Kueue v0.19.2 CRD validation for the tests: strict schema plus the CRDs' CEL rules.

* Schema: each kind's ``v1beta2`` ``openAPIV3Schema`` made *strict* (an unknown key fails
  unless ``x-kubernetes-preserve-unknown-fields``), since the API server would prune it.
* CEL: every ``x-kubernetes-validations`` rule that needs no ``oldSelf`` (transition rules
  only apply to updates), evaluated with cel-python on the value it is attached to, as the
  API server does on create.

The CEL part needs cel-python, in the ``dev`` extra (``constraints.txt`` pins it). Where it is
missing (an install without ``dev``) :func:`require_cel` skips the CEL tests, and with
``RAYTPU_REQUIRE_CRDS=1`` (CI) fails them instead, like a missing CRD: CI cannot go green with
the CEL rules unchecked. The rules that matter for what this package emits are also
enforced by the typed objects (:class:`raytpu.components.kueue_objects.ClusterQueue`).

The CRDs are read from ``../shared/ref/kueue`` or ``$RAYTPU_KUEUE_CRDS``; missing files skip
the tests saying how to get them, or fail them with ``RAYTPU_REQUIRE_CRDS=1`` (CI).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "ray"))
from ray_support import strict_schema  # noqa: E402  one rule for what the API server prunes

PLURALS = {"ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues",
           "LocalQueue": "localqueues", "WorkloadPriorityClass": "workloadpriorityclasses",
           "Cohort": "cohorts", "Topology": "topologies", "AdmissionCheck": "admissionchecks"}


def crd_dir() -> Path:
    return Path(os.environ.get("RAYTPU_KUEUE_CRDS") or REPO / ".." / "shared" / "ref" / "kueue")


def require_crds() -> Path:
    folder = crd_dir()
    missing = [f"kueue.x-k8s.io_{p}.yaml" for p in PLURALS.values()
               if not (folder / f"kueue.x-k8s.io_{p}.yaml").is_file()]
    if missing:
        message = (f"Kueue v0.19.2 CRDs missing in {folder.resolve()}: {', '.join(missing)}; "
                   "copy config/components/crd/bases from kubernetes-sigs/kueue tag v0.19.2 and "
                   "set RAYTPU_KUEUE_CRDS to that folder")
        if os.environ.get("RAYTPU_REQUIRE_CRDS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return folder


@functools.cache
def _schemas(folder: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for kind, plural in PLURALS.items():
        crd = yaml.safe_load((folder / f"kueue.x-k8s.io_{plural}.yaml").read_text())
        assert crd["spec"]["names"]["kind"] == kind
        (v1beta2,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
        schema = v1beta2["schema"]["openAPIV3Schema"]
        schema["properties"].pop("status", None)  # the controller's, never ours
        out[kind] = schema
    return out


def _cel_rules(schema: Mapping[str, Any], value: Any, path: str
               ) -> Iterator[tuple[str, str, str, Any]]:
    """(path, rule, message, value) for every CEL rule that applies to ``value``."""
    for rule in schema.get("x-kubernetes-validations") or []:
        if "oldSelf" not in rule["rule"]:
            yield path, rule["rule"], rule.get("message", rule["rule"]), value
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for k, v in value.items():
            sub = props.get(k) or (extra if isinstance(extra, dict) else None)
            if sub:
                yield from _cel_rules(sub, v, f"{path}/{k}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            yield from _cel_rules(schema["items"], v, f"{path}/{i}")


def _celpy() -> Any:
    try:
        import celpy
    except ImportError:
        return None
    return celpy


def require_cel() -> Any:
    celpy = _celpy()
    if celpy is None:
        message = ("cel-python is not installed (it is in the dev extra: pip install -c "
                   "constraints.txt -e '.[dev]'): CEL rules unchecked")
        if os.environ.get("RAYTPU_REQUIRE_CRDS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return celpy


@functools.cache
def _program(rule: str) -> Any:
    env = _celpy().Environment()
    return env.program(env.compile(rule))


def cel_problems(obj: Mapping[str, Any]) -> list[str]:
    """The CRD's CEL rules that ``obj`` breaks (needs cel-python)."""
    celpy = require_cel()
    schema = _schemas(require_crds().resolve())[obj["kind"]]
    problems = []
    for path, rule, message, value in _cel_rules(schema, dict(obj), ""):
        if _program(rule).evaluate({"self": celpy.json_to_cel(value)}) != celpy.celtypes.BoolType(
                True):
            problems.append(f"{path or '<root>'}: CEL {rule!r} failed: {message}")
    return problems


def kueue_problems(obj: Mapping[str, Any]) -> list[str]:
    """Schema errors, and CEL errors where cel-python is installed, of one Kueue object
    (skips/fails without the CRDs)."""
    schema = _schemas(require_crds().resolve())[obj["kind"]]
    validator = jsonschema.Draft202012Validator(
        strict_schema(schema) | {"additionalProperties": False})
    problems = [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
                for e in validator.iter_errors(dict(obj))]
    if _celpy() is not None or os.environ.get("RAYTPU_REQUIRE_CRDS") == "1":
        problems += cel_problems(obj)
    return sorted(problems)
