"""Every GCP input name the shipped stacks and the examples send exists in pulumi-gcp.

``components/gcp_resources.py`` registers resources by type token with camelCase dicts, so
Python no longer catches a misspelt key (pulumi-gcp's generated ``*Args`` classes would).
This walks every ``gcp:`` resource's inputs, nested objects and lists included, and checks
each key against the installed pulumi-gcp's generated input types (the wire name each
property's getter declares), so ``nodeConfig.machinType`` fails here instead of at GCP.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import typing
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from infra_support import REPO, STACKS
from raytpu.plan.engine import PlanResult

SECRET_SIG = "4dabf18193072939515e22adb298388d"
EXAMPLES = REPO / "examples"


@cache
def args_class(token: str) -> type:
    """The generated ``*Args`` class of a resource type token
    (``gcp:container/nodePool:NodePool`` -> ``pulumi_gcp.container.NodePoolArgs``)."""
    _, module_path, name = token.split(":")
    module = importlib.import_module(f"pulumi_gcp.{module_path.split('/')[0]}")
    cls: type = getattr(module, f"{name}Args")
    return cls


def _nested_args(annotation: Any, scope: dict[str, Any]) -> type | None:
    """The ``*Args`` class an input's annotation holds, at any depth (Optional, Input,
    Sequence, Mapping), or None for a scalar or a free-form map."""
    if isinstance(annotation, typing.ForwardRef):
        annotation = scope.get(annotation.__forward_arg__)
    elif isinstance(annotation, str):
        annotation = scope.get(annotation)
    if isinstance(annotation, type) and annotation.__name__.endswith("Args"):
        return annotation
    for arg in typing.get_args(annotation):
        found = _nested_args(arg, scope)
        if found is not None:
            return found
    return None


@cache
def properties(cls: type) -> dict[str, type | None]:
    """Wire name -> nested ``*Args`` class (None: a scalar, list of scalars or a map)."""
    out: dict[str, type | None] = {}
    for attr in vars(cls).values():
        if isinstance(attr, property) and attr.fget is not None:
            wire = getattr(attr.fget, "_pulumi_name", None)
            if wire:
                hint = attr.fget.__annotations__.get("return")
                out[wire] = _nested_args(hint, attr.fget.__globals__)
    assert out, f"{cls.__name__}: no input properties found (pulumi-gcp layout changed?)"
    return out


def unknown_names(value: Any, cls: type, path: str) -> Iterator[str]:
    """Paths of keys in ``value`` that ``cls`` (a generated ``*Args`` class) does not have."""
    if isinstance(value, dict) and SECRET_SIG in value:
        value = value.get("value")
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield from unknown_names(item, cls, f"{path}[{i}]")
        return
    if not isinstance(value, dict):
        return
    props = properties(cls)
    for key, item in value.items():
        if item is None:
            continue  # never sent (the bindings drop unset values)
        if key not in props:
            yield f"{path}.{key}"
        elif props[key] is not None:
            yield from unknown_names(item, props[key], f"{path}.{key}")  # type: ignore[arg-type]


def gcp_inputs_problems(resources: list[tuple[str, str, dict[str, Any]]]) -> list[str]:
    problems = []
    for typ, name, inputs in resources:
        if typ.startswith("gcp:"):
            problems += [f"{typ} {name}: {p} is not an input of pulumi-gcp's "
                         f"{args_class(typ).__name__}"
                         for p in unknown_names(inputs, args_class(typ), "inputs")]
    return problems


def test_every_gcp_input_of_the_shipped_stacks_exists(stack_plans: dict[str, PlanResult]) -> None:
    checked = 0
    for stack in STACKS:
        resources = [(r.type, r.name, r.inputs) for r in stack_plans[stack].resources]
        assert gcp_inputs_problems(resources) == [], stack
        checked += sum(1 for t, _, _ in resources if t.startswith("gcp:"))
    assert checked > 50


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _run_example(directory: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """The resources the example's program declares, with the config its own test uses."""
    conftest = _load("examples_conftest", EXAMPLES / "conftest.py")
    example_test = _load(f"example_{directory.name}", next(directory.glob("test_*.py")))
    recorded = conftest.run_example(directory, example_test.CONFIG,
                                    getattr(example_test, "OWNER", None))
    resources: list[tuple[str, str, dict[str, Any]]] = recorded.resources
    return resources


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.iterdir()
                                           if (p / "Pulumi.yaml").is_file()))
def test_every_gcp_input_of_the_examples_exists(example: str) -> None:
    resources = _run_example(EXAMPLES / example)
    assert any(t == "gcp:container/nodePool:NodePool" for t, _, _ in resources)
    assert gcp_inputs_problems(resources) == []


def test_a_misspelt_nested_key_is_caught() -> None:
    pool = {"cluster": "c", "nodeConfig": {"machinType": "ct5lp-hightpu-4t",
                                           "shieldedInstanceConfig": {"enableSecureBot": True}},
            "placementPolicy": {"type": "COMPACT", "tpuTopology": "4x4"},
            "autoscaling": {"minNodeCount": 0, "maxNodeCount": 4}}
    assert gcp_inputs_problems([("gcp:container/nodePool:NodePool", "p", pool)]) == [
        "gcp:container/nodePool:NodePool p: inputs.nodeConfig.machinType is not an input of "
        "pulumi-gcp's NodePoolArgs",
        "gcp:container/nodePool:NodePool p: inputs.nodeConfig.shieldedInstanceConfig."
        "enableSecureBot is not an input of pulumi-gcp's NodePoolArgs",
    ]
    cluster = {"ipAllocationPolicy": {"clusterSecondaryRangeName": "pods"},
               "masterAuthorizedNetworksConfig": {"cidrBlocks": [{"cidrBlock": "10.0.0.0/8",
                                                                  "displayNam": "x"}]}}
    assert gcp_inputs_problems([("gcp:container/cluster:Cluster", "c", cluster)]) == [
        "gcp:container/cluster:Cluster c: inputs.masterAuthorizedNetworksConfig.cidrBlocks[0]."
        "displayNam is not an input of pulumi-gcp's ClusterArgs",
    ]
