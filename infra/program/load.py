"""Reading a stack for any command: the one validation ``raytpu plan``, ``manifests``,
``cost``, ``status`` and ``submit`` (and ``pulumi up``) share, so that they accept and refuse
exactly the same stacks with the same lines.

A stack is valid when its config parses (:func:`raytpu.config.validate.parse_stack_config`'s
rules) *and* every component's Args can be built from it
(:func:`raytpu.program.args.stack_problems`); both kinds of problems are reported together.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from raytpu.config.file import load_stack_file
from raytpu.config.stack import ConfigError, StackConfig
from raytpu.config.validate import semantic_problems, structural_config
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


def validated_config(stack: str, raw: Mapping[str, Any]) -> StackConfig:
    """``raw`` (a stack's flat config map) validated whole. Raises :class:`ConfigError`
    listing every problem: the config's and its components' at once (a component's line is
    left out when it is about a value the config already refused)."""
    cfg = structural_config(stack, raw)  # a config that does not parse has no Args to build
    problems = semantic_problems(cfg)
    try:
        for s in cfg.slices:
            s.shape  # noqa: B018 - the components need every shape
    except CatalogError:  # already a config problem
        raise ConfigError(problems) from None
    keys = {_key(p) for p in problems}
    problems += [p for p in stack_problems(cfg, config_refused=bool(problems))
                 if not _follows_from(p, keys)
                 and p not in problems]
    if problems:
        raise ConfigError(problems)
    return cfg


def load_stack_config(stack: str, stacks_dir: Path | None = None) -> StackConfig:
    """``stacks/Pulumi.<stack>.yaml`` (:func:`raytpu.config.file.load_stack_file`), validated
    by :func:`validated_config`."""
    return validated_config(stack, load_stack_file(stack, stacks_dir))

