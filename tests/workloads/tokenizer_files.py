"""Tokenizer files the tests build themselves, one of each kind ``--tokenizer`` reads (no
download). Imported as ``tokenizer_files``: pytest puts this folder on ``sys.path``.

Both packages are in the workloads extra, as the trainer is: imported here unconditionally,
so that a missing one fails the tests instead of skipping them."""

from __future__ import annotations

import io
from pathlib import Path

import sentencepiece
import tokenizers

WORDS = {"[UNK]": 0, "</s>": 1, "hello": 2, "world": 3}


def word_level(path: Path) -> Path:
    """A ``tokenizers`` file: the four :data:`WORDS`, ``</s>`` the end-of-text id."""
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(WORDS, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.save(str(path))
    return path


def sentencepiece_model(path: Path, text: str) -> sentencepiece.SentencePieceProcessor:
    """A ``sentencepiece`` model of about 40 pieces trained on ``text``, written to ``path``."""
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(text.splitlines()), model_writer=model, vocab_size=40,
        hard_vocab_limit=False, minloglevel=2)
    path.write_bytes(model.getvalue())
    return sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())
