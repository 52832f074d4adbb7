"""Resource inputs as the Pulumi providers receive them (camelCase dicts): the bindings in
``gcp_resources`` and ``k8s_objects`` send them through :func:`drop_unset`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def drop_unset(value: Any) -> Any:
    """``value`` without ``None`` entries in nested dicts: the generated ``*Args`` classes
    never send an unset field, so the provider must not see an explicit null either."""
    if isinstance(value, Mapping):
        return {k: drop_unset(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [drop_unset(v) for v in value]
    return value
