"""Text as a ranking model reads it: token ids in the model's vocabulary, and the characters
each token came from (what an explanation highlights).

TK, TKL and the NDRM models read the project :class:`~ckqti.text.Analyzer`'s terms as ids of a
:class:`~ckqti.vocab.Vocabulary` (:class:`TermText`; unseen words map to the unknown id 1); IDCM
reads WordPiece pieces (:class:`WordPieceText`), whose vocabulary a checkpoint carries as
:data:`WORDPIECE_ANALYZER`-tagged terms. :func:`pad_rows` batches id rows into one tensor.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ckqti.text import Analyzer, past_marks
from ckqti.vocab import Vocabulary

WORDPIECE_ANALYZER = {"tokenizer": "wordpiece", "lowercase": True}
_ALNUM = re.compile(r"[0-9a-z]+")  # what ckqti.text.Analyzer keeps after lower-casing


@dataclass(frozen=True)
class TokenSpan:
    """One model token of a text: its string and the characters ``text[start:end]`` it came from."""

    token: str
    start: int
    end: int


def analyzed_spans(analyzer: Analyzer, text: str) -> list[TokenSpan]:
    """The analyzer's terms of ``text`` with their character spans in ``text``.

    Lower-cases keeping a map back to ``text``, so the terms are exactly ``analyzer(text)`` while the
    spans point into the original string; a span ends past the combining marks after its last letter
    (:func:`past_marks`). Where lower-casing keeps every character one character (all but a few
    texts, such as one holding a dotted capital I), the map is the identity and no per-character
    list is built: a 10 MB document took 15 s and 1 GB with one, and an explanation spans all of it.
    """
    flat = text.lower() if analyzer.lowercase else text
    origin: list[int] | None = None
    if len(flat) != len(text):  # a character lower-cased to two or more: map each back to its own
        lowered, origin = [], []
        for i, ch in enumerate(text):
            low = ch.lower()
            lowered.append(low)
            origin.extend([i] * len(low))
        flat = "".join(lowered)
    kept, stem, n = set(), analyzer.stem, len(text)
    out = []
    for m in _ALNUM.finditer(flat):
        word = m.group()
        if word not in kept:
            if not analyzer.tokens(word):  # a stopword
                continue
            kept.add(word)
        start, end = (m.start(), m.end()) if origin is None else (origin[m.start()], origin[m.end() - 1] + 1)
        if end < n and text[end] >= "\u0300":  # perhaps a combining mark (none is below U+0300)
            end = past_marks(text, end)
        out.append(TokenSpan(stem(word), start, end))
    return out


@dataclass(frozen=True)
class TermText:
    """Text as the project analyzer's term ids in a vocabulary (TK, TKL, NDRM)."""

    analyzer: Analyzer
    vocab: Vocabulary

    def ids(self, text: str, limit: int | None = None) -> np.ndarray:
        """int64 term ids (unknown words -> 1), the first ``limit`` (only that much text is analyzed)."""
        return np.asarray(self.vocab.ids(self.analyzer.prefix(text, limit)), dtype=np.int64)

    def length(self, text: str) -> int:
        return len(self.analyzer(text))

    def ids_many(self, texts: Sequence[str], limit: int | None = None) -> list[np.ndarray]:
        return [self.ids(t, limit) for t in texts]

    def ids_and_length(self, text: str, limit: int | None = None) -> tuple[np.ndarray, int]:
        """``(ids(text, limit), length(text))`` from one analysis."""
        terms = self.analyzer(text)
        return np.asarray(self.vocab.ids(terms[:limit]), dtype=np.int64), len(terms)

    def spans(self, text: str) -> list[TokenSpan]:
        return analyzed_spans(self.analyzer, text)


@dataclass(frozen=True)
class WordPieceText:
    """Text as WordPiece ids without special tokens (IDCM)."""

    tokenizer: Any  # ckqti.models.minilm.WordPieceTokenizer

    def ids(self, text: str, limit: int | None = None) -> np.ndarray:
        return np.asarray(self.tokenizer.encode(text, limit), dtype=np.int64)

    def length(self, text: str) -> int:
        return len(self.tokenizer.encode(text))

    def ids_many(self, texts: Sequence[str], limit: int | None = None) -> list[np.ndarray]:
        """:meth:`ids` of every text, tokenized in one batch (on every core)."""
        return [np.asarray(ids, dtype=np.int64) for ids in self.tokenizer.encode_many(texts, limit)]

    def spans(self, text: str) -> list[TokenSpan]:
        """Tokens with their characters, each span past the combining marks after it (the
        tokenizer strips accents and leaves a decomposed word's last one out), up to the next token."""
        ids, offsets = self.tokenizer.encode_with_offsets(text)
        nexts = [s for s, _ in offsets[1:]] + [len(text)]
        return [TokenSpan(tok, s, past_marks(text, e, nxt))
                for tok, (s, e), nxt in zip(self.tokenizer.tokens(ids), offsets, nexts)]


def pad_rows(rows: Sequence[np.ndarray], max_len: int | None = None, min_width: int = 1) -> Tensor:
    """Right-pad id rows with 0 into one long tensor, truncating each at ``max_len``.

    Shape:
        ``len(rows)`` rows -> ``[len(rows), W]``, ``W = max(min_width, longest kept row)``.
    """
    cut = [r[:max_len] if max_len is not None else r for r in rows]
    width = max([min_width] + [len(r) for r in cut])
    out = np.zeros((len(cut), width), dtype=np.int64)
    for i, r in enumerate(cut):
        out[i, : len(r)] = r
    return torch.from_numpy(out)


def wordpiece_vocabulary(tokenizer) -> Vocabulary:
    """The WordPiece tokens as a :class:`Vocabulary` (no statistics), to store in a checkpoint."""
    n = tokenizer.vocab_size
    terms = tokenizer.tokens(range(n))
    return Vocabulary(terms, np.zeros(n, np.int64), np.zeros(n, np.int64), 0, 0)


def tokenizer_from_vocabulary(vocab: Vocabulary):
    """A WordPiece tokenizer whose vocabulary is ``vocab.terms`` (the one saved with an IDCM checkpoint)."""
    from ckqti.models.minilm import WordPieceTokenizer

    with tempfile.TemporaryDirectory(prefix="ckqti-wordpiece-") as tmp:
        path = Path(tmp) / "vocab.txt"
        path.write_text("\n".join(vocab.terms) + "\n", encoding="utf-8")
        return WordPieceTokenizer(path)


def collection_vocabulary(texts, analyzer: Analyzer) -> Vocabulary:
    """The vocabulary (with df, cf) of an iterable of document texts."""
    return Vocabulary.build(analyzer(t) for t in texts)
