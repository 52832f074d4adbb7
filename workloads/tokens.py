"""Training tokens for either framework: bytes (the default), text through a tokenizer file
the user supplies, or pre-tokenized ``.npy`` shards; from a local path or ``gs://``. Which
one is what the data path holds (:func:`raytpu.workloads.sources.resolve`).

* Text, no tokenizer: the bytes of each file, followed by a NUL byte (the separator).
* Text, ``--tokenizer tokenizer.json`` (Hugging Face ``tokenizers``) or ``--tokenizer
  x.model`` (``sentencepiece``): each file encoded, followed by the tokenizer's end-of-text
  id. Both packages are in the ``workloads`` extra and imported only here, when asked for.
* ``.npy`` shards: 1-D integer token arrays, concatenated in path order (tokenized ahead
  of time, e.g. by the same tokenizer; no tokenizer is loaded).

The result is one 1-D array; :class:`~raytpu.workloads.data.ShardedBatches` cuts it into
windows the same way whatever the tokens are.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .data import SEPARATOR, DataError, stdlib_dir
from .sources import read_bytes, resolve

MAX_TOKENS = 1 << 26  # per host: the whole stream is held in memory
MAX_BYTES = 64 << 20
_EOS_NAMES = ("<|end_of_text|>", "<|endoftext|>", "</s>", "<eos>")


@dataclass(frozen=True)
class Tokenizer:
    vocab_size: int
    eos_id: int
    encode: Callable[[str], list[int]]


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
        try:
            tok = tokenizers.Tokenizer.from_str(read_bytes(path).decode("utf-8"))
        except Exception as e:  # tokenizers raises a bare Exception for a bad file
            raise DataError(f"--tokenizer {path}: not a 'tokenizers' file: {e}") from None
        eos = next((i for n in _EOS_NAMES if (i := tok.token_to_id(n)) is not None), 0)
        return Tokenizer(tok.get_vocab_size(), eos, lambda text: tok.encode(text).ids)
    if path.endswith(".model"):
        try:
            import sentencepiece
        except ImportError:
            raise _missing(path, "sentencepiece") from None
        try:
            sp = sentencepiece.SentencePieceProcessor(model_proto=read_bytes(path))
        except RuntimeError as e:
            raise DataError(f"--tokenizer {path}: not a 'sentencepiece' model: {e}") from None
        eos = sp.eos_id() if sp.eos_id() >= 0 else 0
        return Tokenizer(sp.get_piece_size(), eos, lambda text: list(sp.encode(text)))
    raise DataError(
        f"--tokenizer {path}: not a tokenizer file (tokenizer.json for 'tokenizers', "
        "*.model for 'sentencepiece')"
    )


def load_corpus(files: Sequence[str], max_bytes: int = MAX_BYTES) -> np.ndarray:
    """The text files as one uint8 array (at most ``max_bytes``, cut at a file boundary)."""
    chunks: list[bytes] = []
    total = 0
    for name in files:
        blob = read_bytes(name)
        if total + len(blob) + 1 > max_bytes and chunks:
            break
        chunks.append(blob + SEPARATOR)
        total += len(blob) + 1
    return np.frombuffer(b"".join(chunks), dtype=np.uint8)


def _load_shards(files: Sequence[str]) -> np.ndarray:
    parts: list[np.ndarray] = []
    total = 0
    for name in files:
        try:
            arr = np.load(io.BytesIO(read_bytes(name)), allow_pickle=False)
        except ValueError as e:  # not an .npy file, or one of pickled objects
            raise DataError(f"{name!r} is not a token shard (a .npy 1-D integer array): "
                            f"{e}") from None
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
            raise DataError(f"{name!r}: a token shard is a 1-D integer array, got "
                            f"{arr.dtype} of shape {arr.shape}")
        parts.append(arr[: MAX_TOKENS - total])
        total += len(parts[-1])
        if total >= MAX_TOKENS:
            break
    return np.concatenate(parts).astype(np.int32)


def _encode_texts(files: Sequence[str], tok: Tokenizer) -> np.ndarray:
    ids: list[int] = []
    for name in files:
        ids += tok.encode(read_bytes(name).decode("utf-8", errors="replace"))
        ids.append(tok.eos_id)
        if len(ids) >= MAX_TOKENS:
            break
    return np.asarray(ids[:MAX_TOKENS], dtype=np.int32)


def load_tokens(data: str | None, tokenizer: str | None, vocab_size: int) -> np.ndarray:
    """The token stream of ``data`` (default: the stdlib sources) for a model of
    ``vocab_size``; :class:`DataError` if the path holds no training data, or ids the model
    cannot embed."""
    source = resolve(data or stdlib_dir(), tokenizer)
    if source.kind == "shards":
        tokens = _load_shards(source.files)
        origin = f"the shards of {source.path!r}"
    elif tokenizer is not None:
        tok = load_tokenizer(tokenizer)
        if tok.vocab_size > vocab_size:
            raise DataError(f"--tokenizer {tokenizer}: {tok.vocab_size} tokens, more than the "
                            f"model's vocabulary of {vocab_size}")
        tokens = _encode_texts(source.files, tok)
        origin = f"--tokenizer {tokenizer}"
    else:
        return load_corpus(source.files)
    if len(tokens) and (int(tokens.min()) < 0 or int(tokens.max()) >= vocab_size):
        raise DataError(f"{origin}: token ids span {int(tokens.min())}..{int(tokens.max())}, "
                        f"outside the model's vocabulary of {vocab_size}")
    return tokens
