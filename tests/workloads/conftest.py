"""Shared fixtures of the workloads tests.

The trainer tests need the ``workloads`` extra (torch, torch_xla, ray); on the core
install they are skipped per module with ``pytest.importorskip``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def text_dir(tmp_path: Path) -> Path:
    """A small corpus: a few text files, a binary file and a site-packages to skip."""
    root = tmp_path / "corpus"
    (root / "sub").mkdir(parents=True)
    (root / "site-packages").mkdir()
    (root / "a.txt").write_text("hello world\n" * 400)
    (root / "sub" / "b.py").write_text("def f(x):\n    return x + 1\n" * 300)
    (root / "sub" / "c.bin").write_bytes(bytes(range(256)) * 10)
    (root / "site-packages" / "skipped.py").write_text("import nothing\n" * 100)
    return root


@pytest.fixture
def cpu_xla(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """XLA on the CPU, one intra-op thread (as the simulated hosts run)."""
    monkeypatch.setenv("PJRT_DEVICE", "CPU")
    yield
    os.environ.pop("XLA_PERSISTENT_CACHE_PATH", None)
