"""What a --data path holds: text or token shards by its contents, from a local path or an
fsspec URL (``memory://`` standing in for ``gs://``: the same code path), and every error
surfacing with the path and what was expected."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path

import fsspec
import numpy as np
import pytest
from fsspec.implementations.memory import MemoryFileSystem
from raytpu.workloads.data import DataError, stdlib_dir
from raytpu.workloads.sources import list_files, resolve
from raytpu.workloads.tokens import load_tokens


@pytest.fixture
def memory_bucket() -> Iterator[str]:
    """A ``memory://`` bucket with a text corpus and a folder of shards."""
    fs = fsspec.filesystem("memory")
    fs.pipe({"/bucket/text/a.txt": b"hello world\n" * 50, "/bucket/text/b.md": b"# doc\n",
             "/bucket/shards/a.npy": _npy([1, 2]), "/bucket/shards/b.npy": _npy([3]),
             "/bucket/shards/README.txt": b"how these were made"})
    yield "memory://bucket"
    fs.rm("/bucket", recursive=True)


def _npy(ids: list[int]) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.array(ids, dtype=np.int32))
    return buf.getvalue()


def test_list_files_matches_patterns_and_skips_site_packages(text_dir: Path) -> None:
    files = [Path(f).relative_to(text_dir).as_posix()
             for f in list_files(str(text_dir), ("*.txt", "*.py"))]
    assert files == ["a.txt", "sub/b.py"]


def test_the_default_corpus_is_the_stdlib_without_site_packages() -> None:
    source = resolve(stdlib_dir())
    assert source.kind == "text"
    assert any(f.endswith("/json/__init__.py") for f in source.files)
    assert not any("site-packages" in f for f in source.files)


def test_text_bytes_are_concatenated_in_sorted_order(text_dir: Path) -> None:
    corpus = load_tokens(str(text_dir), None, vocab_size=256)
    text = (text_dir / "a.txt").read_bytes()
    assert corpus.dtype == np.uint8
    assert bytes(corpus[: len(text)]) == text
    assert corpus[len(text)] == 0  # document separator
    assert len(corpus) == len(text) + (text_dir / "sub" / "b.py").stat().st_size + 2


@pytest.mark.parametrize("name", ["big.txt", "corpus", "notes.log"])
def test_a_text_file_is_text_whatever_its_name(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text("some text\n" * 100)
    source = resolve(str(path))
    assert (source.kind, source.files) == ("text", (str(path),))
    tokens = load_tokens(str(path), None, vocab_size=256)
    assert bytes(tokens) == path.read_bytes() + b"\x00"


def test_a_npy_file_is_a_shard_by_its_magic_bytes(tmp_path: Path) -> None:
    np.save(tmp_path / "t.npy", np.array([4, 5, 6], dtype=np.int16))
    (tmp_path / "t.npy").rename(tmp_path / "tokens.bin")
    assert resolve(str(tmp_path / "tokens.bin")).kind == "shards"
    assert load_tokens(str(tmp_path / "tokens.bin"), None, vocab_size=8).tolist() == [4, 5, 6]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "missing", r"'.*/missing' does not exist"),
        (lambda p: p / "empty", r"'.*/empty' holds no text files and no token shards; "
                                r"expected a text file, a \.npy token shard"),
        (lambda p: p / "binonly", r"'.*/binonly' holds no text files and no token shards"),
        (lambda p: p / "binonly" / "x.bin", r"'.*/x\.bin' is neither text \(it has NUL bytes\) "
                                            r"nor a \.npy token shard; expected a text file"),
    ],
)
def test_what_is_not_training_data_is_named(tmp_path: Path, make: object, message: str) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "binonly").mkdir()
    (tmp_path / "binonly" / "x.bin").write_bytes(b"PK\x03\x04\x00\x00" * 100)
    path = str(make(tmp_path))  # type: ignore[operator]
    with pytest.raises(DataError, match=message):
        resolve(path)
    with pytest.raises(DataError, match=message):
        load_tokens(path, None, vocab_size=256)


def test_a_special_file_is_not_data(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(DataError, match="neither a file nor a folder; expected"):
        resolve(str(fifo))


def test_an_unreadable_file_is_named(monkeypatch: pytest.MonkeyPatch,
                                     memory_bucket: str) -> None:
    def refused(self: MemoryFileSystem, path: str, *a: object, **kw: object) -> object:
        raise PermissionError(f"403 Forbidden: {path}")

    monkeypatch.setattr(MemoryFileSystem, "_open", refused)
    with pytest.raises(DataError, match=r"cannot read 'memory://bucket/text/a\.txt': 403"):
        resolve(f"{memory_bucket}/text/a.txt")


def test_a_npy_named_file_that_is_not_one_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.npy").write_text("not numpy")
    with pytest.raises(DataError, match=r"'.*a\.npy' is not a token shard \(a \.npy 1-D"):
        load_tokens(str(tmp_path), None, vocab_size=256)
    with pytest.raises(DataError, match=r"'.*a\.npy' is named like a token shard but is not "
                                        r"a \.npy file; expected"):
        load_tokens(str(tmp_path / "a.npy"), None, vocab_size=256)


def test_shards_with_a_tokenizer_are_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.array([1, 2], dtype=np.int32))
    for data in (tmp_path, tmp_path / "a.npy"):
        with pytest.raises(DataError, match=r"holds pre-tokenized \.npy shards, and "
                                            r"--tokenizer t\.json would not be used"):
            load_tokens(str(data), "t.json", vocab_size=256)


def test_a_bucket_is_read_through_fsspec(memory_bucket: str) -> None:
    text = resolve(f"{memory_bucket}/text")
    assert text.kind == "text"
    assert text.files == ("memory:///bucket/text/a.txt", "memory:///bucket/text/b.md")
    tokens = load_tokens(f"{memory_bucket}/text", None, vocab_size=256)
    assert bytes(tokens) == b"hello world\n" * 50 + b"\x00# doc\n\x00"
    assert load_tokens(f"{memory_bucket}/shards", None, vocab_size=8).tolist() == [1, 2, 3]
    assert load_tokens(f"{memory_bucket}/text/a.txt", None, vocab_size=256)[-1] == 0


@pytest.mark.parametrize("tokenizer", [None, "t.json"])
def test_a_listing_error_surfaces_instead_of_falling_back_to_text(
    monkeypatch: pytest.MonkeyPatch, memory_bucket: str, tokenizer: str | None
) -> None:
    """A bucket listing refused once (a 403, a flaky network) is an error, never "no shards
    here, train on the text"."""
    real_find = MemoryFileSystem.find
    calls: list[str] = []

    def find_refused_once(self: MemoryFileSystem, path: str, *a: object, **kw: object) -> object:
        calls.append(path)
        if len(calls) == 1:
            raise PermissionError(f"403 Forbidden: {path}")
        return real_find(self, path, *a, **kw)

    monkeypatch.setattr(MemoryFileSystem, "find", find_refused_once)
    with pytest.raises(DataError, match=r"cannot list 'memory://bucket/shards': 403 Forbidden"):
        load_tokens(f"{memory_bucket}/shards", tokenizer, vocab_size=256)


def test_a_nul_byte_anywhere_in_the_sniffed_head_makes_a_file_binary(tmp_path: Path) -> None:
    """The whole first 8 KiB is looked at: a binary format whose first NUL comes late (a
    header of printable bytes) is not trained on as text."""
    path = tmp_path / "late.bin"
    path.write_bytes(b"A" * 8191 + b"\x00" + b"A" * 100)
    with pytest.raises(DataError, match=r"late\.bin' is neither text \(it has NUL bytes\)"):
        resolve(str(path))


def test_a_refused_listing_is_not_taken_for_an_empty_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """fsspec's own walk (filesystems that list folder by folder) returns nothing for a
    folder it cannot list unless told to raise: a 403 would read as "no shards, no text"
    (or, on a bucket with text beside the shards, as text). The folder's listing itself is
    refused here; fsspec 2026.9's walk does not pass ``on_error`` down to subfolders."""
    from fsspec.implementations.local import LocalFileSystem

    np.save(tmp_path / "a.npy", np.array([1, 2], dtype=np.int32))
    root = str(tmp_path)

    def ls_refused(self: LocalFileSystem, path: str, *a: object, **kw: object) -> object:
        raise PermissionError(f"403 Forbidden: {path}")

    monkeypatch.setattr(LocalFileSystem, "ls", ls_refused)
    with pytest.raises(DataError, match=rf"cannot list '{root}': 403 Forbidden"):
        resolve(root)


@pytest.mark.parametrize("method", ["exists", "isfile", "isdir"])
def test_a_refused_lookup_of_the_path_is_named(
    monkeypatch: pytest.MonkeyPatch, memory_bucket: str, method: str
) -> None:
    def refused(self: MemoryFileSystem, path: str, *a: object, **kw: object) -> object:
        raise PermissionError(f"403 Forbidden: {path}")

    with monkeypatch.context() as m:  # undone before the bucket is removed
        m.setattr(MemoryFileSystem, method, refused)
        with pytest.raises(DataError,
                           match=r"cannot read 'memory://bucket/text': 403 Forbidden"):
            resolve(f"{memory_bucket}/text")
