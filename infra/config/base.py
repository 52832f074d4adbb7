"""The base of every stack-config model and the field types they share.

Kept apart from :mod:`raytpu.config.stack` so that models of one stack key in their own module
(``raytpu:teams`` in :mod:`raytpu.config.teams`) and the whole-stack model can both build on it
without importing each other.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict
from pydantic.alias_generators import to_camel


class ConfigModel(BaseModel):
    # strict: a YAML value of the wrong type is an error, never coerced (`count: true` is not
    # 1, `imageTag: 1.10` is not "1.1", `spot: "no"` is not False).
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True,
        strict=True,
    )


def _quantity(value: Any) -> Any:
    """Kubernetes quantities may be written as YAML numbers (``headCpu: 4``)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


# Kubernetes resource.Quantity: a decimal number and an optional binary-SI (Ki..Ei),
# decimal-SI (n, u, m, k, M, G, T, P, E) or exponent suffix (apimachinery quantity.go).
_QUANTITY = re.compile(r"^(\d+(\.\d*)?|\.\d+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?$")


def _check_quantity(value: str) -> str:
    if not _QUANTITY.match(value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 4, 500m, 16Gi)")
    return value


Quantity = Annotated[str, BeforeValidator(_quantity), AfterValidator(_check_quantity)]
"""A Kubernetes resource quantity (``"4"``, ``"500m"``, ``"16Gi"``); a YAML number is taken
as its decimal string."""
