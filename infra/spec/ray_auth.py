"""Ray token authentication (Ray >= 2.52) from this process's side.

Ray reads ``RAY_AUTH_MODE`` and the token (``RAY_AUTH_TOKEN``, else the file at
``RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token``) once per process and caches both; a
process that changes them after its first Ray call must make Ray read them again.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator
from typing import Any

MODE_ENV = "RAY_AUTH_MODE"
TOKEN_ENV = "RAY_AUTH_TOKEN"
TOKEN_PATH_ENV = "RAY_AUTH_TOKEN_PATH"
ENV = (MODE_ENV, TOKEN_ENV, TOKEN_PATH_ENV)


def has_token_in_env() -> bool:
    """A token given explicitly (not the machine-wide ``~/.ray/auth_token``)."""
    return bool(os.environ.get(TOKEN_ENV) or os.environ.get(TOKEN_PATH_ENV))


def reload_from_env() -> None:
    """Make this process's Ray re-read the auth mode and token from the environment."""
    raylet: Any = importlib.import_module("ray._raylet")  # compiled; its stub lacks these
    raylet.Config.initialize("")
    raylet.AuthenticationTokenLoader.instance().reset_cache()


@contextlib.contextmanager
def token_mode() -> Iterator[None]:
    """Token mode for Ray clients made inside (they read it when constructed), then the
    process's previous mode again."""
    before = os.environ.get(MODE_ENV)
    os.environ[MODE_ENV] = "token"
    reload_from_env()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(MODE_ENV, None)
        else:
            os.environ[MODE_ENV] = before
        reload_from_env()
