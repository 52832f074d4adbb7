"""One input schema per component: a stack section's keys *are* its component's Args
fields, camelCase.

A section model (:mod:`raytpu.config.stack`) declares the keys a stack file may give; where
a key is an Args field, it has the Args field's name and its default
(:func:`args_default`), so the Args are built from the section by name
(:func:`shared_fields`, :func:`build_args`) with no field copied by hand. What the section
does not hold -- the project, the zone, outputs of other components -- is given with the
stack key a problem with it names (:class:`From`). A refusal comes back in stack keys
(:class:`~raytpu.config.key_paths.Keys`). Where a key is exactly a component's input, its
type is the Args class itself (``raytpu:cluster.systemPool``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel
from raytpu.config.key_paths import Keys

_A = TypeVar("_A")


def args_default(cls: type, name: str) -> Any:
    """The default of Args field ``name`` (a section's default for the same key)."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    raise TypeError(f"{cls.__name__}.{name} has no default")


@dataclass(frozen=True)
class From:
    """An Args field's value from elsewhere in the stack, and the stack key that a problem
    with it names (``From(cfg.project, "gcp:project")``)."""

    value: object
    key: str


def shared_fields(cls: type, section: BaseModel) -> dict[str, Any]:
    """The values of ``section``'s fields that ``cls`` (an Args dataclass) has too: the keys
    of a stack section are the Args fields of the same name, camelCase."""
    names = {f.name for f in dataclasses.fields(cls)} & set(type(section).model_fields)
    return {name: getattr(section, name) for name in sorted(names)}


def build_args(cls: Callable[..., _A], key: str, section: BaseModel | None,
               problems: list[str], **given: object) -> _A:
    """``cls`` from the ``key`` section's same-named fields and ``given`` (plain values or
    :class:`From`); a refusal adds its problems to ``problems`` in stack keys (the section's
    for its own fields, each :class:`From`'s for those) and returns None."""
    values = shared_fields(cls, section) if section is not None else {}  # type: ignore[arg-type]
    values |= {name: g.value if isinstance(g, From) else g for name, g in given.items()}
    keys = Keys(key, {(name,): g.key for name, g in given.items() if isinstance(g, From)})
    try:
        return cls(**values)
    except (ValueError, TypeError) as e:
        # NetworkArgs and GkeClusterArgs share the control plane's range: one line.
        problems += [line for line in keys.lines(e) if line not in problems]
        return None  # type: ignore[return-value]
