"""The data module: disjoint, deterministic, resumable windows (no Ray, no torch)."""

from __future__ import annotations

import numpy as np
import pytest
from raytpu.workloads.data import DataError, ShardedBatches


def _batches(
    num_hosts: int, length: int = 100_000, seq: int = 16, batch: int = 4
) -> ShardedBatches:
    corpus = np.arange(length, dtype=np.int64).astype(np.uint8)
    return ShardedBatches(corpus, seq, batch, num_hosts, seed=7)


def test_hosts_never_share_a_window_within_an_epoch() -> None:
    b = _batches(num_hosts=4)
    steps_per_epoch = b.n_windows // b.global_batch
    seen: dict[int, tuple[int, int]] = {}
    for step in range(1, steps_per_epoch + 1):
        for host in range(4):
            for w in b.window_ids(step, host):
                assert int(w) not in seen, f"window {w} of {(step, host)} was {seen[int(w)]}'s"
                seen[int(w)] = (step, host)
    assert len(seen) == steps_per_epoch * b.global_batch


def test_host_batches_differ_and_inputs_do_not_overlap() -> None:
    b = _batches(num_hosts=2, length=50_000, seq=32)
    corpus_positions = np.arange(len(b.corpus))
    for step in (1, 2, 57):
        starts = [set((b.window_ids(step, h) * b.seq_len).tolist()) for h in range(2)]
        assert not starts[0] & starts[1]
        spans = [
            set(np.concatenate([corpus_positions[s : s + b.seq_len] for s in st]).tolist())
            for st in starts
        ]
        assert not spans[0] & spans[1], "the input bytes of two hosts overlap"


def test_batch_is_a_pure_function_of_step_and_host() -> None:
    a, b = _batches(num_hosts=2), _batches(num_hosts=2)
    for step, host in ((5, 1), (1, 0), (5, 1), (300, 0)):  # any order, repeated
        np.testing.assert_array_equal(a.batch(step, host), b.batch(step, host))
    assert not np.array_equal(a.batch(5, 0), a.batch(6, 0))


def test_batch_windows_hold_next_byte_targets() -> None:
    b = _batches(num_hosts=1, seq=16)
    x = b.batch(3, 0)
    assert x.shape == (4, 17) and x.dtype == np.int64
    starts = b.window_ids(3, 0) * 16
    for row, start in zip(x, starts, strict=True):
        np.testing.assert_array_equal(row, b.corpus[start : start + 17])


def test_epochs_wrap_with_a_new_order() -> None:
    b = _batches(num_hosts=2, length=2_000, seq=16, batch=4)  # 124 windows
    per_epoch = b.n_windows // b.global_batch
    first = np.concatenate([b.window_ids(s, h) for s in range(1, per_epoch + 1) for h in (0, 1)])
    later = np.concatenate(
        [b.window_ids(s, h) for s in range(per_epoch + 2, 2 * per_epoch + 1) for h in (0, 1)]
    )
    assert len(set(first.tolist())) == len(first)
    assert len(set(later.tolist())) == len(later)
    assert not np.array_equal(first[: len(later)], later)


def test_too_small_corpus_is_an_error() -> None:
    with pytest.raises(DataError, match="fewer than one global batch"):
        ShardedBatches(np.zeros(100, dtype=np.uint8), 16, 8, 2)
