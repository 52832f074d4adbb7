"""The deferred values an Args field may take: ``Input[str]`` is a plain value or another
resource's output (``pulumi.Input``), ``Resource`` a resource to depend on,
``StackReference`` another stack whose outputs an Args reads.

Type checkers see Pulumi's own types; at run time these are inert stand-ins, so the spec
layer never loads Pulumi (a stack's configuration is parsed and checked without it).
Args fields of these types are never validated by pydantic (no stack key is one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pulumi import Input as Input
    from pulumi import Resource as Resource
    from pulumi import StackReference as StackReference
else:

    class Input:
        """``Input[T]`` at run time: subscriptable, and never instantiated."""

        def __class_getitem__(cls, item: Any) -> Any:
            return Any

    Resource = Any
    StackReference = Any
