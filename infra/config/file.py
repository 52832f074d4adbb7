"""Reading ``stacks/Pulumi.<stack>.yaml``: the one loader ``raytpu plan``/``manifests`` and
``raytpu submit`` share.

Every problem with the file itself (missing, not UTF-8, not YAML, a key given twice, not
the shape Pulumi expects) is a :class:`StackFileError` naming the file and, where there is
one, the line and column: a config error (exit 2), never a traceback.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from raytpu.config.stack import ConfigError


class StackFileError(ConfigError):
    """The stack file cannot be read as a Pulumi stack file."""


def default_stacks_dir() -> Path:
    return Path(os.environ.get("RAYTPU_STACKS_DIR", "stacks"))


def stack_file_path(stack: str, stacks_dir: Path | None = None) -> Path:
    return (stacks_dir or default_stacks_dir()) / f"Pulumi.{stack}.yaml"


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last one
    silently: a second ``raytpu:cluster:`` block would drop the first).

    Scalars resolve as YAML 1.1 (``yes``/``on`` are booleans), as the Pulumi CLI's stack
    loader (gopkg.in/yaml.v2, pulumi/pulumi sdk/go/common/encoding/marshal.go) reads them."""


def _mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                f"while reading the mapping that starts here (line {node.start_mark.line + 1})",
                node.start_mark, f"key {key!r} is given twice", key_node.start_mark,
            )
        seen[key] = key_node
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _at(path: Path, mark: Any) -> str:
    return f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)


def load_stack_file(stack: str, stacks_dir: Path | None = None) -> dict[str, Any]:
    """The flat ``config:`` map of ``<stacks_dir>/Pulumi.<stack>.yaml``.

    Raises :class:`StackFileError` (one problem line) for anything but a readable mapping.
    """
    path = stack_file_path(stack, stacks_dir)
    folder = path.parent
    if not path.is_file():
        known = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in folder.glob("Pulumi.*.yaml"))
        raise StackFileError([
            f"--stack: {stack!r} has no stack file {path}; "
            f"known stacks: {', '.join(known) if known else f'none in {folder}'}"
        ])
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise StackFileError([
            f"{path}:{line}:{column}: not valid UTF-8 (byte 0x{data[e.start]:02x}); "
            "stack files are UTF-8 text"
        ]) from None
    try:
        doc = yaml.load(text, Loader=_Loader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        what = "; ".join(str(x) for x in (e.problem, e.context) if x)
        raise StackFileError([f"{_at(path, mark)}: not valid YAML: {what}"]) from None
    except yaml.YAMLError as e:
        raise StackFileError([f"{path}: not valid YAML: {e}"]) from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise StackFileError([
            f"{path}: must be a mapping with a 'config:' key, not a {type(doc).__name__}"
        ])
    config = doc.get("config")
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise StackFileError([
            f"{path}: 'config' must be a mapping of keys (gcp:project, raytpu:...), not a "
            f"{type(config).__name__}"
        ])
    bad_keys = [k for k in config if not isinstance(k, str)]
    if bad_keys:
        raise StackFileError([f"{path}: config key {bad_keys[0]!r} must be a string"])
    return config
