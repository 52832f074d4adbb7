"""How the plan shows values it cannot or must not show: secrets and provider-computed
(unknown) values, and the property paths that name them.

The recorded inputs keep Pulumi's wire forms: a secret is ``{SECRET_KEY: SECRET_SIG,
"value": ...}`` and a value the provider computes on create is the ``UNKNOWN`` sentinel, as
``pulumi preview`` and the policy SDK's ``unknown_checking_proxy`` see them. For people
and for ``--json`` a secret becomes ``[secret]`` (unless secrets are asked for) and an
unknown becomes ``(known after up)`` in text, ``null`` plus its path in JSON, as
``pulumi preview`` prints ``[secret]`` and ``output<string>``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pulumi.output import Unknown
from pulumi.runtime.rpc import UNKNOWN

# pulumi.runtime.rpc's wire signature of a secret value.
SECRET_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"

SECRET_TEXT = "[secret]"
UNKNOWN_TEXT = "(known after up)"

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(SECRET_KEY) == SECRET_SIG


def is_unknown(value: Any) -> bool:
    return isinstance(value, str) and value == UNKNOWN


def join_path(base: str, key: str | int) -> str:
    """``spec.template``, ``containers[0]``, ``labels["kubernetes.io/os"]``;
    after ``input:`` (a path inside a JSON string input) no dot."""
    if isinstance(key, int):
        return f"{base}[{key}]"
    if _PLAIN_KEY.match(key):
        return f"{base}.{key}" if base and not base.endswith(":") else f"{base}{key}"
    return f'{base}["{key}"]'


def reveal(value: Any) -> Any:
    """``value`` with secrets unwrapped (unknowns stay the sentinel)."""
    if is_secret(value):
        return reveal(value["value"])
    if isinstance(value, dict):
        return {k: reveal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [reveal(v) for v in value]
    return value


def presented(value: Any, path: str, unknown: list[str], show_secrets: bool = False) -> Any:
    """``value`` for ``--json``: secrets masked (or unwrapped), unknowns ``None`` with their
    path appended to ``unknown``."""
    if is_secret(value):
        if not show_secrets:
            return SECRET_TEXT
        return presented(value["value"], path, unknown, show_secrets)
    if is_unknown(value):
        unknown.append(path)
        return None
    if isinstance(value, dict):
        return {k: presented(v, join_path(path, k), unknown, show_secrets)
                for k, v in value.items()}
    if isinstance(value, list):
        return [presented(v, join_path(path, i), unknown, show_secrets)
                for i, v in enumerate(value)]
    return value


def _as_text(value: Any, show_secrets: bool) -> Any:
    if is_secret(value):
        return _as_text(value["value"], show_secrets) if show_secrets else SECRET_TEXT
    if is_unknown(value):
        return UNKNOWN_TEXT
    if isinstance(value, dict):
        return {k: _as_text(v, show_secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_text(v, show_secrets) for v in value]
    return value


def shown(value: Any, show_secrets: bool = False) -> str:
    """One value as text: ``[secret]``, ``(known after up)``, the value, or compact JSON."""
    text = _as_text(value, show_secrets)
    if isinstance(text, dict | list):
        return json.dumps(text, separators=(",", ":"))
    return str(text)


def plain(value: Any) -> Any:
    """Protobuf Structs turn every number into a float: give integers back. An unknown
    (``pulumi.output.Unknown`` in a preview's inputs) becomes the wire sentinel."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Unknown):
        return UNKNOWN
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value
