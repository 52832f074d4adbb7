"""The ``cluster`` tier: tests that need the rehearsal's binaries (``raytpu rehearse
--build``). Without them they skip and say how to build them; CI sets
``RAYTPU_REQUIRE_CLUSTER=1``, which turns the skip into a failure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from raytpu.rehearse.build import Cache

REQUIRE_ENV = "RAYTPU_REQUIRE_CLUSTER"


@pytest.fixture(scope="session")
def built_cache() -> Cache:
    """The rehearsal cache with every pinned component built."""
    cache = Cache.default()
    missing = cache.missing()
    if missing:
        names = ", ".join(f"{c.name} {c.version}" for c in missing)
        message = (f"cluster tier: {names} not built in {cache.root}; run `raytpu rehearse "
                   f"--build` (about 11 minutes cold) or point $RAYTPU_REHEARSE_CACHE at a "
                   f"built cache")
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{message} ({REQUIRE_ENV}=1)")
        pytest.skip(message)
    return cache


REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def ref_dir() -> Path:
    """The CRD folder the rehearsal installs from: ``$RAYTPU_CRDS``, else ``../shared/ref``
    beside the checkout. Missing: skipped saying so (a failure with RAYTPU_REQUIRE_CRDS=1)."""
    folder = Path(os.environ.get("RAYTPU_CRDS") or REPO / ".." / "shared" / "ref").resolve()
    if not (folder / "kuberay").is_dir():
        message = (f"no CRD folder at {folder} (kuberay/, kueue/, gmp/ with the CRD YAML): "
                   "set $RAYTPU_CRDS to a copy of shared/ref")
        if os.environ.get("RAYTPU_REQUIRE_CRDS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return folder
