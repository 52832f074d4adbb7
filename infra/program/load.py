"""Reading a stack for any command: the one validation ``raytpu plan``, ``manifests``,
``cost``, ``status`` and ``submit`` (and ``pulumi up``) share, so that they accept and refuse
exactly the same stacks with the same lines.

A stack is valid when its config parses (:func:`raytpu.config.validate.parse_stack_config`'s
rules) *and* every component's Args can be built from it
(:func:`raytpu.program.args.stack_problems`); both kinds of problems are reported together.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from raytpu.config.file import load_stack_file
from raytpu.config.stack import ConfigError, StackConfig
from raytpu.config.validate import StructureError, semantic_problems, structural_config
from raytpu.facts.catalog import CatalogError
from raytpu.program.args import stack_problems


def _key(problem: str) -> str:
    return problem.partition(": ")[0]


def _follows_from(problem: str, keys: set[str]) -> bool:
    """Whether a component's line is about a value already reported bad: its key, a key
    inside its key's section, or a key its sentence names has a config problem."""
    key = _key(problem)
    return any(k == key or k.startswith((f"{key}.", f"{key}["))
               or re.search(rf"(?<![\w.:\[]){re.escape(k)}(?![\w.\[])", problem)
               for k in keys)


def _without(raw: Mapping[str, Any], locs: list[tuple[int | str, ...]]) -> dict[str, Any]:
    """``raw`` without the keys at ``locs`` (their defaults apply instead)."""
    out: dict[str, Any] = copy.deepcopy(dict(raw))
    for loc in locs:
        node: Any = out
        for part in loc[:-1]:
            try:
                node = node[part]
            except (KeyError, IndexError, TypeError):
                node = None
                break
        if isinstance(node, dict):
            node.pop(loc[-1], None)
    return out


def _around_refused_keys(stack: str, raw: Mapping[str, Any], error: StructureError
                         ) -> list[str]:
    """The problems of the rest of the stack: parsed again without the keys the models
    refused (when that parses), checked, and every line about a refused key or one inside
    it left out (they say it already)."""
    try:
        cfg = structural_config(stack, _without(raw, error.locs))
    except ConfigError:  # a required key is at fault: nothing to check around it
        return []
    refused = {_path(loc) for loc in error.locs}
    return [p for p in _problems(cfg) if not _follows_from(p, refused)
            and not any(re.search(rf"(?<![\w:]){re.escape(k)}(?=[.\[]|\b)", p)
                        for k in refused)]


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _problems(cfg: StackConfig) -> list[str]:
    """A parsed config's problems: its rules', then its components' (those about a value
    the config already refused left out)."""
    problems = semantic_problems(cfg)
    try:
        for s in cfg.slices:
            s.shape  # noqa: B018 - the components need every shape
    except CatalogError:  # already a config problem
        return problems
    keys = {_key(p) for p in problems}
    return problems + [p for p in stack_problems(cfg, config_refused=bool(problems))
                       if not _follows_from(p, keys) and p not in problems]


def validated_config(stack: str, raw: Mapping[str, Any]) -> StackConfig:
    """``raw`` (a stack's flat config map) validated whole. Raises :class:`ConfigError`
    listing every problem at once: the models' (types, unknown keys, the components' own
    Args), the config's rules and the components' (a line about a value already refused is
    left out)."""
    try:
        cfg = structural_config(stack, raw)
    except StructureError as e:
        raise ConfigError(e.problems + [p for p in _around_refused_keys(stack, raw, e)
                                        if p not in e.problems]) from None
    problems = _problems(cfg)
    if problems:
        raise ConfigError(problems)
    return cfg


def load_stack_config(stack: str, stacks_dir: Path | None = None) -> StackConfig:
    """``stacks/Pulumi.<stack>.yaml`` (:func:`raytpu.config.file.load_stack_file`), validated
    by :func:`validated_config`."""
    return validated_config(stack, load_stack_file(stack, stacks_dir))

