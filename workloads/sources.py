"""What a ``--data`` path holds, decided once from the path itself (local or any fsspec URL,
``gs://`` included, through one code path):

* a file: a ``.npy`` token shard if it starts with NumPy's magic bytes, text if its first
  8 KiB hold no NUL byte, an error otherwise;
* a folder or prefix: its ``*.npy`` files if it has any (pre-tokenized shards; other files
  beside them, a README, are not data), else its text files (:data:`TEXT_PATTERNS`), else
  an error.

Every listing or read error surfaces as a :class:`~raytpu.workloads.data.DataError` naming
the path: a permission error on a bucket is never taken for "no shards here". Shards are
tokens already, so a ``--tokenizer`` with them is refused rather than silently unused.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any, Literal

from .data import DataError

TEXT_PATTERNS = ("*.py", "*.txt", "*.md", "*.rst")
SHARD_PATTERNS = ("*.npy",)
NPY_MAGIC = b"\x93NUMPY"
SNIFF_BYTES = 8192
_SKIPPED_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__"})
EXPECTED = ("a text file, a .npy token shard (a 1-D integer array), or a folder or gs:// "
            f"prefix of text files ({', '.join(TEXT_PATTERNS)}) or of {SHARD_PATTERNS[0]} "
            "shards")


@dataclass(frozen=True)
class Source:
    """The files of a data path and what they are: ``text`` or token ``shards``."""

    path: str
    kind: Literal["text", "shards"]
    files: tuple[str, ...]


def _fs(path: str) -> tuple[Any, str]:
    import fsspec

    try:
        return fsspec.core.url_to_fs(path)
    except (ImportError, OSError, ValueError) as e:
        raise DataError(f"{path!r} cannot be opened: {e}") from None


def read_bytes(path: str, limit: int | None = None) -> bytes:
    """The file's bytes (its first ``limit`` if given); :class:`DataError` naming it."""
    import fsspec

    try:
        with fsspec.open(path, "rb") as f:
            blob: bytes = f.read() if limit is None else f.read(limit)
    except (OSError, ValueError) as e:
        raise DataError(f"cannot read {path!r}: {e}") from None
    return blob


def list_files(path: str, patterns: tuple[str, ...]) -> list[str]:
    """Every file under the folder ``path`` whose name matches a pattern, sorted (the corpus
    order). ``site-packages`` is skipped so the stdlib corpus does not depend on what is
    installed."""
    fs, root = _fs(path)
    try:
        names = fs.find(root, on_error="raise")  # fsspec's default omits errors
    except (OSError, ValueError) as e:
        raise DataError(f"cannot list {path!r}: {e}") from None
    out = []
    for name in names:
        parts = name[len(root):].lstrip("/").split("/")
        if _SKIPPED_DIRS.isdisjoint(parts) and any(
            fnmatch.fnmatch(parts[-1], p) for p in patterns
        ):
            out.append(fs.unstrip_protocol(name) if "://" in path else name)
    return sorted(out)


def _file_kind(path: str) -> Literal["text", "shards"]:
    head = read_bytes(path, SNIFF_BYTES)
    if head.startswith(NPY_MAGIC):
        return "shards"
    if fnmatch.fnmatch(path, SHARD_PATTERNS[0]):
        raise DataError(f"{path!r} is named like a token shard but is not a .npy file; "
                        f"expected {EXPECTED}")
    if b"\x00" in head:
        raise DataError(f"{path!r} is neither text (it has NUL bytes) nor a .npy token "
                        f"shard; expected {EXPECTED}")
    return "text"


def resolve(path: str, tokenizer: str | None = None) -> Source:
    """What ``path`` holds; :class:`DataError` (the path and what was expected) for anything
    that is not training data, or for shards with a ``tokenizer``."""
    fs, root = _fs(path)
    try:
        exists, is_file, is_dir = fs.exists(root), fs.isfile(root), fs.isdir(root)
    except (OSError, ValueError) as e:
        raise DataError(f"cannot read {path!r}: {e}") from None
    if not exists:
        raise DataError(f"{path!r} does not exist")
    if is_file:
        source = Source(path, _file_kind(path), (path,))
    elif is_dir:
        files = list_files(path, (*SHARD_PATTERNS, *TEXT_PATTERNS))
        shards = [f for f in files if fnmatch.fnmatch(f, SHARD_PATTERNS[0])]
        if shards:
            source = Source(path, "shards", tuple(shards))
        elif files:
            source = Source(path, "text", tuple(files))
        else:
            raise DataError(f"{path!r} holds no text files and no token shards; "
                            f"expected {EXPECTED}")
    else:
        raise DataError(f"{path!r} is neither a file nor a folder; expected {EXPECTED}")
    if source.kind == "shards" and tokenizer is not None:
        raise DataError(f"{path!r} holds pre-tokenized .npy shards, and --tokenizer "
                        f"{tokenizer} would not be used: leave out --tokenizer, or give "
                        "--data text to tokenize")
    return source
