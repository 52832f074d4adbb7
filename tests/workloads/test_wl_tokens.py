"""Training tokens: bytes by default, pre-tokenized .npy shards, or a tokenizer file."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from raytpu.workloads.data import DataError
from raytpu.workloads.tokens import load_tokenizer, load_tokens


def test_without_a_tokenizer_text_is_bytes(text_dir: Path) -> None:
    tokens = load_tokens(str(text_dir), None, vocab_size=256)
    assert tokens.dtype == np.uint8
    assert bytes(tokens[:12]) == b"hello world\n"


def test_npy_shards_are_concatenated_in_path_order(tmp_path: Path) -> None:
    np.save(tmp_path / "b.npy", np.array([7, 8, 9], dtype=np.uint16))
    np.save(tmp_path / "a.npy", np.array([1, 2], dtype=np.int64))
    (tmp_path / "notes.txt").write_text("ignored: the folder holds shards")
    tokens = load_tokens(str(tmp_path), None, vocab_size=10)
    assert tokens.tolist() == [1, 2, 7, 8, 9]
    assert tokens.dtype == np.int32


def test_shard_ids_outside_the_vocabulary_are_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.array([1, 300], dtype=np.int32))
    with pytest.raises(DataError, match=r"span 1\.\.300, outside the model's vocabulary of 256"):
        load_tokens(str(tmp_path), None, vocab_size=256)


def test_a_shard_must_be_a_1d_integer_array(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.zeros((2, 2), dtype=np.float32))
    with pytest.raises(DataError, match="1-D integer array"):
        load_tokens(str(tmp_path), None, vocab_size=256)


@pytest.mark.parametrize(("name", "package"),
                         [("tokenizer.json", "tokenizers"), ("llama.model", "sentencepiece")])
def test_a_missing_tokenizer_package_is_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, package: str
) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # import fails as if not installed
    path = tmp_path / name
    path.write_text("{}")
    with pytest.raises(DataError, match=rf"needs the '{package}' package.*pip install {package}"):
        load_tokens(str(tmp_path), str(path), vocab_size=256)


def test_an_unknown_tokenizer_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not a tokenizer file"):
        load_tokenizer(str(tmp_path / "vocab.txt"))


def test_a_tokenizers_file_encodes_the_corpus(tmp_path: Path, text_dir: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")  # optional: not in the workloads extra
    vocab = {"[UNK]": 0, "</s>": 1, "hello": 2, "world": 3}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    tokens = load_tokens(str(text_dir / "a.txt"), str(tmp_path / "tokenizer.json"),
                         vocab_size=256)
    assert tokens[:4].tolist() == [2, 3, 2, 3]
    assert tokens[-1] == 1  # the end-of-text id closes each file
