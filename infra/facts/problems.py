"""Problems with an input, as data: which field is at fault and the sentence, so that one
problem reads in the words of whoever wrote the input.

A component refuses its Args with an :class:`ArgsError` (a ``ValueError``) whose
:class:`Problem`s name Args fields by path (``("master_authorized_networks", 0)``); printed
as is they read ``GkeClusterArgs.master_authorized_networks[0]: ...``, the composed
program's words. The stack program renders the same problems with its key map
(:class:`raytpu.config.key_paths.Keys`): ``raytpu:cluster.masterAuthorizedNetworks[0]
.cidrBlock: ...``. No message text is ever parsed back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Ref:
    """Another field a problem's sentence names (``... is below min_nodes (5)``)."""

    path: Path


@dataclass(frozen=True)
class Problem:
    """One reason an input is refused."""

    owner: str
    """What the fields belong to (``GkeClusterArgs``); empty: the bare field paths."""
    path: Path
    """The field at fault, from the owner (``()``: the owner as a whole)."""
    parts: tuple[str | Ref, ...]
    """The sentence: text, and the other fields it names."""
    item: str | None = None
    """The entry of a mapping field at fault (a label's name), as written."""

    def render(self, key: Callable[[Path], str]) -> str:
        """The problem with every field named by ``key``."""
        text = "".join(p if isinstance(p, str) else key(p.path) for p in self.parts)
        where = key(self.path) if self.item is None else f"{key(self.path)}.{self.item}"
        return f"{where}: {text}"

    def __str__(self) -> str:
        return self.render(self.field_name)

    def field_name(self, path: Path) -> str:
        """``Owner.field[0].sub``: how the composed program's words name a field."""
        name = dotted(path)
        if not self.owner:
            return name
        return f"{self.owner}.{name}" if name else self.owner


def dotted(path: Path, sep: Callable[[str], str] = str) -> str:
    """``("a", 0, "b")`` -> ``a[0].b``; ``sep`` spells each name (camelCase for stack keys)."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{sep(part)}" if out else sep(part))
    return out


class ArgsError(ValueError):
    """Args refused: one or more :class:`Problem`; ``str()`` is the Args' words."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(map(str, self.problems)))


def args_error(owner: object, path: str | Path, *parts: str | Ref) -> ArgsError:
    """One problem of ``owner`` (an Args instance or class name) at ``path`` (a field name,
    or a path)."""
    name = owner if isinstance(owner, str) else type(owner).__name__
    return ArgsError([Problem(name, (path,) if isinstance(path, str) else path, parts)])


def ref(*path: str | int) -> Ref:
    return Ref(path)
