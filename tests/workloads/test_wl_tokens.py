"""Training tokens: bytes by default, pre-tokenized .npy shards, or a tokenizer file (both
kinds, each built by the test itself)."""

from __future__ import annotations

import sys
from pathlib import Path

import fsspec
import numpy as np
import pytest
from raytpu.workloads.data import DataError
from raytpu.workloads.tokens import load_tokenizer, load_tokens
from tokenizer_files import sentencepiece_model, word_level


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
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text_dir: Path, name: str, package: str
) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # import fails as if not installed
    path = tmp_path / name
    path.write_text("{}")
    with pytest.raises(DataError, match=rf"needs the '{package}' package.*pip install {package}"):
        load_tokens(str(text_dir), str(path), vocab_size=256)


def test_an_unknown_tokenizer_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not a tokenizer file"):
        load_tokenizer(str(tmp_path / "vocab.txt"))


@pytest.mark.parametrize(("name", "message"), [("tokenizer.json", "not a 'tokenizers' file"),
                                               ("x.model", "not a 'sentencepiece' model")])
def test_a_broken_tokenizer_file_is_named(tmp_path: Path, name: str, message: str) -> None:
    (tmp_path / name).write_text("garbage")
    with pytest.raises(DataError, match=rf"--tokenizer .*{name}: {message}"):
        load_tokenizer(str(tmp_path / name))


def test_a_tokenizers_file_encodes_a_text_file(tmp_path: Path, text_dir: Path) -> None:
    word_level(tmp_path / "tokenizer.json")
    tokens = load_tokens(str(text_dir / "a.txt"), str(tmp_path / "tokenizer.json"),
                         vocab_size=256)
    assert tokens.tolist() == [2, 3] * 400 + [1]  # the end-of-text id closes each file


def test_a_sentencepiece_model_encodes_a_folder(tmp_path: Path, text_dir: Path) -> None:
    texts = [(text_dir / "a.txt").read_text(), (text_dir / "sub" / "b.py").read_text()]
    sp = sentencepiece_model(tmp_path / "x.model", "".join(texts))
    tokens = load_tokens(str(text_dir), str(tmp_path / "x.model"), vocab_size=256)
    eos = sp.eos_id()
    assert eos >= 0
    assert tokens.tolist() == [*sp.encode(texts[0]), eos, *sp.encode(texts[1]), eos]
    assert len(set(tokens.tolist())) > 5  # real pieces, not one unknown id


def test_a_tokenizer_and_text_in_a_bucket(tmp_path: Path) -> None:
    word_level(tmp_path / "tokenizer.json")
    fs = fsspec.filesystem("memory")
    fs.pipe({"/tok/tokenizer.json": (tmp_path / "tokenizer.json").read_bytes(),
             "/tok/text/a.txt": b"world hello"})
    try:
        tokens = load_tokens("memory://tok/text", "memory://tok/tokenizer.json", vocab_size=8)
    finally:
        fs.rm("/tok", recursive=True)
    assert tokens.tolist() == [3, 2, 1]


def test_a_tokenizer_larger_than_the_model_is_refused(tmp_path: Path, text_dir: Path) -> None:
    word_level(tmp_path / "tokenizer.json")
    with pytest.raises(DataError, match=r"4 tokens, more than the model's vocabulary of 3"):
        load_tokens(str(text_dir), str(tmp_path / "tokenizer.json"), vocab_size=3)
