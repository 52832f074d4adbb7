"""Stack key paths of component problems: ``NetworkArgs.pods_cidr`` is
``raytpu:network.podsCidr`` to whoever wrote the stack file.

Components refuse their Args with :class:`~raytpu.facts.problems.ArgsError`, whose problems
name Args fields by path (they are used from other Pulumi programs too, where the field is
the right name). Whoever builds Args from a stack says where each field came from with a
:class:`Keys` -- the section the Args are made of, and the fields that come from elsewhere --
and renders the same problems in stack keys. The one mechanism for every component; no
message text is parsed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic.alias_generators import to_camel
from raytpu.facts.problems import ArgsError, Path, Problem, dotted

Pattern = tuple[str | type[int], ...]
"""An Args field path; ``int`` stands for any index (``("worker_groups", int)``)."""


def _match(pattern: Pattern, path: Path) -> list[int] | None:
    """The indexes ``pattern``'s ``int`` parts matched, or None."""
    if len(pattern) > len(path):
        return None
    found: list[int] = []
    for want, got in zip(pattern, path, strict=False):
        if want is int:
            if not isinstance(got, int):
                return None
            found.append(got)
        elif want != got:
            return None
    return found


def camel_path(path: Path) -> str:
    """``("master_authorized_networks", 0, "cidr_block")`` -> ``masterAuthorizedNetworks[0]
    .cidrBlock`` (the stack keys' aliases of the Args fields)."""
    return dotted(path, to_camel)


@dataclass(frozen=True)
class Keys:
    """Where one Args' fields come from in the stack: ``base.<camelCase field>``, except the
    ``fields`` given (``{("project",): "gcp:project", ("worker_groups", int):
    "raytpu:slices[{0}]"}``; the rest of a longer path is appended in camelCase)."""

    base: str
    """The section the Args are made of (``raytpu:network``); the whole Args' problems
    (an empty path) are keyed here."""
    fields: Mapping[Pattern, str] = field(default_factory=dict)

    def key(self, path: Path) -> str:
        best: tuple[int, str, list[int]] | None = None
        for pattern, template in self.fields.items():
            found = _match(pattern, path)
            if found is not None and (best is None or len(pattern) > best[0]):
                best = (len(pattern), template, found)
        if best is None:
            rest = camel_path(path)
            return f"{self.base}.{rest}" if rest else self.base
        n, template, found = best
        rest = camel_path(path[n:])
        head = template.format(*found)
        return f"{head}{'' if not rest or rest.startswith('[') else '.'}{rest}"

    def line(self, problem: Problem) -> str:
        return problem.render(self.key)

    def lines(self, error: Exception) -> list[str]:
        """The stack's lines for an error building the Args: each problem in stack keys; an
        error that names no field (a plain ``ValueError``) is the section's."""
        if isinstance(error, ArgsError):
            return [self.line(p) for p in error.problems]
        return [f"{self.base}: {error}"]
