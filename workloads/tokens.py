"""Training tokens for either framework: bytes (the default), text through a tokenizer file
the user supplies, or pre-tokenized ``.npy`` shards; from a local path or ``gs://``.

* No tokenizer: the byte corpus of :func:`raytpu.workloads.data.load_corpus`.
* ``--tokenizer tokenizer.json`` (Hugging Face ``tokenizers``) or ``--tokenizer x.model``
  (``sentencepiece``): each text file encoded, followed by the tokenizer's end-of-text id.
  The packages are optional and imported only here, when a tokenizer is asked for.
* A data path holding ``*.npy`` files: 1-D integer token arrays, concatenated in path order
  (tokenized ahead of time, e.g. by the same tokenizer; no tokenizer is loaded).

The result is one 1-D array; :class:`~raytpu.workloads.data.ShardedBatches` cuts it into
windows the same way whatever the tokens are.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .data import DataError, list_files, load_corpus

MAX_TOKENS = 1 << 26  # per host: the whole stream is held in memory
SHARD_PATTERNS = ("*.npy",)
_EOS_NAMES = ("<|end_of_text|>", "<|endoftext|>", "</s>", "<eos>")


@dataclass(frozen=True)
class Tokenizer:
    vocab_size: int
    eos_id: int
    encode: Callable[[str], list[int]]


def _read(path: str) -> bytes:
    import fsspec

    try:
        with fsspec.open(path, "rb") as f:
            blob: bytes = f.read()
    except OSError as e:
        raise DataError(f"cannot read {path!r}: {e}") from None
    return blob


def _missing(path: str, package: str) -> DataError:
    return DataError(
        f"--tokenizer {path}: needs the {package!r} package, which is not installed "
        f"(pip install {package}); or leave --tokenizer out to train on bytes"
    )


def load_tokenizer(path: str) -> Tokenizer:
    """A ``tokenizers`` JSON file or a ``sentencepiece`` model, by file name."""
    if path.endswith(".json"):
        try:
            import tokenizers
        except ImportError:
            raise _missing(path, "tokenizers") from None
        tok = tokenizers.Tokenizer.from_str(_read(path).decode("utf-8"))
        eos = next((i for n in _EOS_NAMES if (i := tok.token_to_id(n)) is not None), 0)
        return Tokenizer(tok.get_vocab_size(), eos, lambda text: tok.encode(text).ids)
    if path.endswith(".model"):
        try:
            import sentencepiece
        except ImportError:
            raise _missing(path, "sentencepiece") from None
        sp = sentencepiece.SentencePieceProcessor(model_proto=_read(path))
        eos = sp.eos_id() if sp.eos_id() >= 0 else 0
        return Tokenizer(sp.get_piece_size(), eos, lambda text: list(sp.encode(text)))
    raise DataError(
        f"--tokenizer {path}: not a tokenizer file (tokenizer.json for 'tokenizers', "
        "*.model for 'sentencepiece')"
    )


def _shards(data: str) -> list[str]:
    try:
        return list_files(data, SHARD_PATTERNS)
    except (OSError, ValueError):
        return []


def _load_shards(files: list[str]) -> np.ndarray:
    parts: list[np.ndarray] = []
    total = 0
    for name in files:
        arr = np.load(io.BytesIO(_read(name)), allow_pickle=False)
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
            raise DataError(f"{name!r}: a token shard is a 1-D integer array, got "
                            f"{arr.dtype} of shape {arr.shape}")
        parts.append(arr[: MAX_TOKENS - total])
        total += len(parts[-1])
        if total >= MAX_TOKENS:
            break
    return np.concatenate(parts).astype(np.int32)


def _encode_texts(data: str | None, tok: Tokenizer) -> np.ndarray:
    from .data import DEFAULT_PATTERNS, stdlib_dir

    root = data or stdlib_dir()
    ids: list[int] = []
    for name in list_files(root, DEFAULT_PATTERNS):
        ids += tok.encode(_read(name).decode("utf-8", errors="replace"))
        ids.append(tok.eos_id)
        if len(ids) >= MAX_TOKENS:
            break
    if not ids:
        raise DataError(f"{root!r} holds no text files")
    return np.asarray(ids[:MAX_TOKENS], dtype=np.int32)


def load_tokens(data: str | None, tokenizer: str | None, vocab_size: int) -> np.ndarray:
    """The token stream for a model of ``vocab_size``; :class:`DataError` if it holds ids
    the model cannot embed."""
    files = _shards(data) if data else []
    if files:
        tokens = _load_shards(files)
        source = f"the shards under {data!r}"
    elif tokenizer is not None:
        tok = load_tokenizer(tokenizer)
        if tok.vocab_size > vocab_size:
            raise DataError(f"--tokenizer {tokenizer}: {tok.vocab_size} tokens, more than the "
                            f"model's vocabulary of {vocab_size}")
        tokens = _encode_texts(data, tok)
        source = f"--tokenizer {tokenizer}"
    else:
        return load_corpus(data)
    if len(tokens) and (int(tokens.min()) < 0 or int(tokens.max()) >= vocab_size):
        raise DataError(f"{source}: token ids span {int(tokens.min())}..{int(tokens.max())}, "
                        f"outside the model's vocabulary of {vocab_size}")
    return tokens
