"""Inputs written in the provider's wire format (camelCase dicts), shared by the bindings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def prune(value: Any) -> Any:
    """``value`` without ``None`` entries in nested dicts: the generated ``*Args`` classes
    never send an unset field, so the provider must not see an explicit null either."""
    if isinstance(value, Mapping):
        return {k: prune(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [prune(v) for v in value]
    return value
