"""How the workload commands stop on an error they expect, the same in each: exit 2 with
one ``error:`` line per bad flag (nothing was contacted yet), exit 1 with the message when
the stack or the cluster refused."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer
from raytpu.spec.train_options import BadFlags


def exit_bad(problems: list[str]) -> typer.Exit:
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    return typer.Exit(2)


@contextmanager
def bad_flags_or_refused(*refused: type[Exception]) -> Iterator[None]:
    """:class:`BadFlags` exits 2; any of ``refused`` (classes the caller imports lazily,
    such as ``ApplyError``) exits 1 with its message."""
    try:
        yield
    except BadFlags as e:
        raise exit_bad(e.problems) from None
    except refused as e:
        print(f"error: {e}", file=sys.stderr)
        raise typer.Exit(1) from None
