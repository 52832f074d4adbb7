"""Pulumi resource URNs, computed as the engine computes them.

``urn:pulumi:<stack>::<project>::<qualified type>::<name>``, where the qualified type is the
parent's qualified type, ``$``, then the resource's own type; children of the root stack
resource have no prefix (pulumi/pulumi ``resource.NewURN``; the Python SDK's
``pulumi.runtime.resource.create_urn`` joins the parent's URN the same way). The mocks'
``MockMonitor.make_urn`` keeps only the parent's last type and prefixes the stack's, so
the offline plan computes URNs here instead: policies report against the same URN a real
``pulumi preview`` shows.
"""

from __future__ import annotations

STACK_TYPE = "pulumi:pulumi:Stack"


def qualified_type(urn: str) -> str:
    """The ``$``-joined type chain of a URN."""
    return urn.split("::")[2]


def resource_urn(stack: str, project: str, type_: str, name: str,
                 parent_urn: str | None = None) -> str:
    """The URN of resource ``name`` of type ``type_`` under ``parent_urn`` (None: the stack)."""
    qualified = type_
    if parent_urn and qualified_type(parent_urn) != STACK_TYPE:
        qualified = f"{qualified_type(parent_urn)}${type_}"
    return f"urn:pulumi:{stack}::{project}::{qualified}::{name}"


def stack_of(urn: str) -> str:
    """The stack name of a URN (``urn:pulumi:dev::raytpu::...`` -> ``dev``)."""
    return urn.split("::")[0].removeprefix("urn:pulumi:")
