"""Helpers for the ResourceOptions components receive."""

from __future__ import annotations

import pulumi


def depends_on_of(opts: pulumi.ResourceOptions | None) -> list[pulumi.Resource]:
    """The resources in ``opts.depends_on``, as a list children can extend."""
    deps = opts.depends_on if opts is not None else None
    if deps is None:
        return []
    if isinstance(deps, pulumi.Resource):
        return [deps]
    if isinstance(deps, list | tuple):
        return [d for d in deps if isinstance(d, pulumi.Resource)]
    raise TypeError("depends_on: pass resources (a list), not an Output")
