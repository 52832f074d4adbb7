"""Bad input for every key of every stack model, derived from the models themselves.

For each field (found by walking ``StackConfig``), values of the wrong YAML type and values
outside its range must be refused with a problem line that starts with the field's stack
key path and shows the value. A key added to any model later is covered without editing
this file. Then the file level: YAML syntax errors, invalid UTF-8, duplicate keys, a bad
``gcp:project``, through the real command line (exit 2, file and line, no traceback).
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import annotated_types
import pytest
import yaml
from pydantic import BaseModel, BeforeValidator
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo
from raytpu.config.stack import ConfigError, StackConfig
from raytpu.config.validate import parse_stack_config

ROOT = Path(__file__).resolve().parents[1]
BASE: dict[str, Any] = {
    "gcp:project": "acme-ml",
    "raytpu:zone": "us-west4-a",
    "raytpu:slices": [{"name": "train", "tpu": "v5litepod-4"}],
}
SLICE = BASE["raytpu:slices"][0]


def _unwrap(ann: Any) -> Any:
    """``X | None`` -> ``X``."""
    if get_origin(ann) in (Union, types.UnionType):
        args = [a for a in get_args(ann) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return ann


def _is_model(ann: Any) -> bool:
    """A stack model, or a component's Args dataclass a stack key is made of."""
    return isinstance(ann, type) and (issubclass(ann, BaseModel) or dataclasses.is_dataclass(ann))


def _fields(model: type) -> Iterator[tuple[str, Any, FieldInfo]]:
    """(stack key, annotation, field info) of a model's or an Args dataclass's fields."""
    if dataclasses.is_dataclass(model):
        hints = get_type_hints(model)
        for f in dataclasses.fields(model):
            yield to_camel(f.name), hints[f.name], FieldInfo()
        return
    for name, f in model.model_fields.items():  # type: ignore[attr-defined]
        if name != "stack":  # the stack's name, not a config key
            yield f.alias or name, f.annotation, f


def walk(model: type, prefix: tuple[str | int, ...] = ()
         ) -> Iterator[tuple[tuple[str | int, ...], Any, FieldInfo]]:
    """Every field of ``model`` and its sub-models: (key path, annotation, field info)."""
    for key, annotation, f in _fields(model):
        path = (*prefix, key)
        ann = _unwrap(annotation)
        yield path, ann, f
        if _is_model(ann):
            yield from walk(ann, path)
        elif get_origin(ann) in (list, tuple) and _is_model(get_args(ann)[0]):
            yield from walk(get_args(ann)[0], (*path, 0))


def dotted(path: tuple[str | int, ...]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


def _bounds(f: FieldInfo, ann: Any) -> list[Any]:
    """Annotated-types bounds of a field or of its type (``Annotated[int, Field(ge=0)]``)."""
    meta = list(f.metadata)
    for a in get_args(ann)[1:] if get_origin(ann) is not None else ():
        meta += getattr(a, "metadata", [])
    return meta


def bad_values(ann: Any, f: FieldInfo) -> list[tuple[Any, str]]:
    """(value, path suffix where the error is reported) that a field must refuse."""
    origin = get_origin(ann)
    if ann is bool:
        return [(1, ""), ("yes", ""), ("true", "")]
    if ann is int:
        out: list[tuple[Any, str]] = [(True, ""), ("3", ""), (1.5, "")]
        for m in _bounds(f, ann):
            if isinstance(m, annotated_types.Ge):
                out.append((int(m.ge) - 1, ""))  # type: ignore[call-overload]
            if isinstance(m, annotated_types.Gt):
                out.append((int(m.gt), ""))  # type: ignore[call-overload]
        return out
    if ann is float:
        out = [(True, ""), ("0.5", "")]
        for m in _bounds(f, ann):
            if isinstance(m, annotated_types.Gt):
                out.append((m.gt, ""))
        return out
    if ann is str and any(isinstance(m, BeforeValidator) for m in f.metadata):
        return [(True, ""), (["x"], "")]  # a Quantity: YAML numbers are fine, booleans not
    if ann is str:
        return [(5, ""), (True, ""), (["x"], "")]
    if origin is Literal:
        return [("no-such-choice", ""), (1, "")]
    if _is_model(ann):
        return [("a-string", ""), ({"noSuchKey": 1}, ".noSuchKey")]
    if origin in (list, tuple):
        out = [("a-string", "")]
        item = get_args(ann)[0]
        if item is str:
            out.append(([5], "[0]"))
        if any(isinstance(m, annotated_types.MinLen) for m in f.metadata):
            out.append(([], ""))
        return out
    if origin is dict:
        out = [("a-string", ""), ({"k": True}, ".k")]
        value_ann = get_args(ann)[1]
        if get_origin(value_ann) is not None:  # Annotated[int, Field(ge=...)]
            for m in getattr(get_args(value_ann)[1], "metadata", []):
                if isinstance(m, annotated_types.Ge):
                    out.append(({"k": int(m.ge) - 1}, ".k"))  # type: ignore[call-overload]
        if any(isinstance(m, annotated_types.MinLen) for m in f.metadata):
            out.append(({}, ""))
        return out
    raise AssertionError(f"no bad values for {ann!r}: extend bad_values() for the new type")


def place(path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    """BASE with ``value`` at ``path`` (list items start from a valid slice, else empty)."""
    raw: dict[str, Any] = {k: (list(v) if isinstance(v, list) else v) for k, v in BASE.items()}
    node: Any = raw
    for i, part in enumerate(path[:-1]):
        nxt = path[i + 1]
        if isinstance(part, int):
            while len(node) <= part:
                node.append(dict(SLICE) if path[0] == "raytpu:slices" else {})
            node[part] = dict(node[part])
            node = node[part]
            continue
        child = node.get(part)
        child = (list(child) if isinstance(nxt, int) else dict(child)) if child else (
            [] if isinstance(nxt, int) else {})
        node[part] = child
        node = child
    last = path[-1]
    if isinstance(last, int):
        node.append(value)
    else:
        node[last] = value
    return raw


CASES = [
    pytest.param(path, value, suffix, id=f"{dotted(path)}{suffix}={value!r}")
    for path, ann, f in walk(StackConfig)
    for value, suffix in bad_values(ann, f)
]


def test_the_table_covers_every_model() -> None:
    keys = {dotted(p) for p, _, _ in walk(StackConfig)}
    # Spot checks that the walk reaches nested, listed and optional models.
    assert {"gcp:project", "raytpu:slices[0].autoscaling.min", "raytpu:cluster.systemPool.minNodes",
            "raytpu:cluster.masterAuthorizedNetworks[0].cidrBlock",
            "raytpu:network.existing.podsRangeName", "raytpu:ray.headCpu",
            "raytpu:storage.noncurrentVersions", "raytpu:project.enableApis"} <= keys
    assert len(CASES) > 150


@pytest.mark.parametrize(("path", "value", "suffix"), CASES)
def test_every_field_refuses_bad_types_and_ranges(
    path: tuple[str | int, ...], value: Any, suffix: str
) -> None:
    key = dotted(path) + suffix
    with pytest.raises(ConfigError) as info:
        parse_stack_config("t", place(path, value))
    mine = [p for p in info.value.problems if p.startswith(f"{key}:")]
    assert mine, (key, info.value.problems)
    shown = value if not suffix or suffix.startswith(".noSuch") else (
        value[0] if isinstance(value, list) else next(iter(value.values())))
    if not suffix.startswith(".noSuch"):
        assert repr(shown) in mine[0], mine


@pytest.mark.parametrize(("value", "ok"), [
    ("acme-ml", True), ("a" * 30, True), ("my-project-123", True),
    ("acme", False), ("a" * 31, False), ("1acme-ml", False), ("acme-ml-", False),
    ("Acme-ML", False), ("acme_ml", False), ("acme.ml", False),
])
def test_gcp_project_id_rules(value: str, ok: bool) -> None:
    raw = {**BASE, "gcp:project": value}
    if ok:
        assert parse_stack_config("t", raw).project == value
        return
    with pytest.raises(ConfigError) as info:
        parse_stack_config("t", raw)
    assert any(p.startswith(f"gcp:project: {value!r} is not a GCP project ID")
               for p in info.value.problems), info.value.problems


@pytest.mark.parametrize(("name", "ok"), [("a" * 40, True), ("a" * 41, False)])
def test_one_cluster_name_limit(name: str, ok: bool) -> None:
    from raytpu.components import GkeClusterArgs
    from raytpu.facts.names import CLUSTER_NAME_MAX_LEN

    assert CLUSTER_NAME_MAX_LEN == 40  # GKE: "up to 40 lowercase letters, numbers, and hyphens"
    raw = {**BASE, "raytpu:cluster": {"name": name}}
    args = dict(project="acme-ml", location="us-west4-a", cluster_name=name, network="n",
                subnetwork="s", pods_range_name="p", services_range_name="v")
    if ok:
        parse_stack_config("t", raw)
        GkeClusterArgs(**args)  # type: ignore[arg-type]
        return
    with pytest.raises(ConfigError, match=r"raytpu:cluster\.name: .* at most 40"):
        parse_stack_config("t", raw)
    with pytest.raises(ValueError, match="at most 40"):
        GkeClusterArgs(**args)  # type: ignore[arg-type]


def test_quantities_take_yaml_numbers() -> None:
    cfg = parse_stack_config("t", {**BASE, "raytpu:ray": {"headCpu": 4, "headMemory": "8Gi"}})
    assert cfg.ray.head_cpu == "4"


# -- The stack file, through the real command line ---------------------------------------


def _plan(tmp_path: Path, body: bytes, *cmd: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "Pulumi.bad.yaml").write_bytes(body)
    args = cmd or ("plan", "--json")
    return subprocess.run(
        [sys.executable, "-m", "raytpu", *args, "--stack", "bad", "--stacks-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )


def _good() -> bytes:
    return yaml.safe_dump({"config": BASE}).encode()


@pytest.mark.parametrize(("body", "where", "what"), [
    (b"config:\n  gcp:project: acme-ml\n  raytpu:zone: [us-west4-a\n", ":4:1:", "not valid YAML"),
    (b"config:\n  gcp:project: acme\xff-ml\n", ":2:20:", "not valid UTF-8"),
    (b"config:\n  gcp:project: a-ml\n  raytpu:zone: x\n  gcp:project: b-ml\n", ":4:3:",
     "'gcp:project' is given twice"),
    (b"- config\n", "", "must be a mapping"),
])
def test_broken_stack_file_exits_2_naming_file_and_line(
    tmp_path: Path, body: bytes, where: str, what: str
) -> None:
    proc = _plan(tmp_path, body)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    line = proc.stderr.strip()
    assert line.startswith(f"error: {tmp_path / 'Pulumi.bad.yaml'}{where}"), line
    assert what in line


def test_submit_reads_the_stack_file_with_the_same_loader(tmp_path: Path) -> None:
    proc = _plan(tmp_path, b"config:\n  gcp:project: acme\xff-ml\n", "submit", "--dry-run")
    assert proc.returncode == 2, proc.stderr
    assert "Pulumi.bad.yaml:2:20: not valid UTF-8" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_type_error_in_stack_file_exits_2_with_key_and_value(tmp_path: Path) -> None:
    body = _good().replace(b"name: train", b"name: train\n    count: true")
    proc = _plan(tmp_path, body)
    assert proc.returncode == 2, proc.stderr
    assert "error: raytpu:slices[0].count: True is not valid" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


@pytest.mark.parametrize(("section", "key", "value", "expected"), [
    ("raytpu:ray", "headCpu", "lots", "raytpu:ray.headCpu: 'lots' is not a Kubernetes quantity"),
    ("raytpu:ray", "headMemory", "16 GB", "raytpu:ray.headMemory: '16 GB' is not a Kubernetes"),
    ("raytpu:kuberay", "version", "latest", "raytpu:kuberay.version: 'latest' is not a version"),
    ("raytpu:kuberay", "webhookVersion", "x", "raytpu:kuberay.webhookVersion: 'x' is not a"),
    ("raytpu:kuberay", "certManagerVersion", "one", "raytpu:kuberay.certManagerVersion: 'one'"),
    ("raytpu:kuberay", "namespace", "Kube_Ray", "raytpu:kuberay.namespace: 'Kube_Ray' is not a"),
    ("raytpu:ray", "version", "2.x", "raytpu:ray.version: '2.x' is not a version"),
    ("raytpu:cluster", "minMasterVersion", "new", "raytpu:cluster.minMasterVersion: 'new' is not"),
])
def test_strings_of_a_fixed_shape(section: str, key: str, value: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_stack_config("t", {**BASE, section: {key: value}})
    assert [p for p in info.value.problems if p.startswith(expected)], info.value.problems


# Parsed as quantities; each small enough for the default system pool (the fit check).
@pytest.mark.parametrize("value", ["4", "500m", "16Gi", "1.5", "2e3", "0.01Ti"])
def test_valid_quantities(value: str) -> None:
    assert parse_stack_config("t", {**BASE, "raytpu:ray": {"headMemory": value}})
