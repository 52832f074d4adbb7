"""Byte-level training data: a corpus of text files, cut into disjoint windows per host.

The corpus is every matching file under a local folder or a ``gs://`` prefix (read through
fsspec), concatenated in sorted path order, each file followed by a NUL byte (the
document separator). It is cut into ``n_windows`` windows of ``seq_len + 1`` bytes; the
last byte of a window is the first of the next, so no target is ever lost.

The batch for ``(step, host)`` is a pure function of the corpus, the seed and those two
numbers: sample ``g = (step - 1) * global_batch + host * batch + i`` is window
``perm_e[g mod n_windows]`` of epoch ``e = g div n_windows``, where ``perm_e`` is a seeded
permutation. So hosts never share a window within an epoch, a resumed run continues the
same stream by step number alone, and nothing needs to be checkpointed for the data.
"""

from __future__ import annotations

import fnmatch
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

DEFAULT_PATTERNS = ("*.py", "*.txt", "*.md", "*.rst")
SEPARATOR = b"\x00"


class DataError(ValueError):
    """The data path is missing, unreadable or holds no text."""


def stdlib_dir() -> str:
    """This Python's standard library sources: the demo corpus that needs no download."""
    return sysconfig.get_paths()["stdlib"]


def _is_remote(path: str) -> bool:
    return "://" in path


def check_data_path(path: str) -> None:
    """Fail fast on a local path that cannot be read (remote prefixes are checked on load)."""
    if _is_remote(path):
        return
    p = Path(path)
    if not p.exists():
        raise DataError(f"{path!r} does not exist")
    if p.is_file():
        try:
            with p.open("rb") as f:
                f.read(1)
        except OSError as e:
            raise DataError(f"{path!r} is not readable: {e.strerror}") from None
    elif p.is_dir():
        try:
            next(iter(p.iterdir()), None)
        except OSError as e:
            raise DataError(f"{path!r} is not readable: {e.strerror}") from None
    else:
        raise DataError(f"{path!r} is neither a file nor a folder")


def list_files(path: str, patterns: tuple[str, ...] = DEFAULT_PATTERNS) -> list[str]:
    """Every file under ``path`` whose name matches a pattern, sorted (the corpus order).

    The stdlib's ``site-packages`` is skipped so the demo corpus does not depend on
    what is installed.
    """
    import fsspec

    fs, root = fsspec.core.url_to_fs(path)
    if fs.isfile(root):
        return [path]
    out = []
    for name in fs.find(root):
        rel = name[len(root):].lstrip("/")
        parts = rel.split("/")
        if "site-packages" in parts or "dist-packages" in parts or "__pycache__" in parts:
            continue
        if any(fnmatch.fnmatch(parts[-1], p) for p in patterns):
            out.append(fs.unstrip_protocol(name) if _is_remote(path) else name)
    return sorted(out)


def load_corpus(
    path: str | None = None,
    patterns: tuple[str, ...] = DEFAULT_PATTERNS,
    max_bytes: int = 64 << 20,
) -> np.ndarray:
    """The corpus as one uint8 array (at most ``max_bytes``, cut at a file boundary)."""
    import fsspec

    path = path or stdlib_dir()
    try:
        files = list_files(path, patterns)
    except (OSError, ValueError) as e:
        raise DataError(f"cannot list {path!r}: {e}") from None
    if not files:
        raise DataError(f"{path!r} holds no files matching {', '.join(patterns)}")
    chunks: list[bytes] = []
    total = 0
    for name in files:
        try:
            with fsspec.open(name, "rb") as f:
                blob = f.read()
        except OSError as e:
            raise DataError(f"cannot read {name!r}: {e}") from None
        if total + len(blob) + 1 > max_bytes and chunks:
            break
        chunks.append(blob + SEPARATOR)
        total += len(blob) + 1
    return np.frombuffer(b"".join(chunks), dtype=np.uint8)


@dataclass
class ShardedBatches:
    """Deterministic, disjoint batches of ``[batch, seq_len + 1]`` windows per host."""

    corpus: np.ndarray
    seq_len: int
    batch_per_host: int
    num_hosts: int
    seed: int = 0
    _perms: dict[int, np.ndarray] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.n_windows < self.global_batch:
            raise DataError(
                f"corpus of {len(self.corpus)} bytes has {self.n_windows} windows of "
                f"{self.seq_len + 1} bytes, fewer than one global batch ({self.global_batch})"
            )

    @property
    def global_batch(self) -> int:
        return self.batch_per_host * self.num_hosts

    @property
    def n_windows(self) -> int:
        return (len(self.corpus) - 1) // self.seq_len

    def _perm(self, epoch: int) -> np.ndarray:
        if epoch not in self._perms:
            rng = np.random.default_rng([self.seed, epoch])
            self._perms = {epoch: rng.permutation(self.n_windows)}  # keep one epoch cached
        return self._perms[epoch]

    def window_ids(self, step: int, host: int) -> np.ndarray:
        """Window indices of host ``host``'s batch at 1-based ``step``."""
        if step < 1 or not 0 <= host < self.num_hosts:
            raise ValueError(f"step {step} / host {host} out of range")
        first = (step - 1) * self.global_batch + host * self.batch_per_host
        ids = np.empty(self.batch_per_host, dtype=np.int64)
        for i, g in enumerate(range(first, first + self.batch_per_host)):
            epoch, pos = divmod(g, self.n_windows)
            ids[i] = self._perm(epoch)[pos]
        return ids

    def batch(self, step: int, host: int) -> np.ndarray:
        """``[batch, seq_len + 1]`` int64 tokens: inputs are ``[:, :-1]``, targets ``[:, 1:]``."""
        starts = self.window_ids(step, host) * self.seq_len
        idx = starts[:, None] + np.arange(self.seq_len + 1)[None, :]
        return self.corpus[idx].astype(np.int64)
