"""Pass one of a build: read the corpus, analyze it, count the vocabulary.

The result is a flat token array with per-document offsets (CSR), the document store
columns, and the :class:`~ckqti.vocab.Vocabulary` with collection statistics, all
saved so an interrupted build resumes after this pass.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from ckqti.errors import InputError
from ckqti.files import naming_full_disk
from ckqti.text import Analyzer
from ckqti.vocab import Vocabulary
from indexer.format import DOCS_FILE
from indexer.readers import load_orcas, read_corpus
from indexer.shards import DOC_COLUMNS, document_column, write_documents


@dataclass
class AnalyzedCorpus:
    """Attributes:
    offsets: int64[n+1] into ``tokens``; tokens: int32 term ids of every document in order.
    docs: document store columns (docid, title, text, length, prefix: see :func:`indexer.shards.write_documents`).
    vocab: terms and collection statistics.
    clicked: documents that ORCAS clicks were joined to.
    repeated: ORCAS lines dropped as a query their document already held (:func:`indexer.readers.load_orcas`).
    """

    offsets: np.ndarray
    tokens: np.ndarray
    docs: dict[str, list]
    vocab: Vocabulary
    clicked: int = 0
    repeated: int = 0

    def __len__(self) -> int:
        return len(self.docs["docid"])

    def doc_tokens(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i] : self.offsets[i + 1]]

    def token_lists(self, start: int, stop: int) -> list[np.ndarray]:
        return [self.doc_tokens(i) for i in range(start, stop)]

    def doc_columns(self, start: int, stop: int) -> dict[str, list]:
        return {k: v[start:stop] for k, v in self.docs.items()}

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for name, array in (("offsets.npy", self.offsets), ("tokens.npy", self.tokens)):
            with naming_full_disk(directory / name):
                np.save(directory / name, array)
        write_documents(directory / DOCS_FILE, self.docs)
        with naming_full_disk(directory / "vocab.json"):
            self.vocab.save(directory / "vocab.json")
        with naming_full_disk(directory / "DONE"):
            (directory / "DONE").write_text(json.dumps({"docs": len(self), "clicked": self.clicked,
                                                          "repeated": self.repeated}))

    @classmethod
    def load(cls, directory: Path) -> "AnalyzedCorpus | None":
        """A finished save, or ``None`` when there is none or it cannot be read (a damaged work
        folder is analyzed again, not a traceback at every rerun)."""
        if not (directory / "DONE").is_file():
            return None
        try:
            table = pa.ipc.open_file(str(directory / DOCS_FILE)).read_all()
            docs = {c: document_column(table, c) for c in DOC_COLUMNS}
            done = json.loads((directory / "DONE").read_text())
            corpus = cls(np.load(directory / "offsets.npy"), np.load(directory / "tokens.npy"), docs,
                         Vocabulary.load(directory / "vocab.json"), int(done.get("clicked", 0)),
                         int(done.get("repeated", 0)))
        except (OSError, ValueError, KeyError, EOFError, pa.ArrowException, InputError):  # JSONDecodeError: a ValueError
            (directory / "DONE").unlink(missing_ok=True)
            return None
        if len(corpus.offsets) != len(docs["docid"]) + 1 or corpus.offsets[-1] != len(corpus.tokens):
            (directory / "DONE").unlink(missing_ok=True)
            return None
        return corpus


def analyze_corpus(
    path: str | Path,
    analyzer: Analyzer,
    fmt: str | None = None,
    orcas: str | Path | None = None,
    progress=None,
) -> AnalyzedCorpus:
    """Read and analyze every document of a corpus file."""
    vocab = Vocabulary()
    docs: dict[str, list] = {"docid": [], "title": [], "text": [], "length": [], "prefix": []}
    chunks: list[np.ndarray] = []
    lengths: list[int] = []
    clicked = 0
    clicks = load_orcas(orcas) if orcas is not None else None  # once, to count its repeated lines
    for doc in read_corpus(path, fmt=fmt, orcas=clicks):
        clicked += bool(doc.orcas)
        ids = vocab.add_document(analyzer(doc.full_text()))
        chunks.append(np.asarray(ids, dtype=np.int32))
        lengths.append(len(ids))
        docs["docid"].append(doc.docid)
        docs["title"].append(doc.title)
        docs["text"].append(doc.text)
        docs["length"].append(len(ids))
        docs["prefix"].append("\n".join(f for f in (doc.orcas, doc.url) if f))
        if progress is not None:
            progress.update(1)
    if not docs["docid"]:
        raise InputError("corpus has no documents", path)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    tokens = np.concatenate(chunks) if chunks else np.zeros(0, np.int32)
    return AnalyzedCorpus(offsets, tokens, docs, vocab.trimmed(), clicked, clicks.repeated if clicks else 0)
