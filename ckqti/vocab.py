"""Vocabulary and collection statistics.

Ids 0 and 1 are reserved for padding and unknown terms; real terms start at 2, in
order of first appearance when built from a corpus. Document frequencies (``df``),
collection frequencies (``cf``), the number of documents and the mean document
length travel with the vocabulary because every model that scores by exact match
(NDRM2's idf, BM25) needs them, and the index manifest records them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ckqti.errors import InputError

PAD, UNK = 0, 1
PAD_TERM, UNK_TERM = "[PAD]", "[UNK]"


@dataclass
class Vocabulary:
    """Terms with their collection statistics.

    Attributes:
        terms: id -> term; ``terms[0]`` is padding, ``terms[1]`` unknown.
        df: document frequency per id (int64, 0 for the reserved ids).
        cf: collection frequency per id.
        num_docs: documents counted.
        total_terms: sum of document lengths (in analyzed terms).
    """

    terms: list[str] = field(default_factory=lambda: [PAD_TERM, UNK_TERM])
    df: np.ndarray = field(default_factory=lambda: np.zeros(2, dtype=np.int64))
    cf: np.ndarray = field(default_factory=lambda: np.zeros(2, dtype=np.int64))
    num_docs: int = 0
    total_terms: int = 0

    def __post_init__(self) -> None:
        self._ids = {t: i for i, t in enumerate(self.terms)}

    def __len__(self) -> int:
        return len(self.terms)

    def __contains__(self, term: str) -> bool:
        return term in self._ids

    @property
    def mean_doc_length(self) -> float:
        return self.total_terms / max(self.num_docs, 1)

    def id(self, term: str) -> int:
        return self._ids.get(term, UNK)

    def ids(self, terms: Iterable[str]) -> list[int]:
        get = self._ids.get
        return [get(t, UNK) for t in terms]

    def add_term(self, term: str) -> int:
        """The id of ``term``, the next one when it is new (not counted: see :meth:`count_documents`)."""
        i = self._ids.get(term)
        if i is None:
            i = self._ids[term] = len(self.terms)
            self.terms.append(term)
        return i

    def add_document(self, terms: list[str]) -> list[int]:
        """Count one analyzed document, growing the vocabulary; returns its term ids."""
        ids = [self.add_term(t) for t in terms]
        self.count_documents(np.asarray(ids, dtype=np.int64), [len(ids)])
        return ids

    def count_documents(self, ids: np.ndarray, lengths: np.ndarray) -> None:
        """Count documents whose term ids (:meth:`add_term`'s) are ``ids`` one after another, ``lengths[i]``
        of them document ``i``'s (:meth:`add_document` counts one so)."""
        self._grow()
        lengths = np.asarray(lengths, np.int64)
        if ids.size:
            n = len(self.terms)
            np.add.at(self.cf, ids, 1)
            doc = np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)
            pairs = np.sort(doc * n + ids)  # (np.unique takes 25 times as long)
            first = np.ones(pairs.size, bool)
            np.not_equal(pairs[1:], pairs[:-1], out=first[1:])
            np.add.at(self.df, pairs[first] % n, 1)  # each (document, term) pair once
        self.num_docs += lengths.size
        self.total_terms += int(lengths.sum())

    def _grow(self) -> None:
        n = len(self.terms)
        if n > self.df.shape[0]:
            cap = max(n, 2 * self.df.shape[0])
            self.df = np.concatenate([self.df, np.zeros(cap - self.df.shape[0], np.int64)])
            self.cf = np.concatenate([self.cf, np.zeros(cap - self.cf.shape[0], np.int64)])

    def idf(self) -> np.ndarray:
        """BM25/NDRM2 idf per id: ``max(log((N - df + 0.5) / (df + 0.5)), 0)``."""
        df = self.df[: len(self.terms)].astype(np.float64)
        n = float(self.num_docs)
        out = np.maximum(np.log((n - df + 0.5) / (df + 0.5)), 0.0)
        out[:2] = 0.0
        return out

    @classmethod
    def build(cls, documents: Iterable[list[str]]) -> "Vocabulary":
        vocab = cls()
        for terms in documents:
            vocab.add_document(terms)
        return vocab.trimmed()

    def trimmed(self) -> "Vocabulary":
        n = len(self.terms)
        return Vocabulary(list(self.terms), self.df[:n].copy(), self.cf[:n].copy(), self.num_docs, self.total_terms)

    def save(self, path: str | Path) -> None:
        n = len(self.terms)
        Path(path).write_text(
            json.dumps(
                {
                    "terms": self.terms,
                    "df": self.df[:n].tolist(),
                    "cf": self.cf[:n].tolist(),
                    "num_docs": self.num_docs,
                    "total_terms": self.total_terms,
                }
            )
        )

    @classmethod
    def load(cls, path: str | Path) -> "Vocabulary":
        """A vocabulary :meth:`save` wrote; anything else is an :class:`InputError` naming ``path``
        (:func:`checked`)."""
        try:
            d = json.loads(Path(path).read_text())
            vocab = cls(d["terms"], np.asarray(d["df"], np.int64), np.asarray(d["cf"], np.int64),
                        int(d["num_docs"]), int(d["total_terms"]))
        except (ValueError, KeyError, TypeError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise InputError(f"not a vocabulary file ({type(e).__name__}: {e})", path) from None
        return checked(vocab, path)


def checked(vocab: Vocabulary, path: str | Path, reserved: bool = True) -> Vocabulary:
    """``vocab`` as read from ``path`` (a vocabulary file, a checkpoint), if ids 0 and 1 are ``[PAD]``
    and ``[UNK]`` (else two real terms would be read as padding and unknown; ``reserved`` False: a
    WordPiece model's token list, with ids of its own) and ``df`` and ``cf`` hold a count for every
    term; else an :class:`InputError` naming ``path``."""
    if reserved and vocab.terms[:2] != [PAD_TERM, UNK_TERM]:
        raise InputError(f"a vocabulary's first terms must be {PAD_TERM!r} and {UNK_TERM!r} (ids {PAD} and {UNK}), "
                         f"found {vocab.terms[:2]!r}", path)
    for name in ("df", "cf"):
        counts = getattr(vocab, name)
        if counts.ndim != 1 or counts.shape[0] != len(vocab.terms):
            raise InputError(f"a vocabulary's {name} must hold one count per term: {len(vocab.terms)} terms, "
                             f"{name} of shape {tuple(counts.shape)}", path)
    return vocab
