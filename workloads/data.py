"""Training data cut into disjoint windows per host.

The corpus is one 1-D token array (:func:`raytpu.workloads.tokens.load_tokens`: by default
the bytes of text files, each followed by a NUL byte, the document separator). It is cut
into ``n_windows`` windows of ``seq_len + 1`` tokens; the last token of a window is the first
of the next, so no target is ever lost.

The batch for ``(step, host)`` is a pure function of the corpus, the seed and those two
numbers: sample ``g = (step - 1) * global_batch + host * batch + i`` is window
``perm_e[g mod n_windows]`` of epoch ``e = g div n_windows``, where ``perm_e`` is a seeded
permutation. So hosts never share a window within an epoch, a resumed run continues the
same stream by step number alone, and nothing needs to be checkpointed for the data.
"""

from __future__ import annotations

import sysconfig
from dataclasses import dataclass, field

import numpy as np

SEPARATOR = b"\x00"


class DataError(ValueError):
    """The data path is missing, unreadable or holds no training data."""


def stdlib_dir() -> str:
    """This Python's standard library sources: the demo corpus that needs no download."""
    return sysconfig.get_paths()["stdlib"]


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
