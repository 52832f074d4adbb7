"""GCS fault tolerance over TLS, as prod reaches Memorystore (``rediss://`` and the server's
CA in ``RAY_REDIS_CA_CERT``): Ray 2.60's GCS keeps its tables in a real Redis through TLS,
a new head reloads them so the hosts stay the same nodes, and a server the CA did not sign
is refused (:func:`raytpu.workloads.gcs_redis.tls_front`)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray")

import redis
from raytpu.facts.catalog import slice_shape
from raytpu.workloads.gcs_redis import GcsRedis, redis_server, tls_front
from raytpu.workloads.head_failover import RestartableHead, host_nodes
from raytpu.workloads.local_cluster import LocalClusterError
from raytpu.workloads.processes import marked

pytestmark = pytest.mark.slow


@pytest.fixture
def scratch() -> Iterator[Path]:
    # A short path: Ray's unix sockets live under it (108-byte limit).
    path = Path(tempfile.mkdtemp(prefix="rtpu-tls-"))
    yield path
    assert not marked({"RAY_TMPDIR": str(path / "c" / "ray")})  # nothing left running
    shutil.rmtree(path, ignore_errors=True)


def test_the_gcs_keeps_its_tables_through_tls_and_a_new_head_keeps_the_hosts(
        scratch: Path) -> None:
    with redis_server(scratch) as (address, password), tls_front(address, scratch) as front:
        gcs = GcsRedis(address=front.address, password=password, ca_cert=front.ca_file)
        assert gcs.head_env()["RAY_REDIS_ADDRESS"].startswith("rediss://127.0.0.1:")
        with RestartableHead(slice_shape("v4-16"), scratch=scratch / "c",
                             connect_driver=False, gcs_redis=gcs) as cluster:
            before = host_nodes(cluster)
            assert front.handshakes > 0
            host, port = address.rsplit(":", 1)
            stored = redis.Redis(host=host, port=int(port), password=password).keys(
                f"RAY{gcs.namespace}@*")
            assert stored  # the GCS's tables, written through the TLS port only
            cluster.kill_head()
            handshakes = front.handshakes
            cluster.restart_head()
            cluster.wait_for_hosts(len(cluster.hosts))
            assert front.handshakes > handshakes  # the new head's GCS, through TLS again
            after = host_nodes(cluster)
    assert set(before[0]) == {"sim-v4-16-s0-w0", "sim-v4-16-s0-w1"}
    assert after == before  # same node ids, same raylet processes


def test_a_server_the_ca_did_not_sign_is_refused(scratch: Path) -> None:
    with redis_server(scratch) as (address, password), tls_front(address, scratch) as front, \
            tls_front(address, scratch / "other") as other:
        # The CA of another server: the GCS's TLS handshake fails, so the head never starts.
        gcs = GcsRedis(address=front.address, password=password, ca_cert=other.ca_file)
        with pytest.raises(LocalClusterError), RestartableHead(
                slice_shape("v4-16"), scratch=scratch / "c", connect_driver=False,
                gcs_redis=gcs):
            pass
        assert front.handshakes == 0
