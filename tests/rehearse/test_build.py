"""``raytpu rehearse --build``: where the cache is, when it is complete, and that each
built binary is the pinned version (the last needs the binaries: the cluster tier)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from raytpu.facts.versions import REHEARSAL_COMPONENTS
from raytpu.rehearse import build
from raytpu.rehearse.build import Cache


def test_cache_root_follows_the_override_then_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(build.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert Cache.default().root == tmp_path / "xdg" / "raytpu" / "rehearse"
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path / "mine"))
    assert Cache.default().root == tmp_path / "mine"
    assert Cache.default(tmp_path / "flag").root == tmp_path / "flag"


def test_component_folders_are_named_after_component_and_version(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    names = {cache.folder(c).name for c in REHEARSAL_COMPONENTS}
    assert {"etcd-3.6.13", "kubernetes-1.36.3", "kwok-0.8.0", "ray-operator-1.5.0",
            "kueue-0.19.2"} == names
    assert cache.binary("kube-scheduler") == tmp_path / "kubernetes-1.36.3/bin/kube-scheduler"


def _fake_complete(cache: Cache) -> None:
    for c in REHEARSAL_COMPONENTS:
        (cache.folder(c) / "bin").mkdir(parents=True)
        for b in c.binaries:
            path = cache.folder(c) / "bin" / b
            path.write_text("#!/bin/sh\n")
            path.chmod(0o755)
        (cache.folder(c) / build.STAMP).write_text(json.dumps(
            {"module": c.module, "version": c.version}))


def test_a_complete_cache_builds_nothing_and_needs_no_go(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = Cache(tmp_path)
    _fake_complete(cache)
    monkeypatch.setenv("PATH", str(tmp_path / "no-go-here"))
    events: list[tuple[str, str]] = []
    built = build.build(cache, lambda e, c, i, n: events.append((e, c.name)))
    assert all(b.cached for b in built)
    assert events == [("cached", c.name) for c in REHEARSAL_COMPONENTS]


def test_a_stamp_of_another_version_or_a_missing_binary_is_not_complete(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = Cache(tmp_path)
    _fake_complete(cache)
    etcd, k8s = REHEARSAL_COMPONENTS[0], REHEARSAL_COMPONENTS[1]
    (cache.folder(etcd) / build.STAMP).write_text(json.dumps(
        {"module": etcd.module, "version": "v3.5.0"}))
    (cache.folder(k8s) / "bin" / "kube-scheduler").unlink()
    assert [c.name for c in cache.missing()] == ["etcd", "kubernetes"]
    # Something to build and no Go: a sentence that says what to install, before any build.
    monkeypatch.setenv("PATH", str(tmp_path / "no-go-here"))
    with pytest.raises(build.BuildError, match=r"`go` is not on PATH: install Go >= 1\.26"):
        build.build(cache)


def test_only_requirements_at_exactly_v0_0_0_are_staging_modules() -> None:
    gomod = """module k8s.io/kubernetes
require (
\tk8s.io/api v0.0.0
\tk8s.io/utils v0.0.0-20251002143259-bc988d571ff4
\tk8s.io/klog/v2 v2.130.1
\tk8s.io/cri-streaming v0.0.0
)
require k8s.io/apiserver v0.0.0
"""
    assert build.staging_modules(gomod) == ["k8s.io/api", "k8s.io/apiserver",
                                            "k8s.io/cri-streaming"]


def test_each_binary_reports_its_pinned_version(built_cache: Cache) -> None:
    for component, binary in build.binaries(built_cache):
        assert os.access(binary, os.X_OK), binary
        reported = build.reported_version(binary)
        # etcd says "etcd Version: 3.6.13", Kubernetes "Kubernetes v1.36.3".
        assert re.search(rf"\bv?{re.escape(component.version.removeprefix('v'))}\b",
                         reported), (binary.name, reported)
