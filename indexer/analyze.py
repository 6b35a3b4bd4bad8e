"""Pass one of a build: read the corpus, analyze it, count the vocabulary.

The result is a flat token array with per-document offsets (CSR), the document store
columns, and the :class:`~ckqti.vocab.Vocabulary` with collection statistics, all
saved so an interrupted build resumes after this pass. A build analyzes straight into
its work folder (``analyze_corpus(..., directory=)``): documents and term ids go to disk
a batch at a time and are read back memory-mapped, so the corpus's text and terms never
have to fit in memory at once (MS MARCO's documents are 16 GB of text).
"""

from __future__ import annotations

import contextlib
import json
import operator
import os
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from ckqti.errors import InputError
from ckqti.files import naming_full_disk
from ckqti.text import Analyzer
from ckqti.vocab import PAD, Vocabulary
from indexer.format import DOCS_FILE
from indexer.readers import Clicks, Document, load_orcas, read_corpus
from indexer.shards import DOC_COLUMNS, document_column, documents_table

BATCH_DOCS = 10_000  # documents analyzed between two writes of a streamed analysis
TOKENS_FILE = "tokens.npy"
CACHED_WORDS = 1_000_000  # words whose term id an analysis keeps (_TermIds)


class DocumentColumns(Mapping):
    """A document store's columns (see :func:`indexer.shards.write_documents`) over an Arrow
    table, memory-mapped when read from a file: ``columns["docid"]`` is a list."""

    def __init__(self, table: pa.Table):
        self.table = table

    def __getitem__(self, name: str) -> list:
        if name not in DOC_COLUMNS:
            raise KeyError(name)
        return document_column(self.table, name)

    def __iter__(self) -> Iterator[str]:
        return iter(DOC_COLUMNS)

    def __len__(self) -> int:
        return len(DOC_COLUMNS)

    @property
    def num_rows(self) -> int:
        return self.table.num_rows

    def rows(self, start: int, stop: int) -> dict[str, list]:
        """Documents ``[start, stop)`` as lists, one per column."""
        part = self.table.slice(start, stop - start)
        return {c: document_column(part, c) for c in DOC_COLUMNS}


class TokenLists(Sequence):
    """Documents ``[start, stop)`` of a corpus as term id arrays, each made when it is read (a list
    of 3.2M array views, for MS MARCO's documents, would be 350 MB)."""

    def __init__(self, offsets: np.ndarray, tokens: np.ndarray, start: int, stop: int):
        self.offsets, self.tokens, self.start, self.stop = offsets, tokens, start, stop

    def __len__(self) -> int:
        return self.stop - self.start

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = operator.index(i)
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        j = self.start + i % len(self)
        return self.tokens[self.offsets[j] : self.offsets[j + 1]]


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
    docs: DocumentColumns
    vocab: Vocabulary
    clicked: int = 0
    repeated: int = 0

    def __len__(self) -> int:
        return self.docs.num_rows

    def doc_tokens(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i] : self.offsets[i + 1]]

    def longer_than(self, terms: int) -> int:
        """How many documents have more than ``terms`` terms (a model reads its first ``max_doc_terms``)."""
        return int(np.count_nonzero(np.diff(self.offsets) > terms))

    def token_lists(self, start: int, stop: int) -> TokenLists:
        return TokenLists(self.offsets, self.tokens, start, stop)

    def doc_columns(self, start: int, stop: int) -> dict[str, list]:
        return self.docs.rows(start, stop)

    def doc_table(self, start: int, stop: int) -> pa.Table:
        """Documents ``[start, stop)`` as a document store table (:func:`indexer.shards.documents_table`),
        a slice of the analyzed one where it has that table's columns: a shard's text is not made
        into Python strings (SciFact repeated to 100k abstracts: 190 MB of them)."""
        if self.docs.table.column_names != list(DOC_COLUMNS):  # saved before the prefix column was kept
            return documents_table(self.docs.rows(start, stop))
        return self.docs.table.slice(start, stop - start)

    @classmethod
    def load(cls, directory: Path) -> "AnalyzedCorpus | None":
        """A finished save, or ``None`` when there is none or it cannot be read (a damaged work
        folder is analyzed again, not a traceback at every rerun). Term ids and documents stay
        on disk, memory-mapped."""
        if not (directory / "DONE").is_file():
            return None
        try:
            table = pa.ipc.open_file(pa.memory_map(str(directory / DOCS_FILE))).read_all()
            if not set(DOC_COLUMNS) - {"prefix"} <= set(table.column_names):
                raise KeyError("document store columns")
            done = json.loads((directory / "DONE").read_text())
            corpus = cls(np.load(directory / "offsets.npy"), np.load(directory / TOKENS_FILE, mmap_mode="r"),
                         DocumentColumns(table), Vocabulary.load(directory / "vocab.json"),
                         int(done.get("clicked", 0)), int(done.get("repeated", 0)))
        except (OSError, ValueError, KeyError, EOFError, pa.ArrowException, InputError):  # JSONDecodeError: a ValueError
            (directory / "DONE").unlink(missing_ok=True)
            return None
        if len(corpus.offsets) != len(corpus) + 1 or corpus.offsets[-1] != len(corpus.tokens):
            (directory / "DONE").unlink(missing_ok=True)
            return None
        return corpus


def finish_save(directory: Path, vocab: Vocabulary, num_docs: int, clicked: int, repeated: int) -> None:
    """The vocabulary, then ``DONE``: a save without ``DONE`` is not loaded."""
    with naming_full_disk(directory / "vocab.json"):
        vocab.save(directory / "vocab.json")
    with naming_full_disk(directory / "DONE"):
        (directory / "DONE").write_text(json.dumps({"docs": num_docs, "clicked": clicked, "repeated": repeated}))


class _MemorySink:
    """Where :func:`analyze_corpus` puts each batch when it keeps the corpus in memory."""

    def __init__(self) -> None:
        self.tables: list[pa.Table] = []
        self.tokens: list[np.ndarray] = []

    def write(self, docs: dict[str, list], tokens: np.ndarray) -> None:
        self.tables.append(documents_table(docs))
        self.tokens.append(tokens)

    def close(self) -> tuple[pa.Table, np.ndarray]:
        if not self.tables:
            return pa.table({}), np.zeros(0, np.int32)  # no documents: analyze_corpus refuses the corpus
        return pa.concat_tables(self.tables), np.concatenate(self.tokens)

    def abort(self) -> None:
        """Nothing to let go: the batches are dropped with the sink."""


class _FileSink:
    """Where :func:`analyze_corpus` puts each batch when it analyzes into ``directory``: the
    document store and the term ids (an ``.npy`` whose header, the same length for any size
    as numpy pads it for appends, is rewritten with the final count)."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "DONE").unlink(missing_ok=True)
        self.directory, self.count, self.docs = directory, 0, None
        with naming_full_disk(directory / TOKENS_FILE):
            self.tokens = open(directory / TOKENS_FILE, "wb")
            self.header = self._write_header(0)

    def _write_header(self, n: int) -> int:
        self.tokens.seek(0)
        np.lib.format.write_array_header_1_0(self.tokens, {"descr": "<i4", "fortran_order": False, "shape": (n,)})
        return self.tokens.tell()

    def write(self, docs: dict[str, list], tokens: np.ndarray) -> None:
        table = documents_table(docs)
        with naming_full_disk(self.directory / DOCS_FILE):
            if self.docs is None:
                self.docs = pa.ipc.new_file(str(self.directory / DOCS_FILE), table.schema)
            self.docs.write_table(table)
        with naming_full_disk(self.directory / TOKENS_FILE):
            self.tokens.write(np.ascontiguousarray(tokens, "<i4").data)
        self.count += tokens.size

    def close(self) -> tuple[pa.Table, np.ndarray]:
        with naming_full_disk(self.directory / TOKENS_FILE):
            if self._write_header(self.count) != self.header:
                raise ValueError(f"{self.directory / TOKENS_FILE}: the header changed length")
            self.tokens.close()
        with naming_full_disk(self.directory / DOCS_FILE):
            if self.docs is not None:
                self.docs.close()
        if self.docs is None:
            return pa.table({}), np.zeros(0, np.int32)  # no documents: analyze_corpus refuses the corpus
        table = pa.ipc.open_file(pa.memory_map(str(self.directory / DOCS_FILE))).read_all()
        return table, np.load(self.directory / TOKENS_FILE, mmap_mode="r")

    def abort(self) -> None:
        """Close the files to give up: closing flushes their buffers, which a full disk refuses
        again, and that error (naming no file) must not replace the one being raised."""
        with contextlib.suppress(OSError):
            self.tokens.close()
        if self.docs is not None:
            with contextlib.suppress(OSError):
                self.docs.close()


def analyze_corpus(
    path: str | Path | Sequence[Document],
    analyzer: Analyzer,
    fmt: str | None = None,
    orcas: str | Path | Clicks | None = None,
    progress=None,
    directory: Path | None = None,
    clicks_required: bool = True,
) -> AnalyzedCorpus:
    """Read and analyze every document of a corpus file, or of documents already read
    (:func:`indexer.readers.read_documents`; ``fmt`` and ``orcas`` are then not used).

    With ``directory``, the analyzed corpus is saved there as it is read, a batch of
    ``BATCH_DOCS`` documents at a time (what :meth:`AnalyzedCorpus.load` reads back), and the
    corpus returned reads its documents and term ids from those files, memory-mapped;
    without, it is kept in memory. ``orcas``: an ORCAS file, or its clicks as
    :func:`indexer.readers.load_orcas` loaded them; ``clicks_required``: as
    :func:`indexer.readers.read_corpus` takes it."""
    clicks = load_orcas(orcas) if isinstance(orcas, (str, Path)) else orcas  # once, to count its repeated lines
    sink = _FileSink(directory) if directory is not None else _MemorySink()
    try:
        vocab, offsets, clicked = _analyze_into(sink, path, analyzer, fmt, clicks, progress, clicks_required)
    except BaseException:
        sink.abort()
        raise
    table, tokens = sink.close()
    if not len(offsets) > 1:
        raise InputError("corpus has no documents", path)
    vocab = vocab.trimmed()
    repeated = clicks.repeated if clicks else 0
    if directory is not None:
        with naming_full_disk(directory / "offsets.npy"):
            np.save(directory / "offsets.npy", offsets)
        finish_save(directory, vocab, len(offsets) - 1, clicked, repeated)
    return AnalyzedCorpus(offsets, tokens, DocumentColumns(table), vocab, clicked, repeated)


class _TermIds(dict):
    """``word -> term id`` (:meth:`ckqti.text.Analyzer.words` to ids in ``vocab``, which grows), a stopword's
    ``PAD`` (0, never a term's: ``filter(None, ...)`` drops it): a word is stemmed and looked up once, not at
    each of its occurrences. The first ``CACHED_WORDS`` are kept."""

    def __init__(self, analyzer: Analyzer, vocab: Vocabulary) -> None:
        super().__init__()
        self.analyzer, self.vocab = analyzer, vocab

    def __missing__(self, word: str) -> int:
        terms = self.analyzer(word)  # [] for a stopword, else the word's one term
        i = self.vocab.add_term(terms[0]) if terms else PAD
        if len(self) < CACHED_WORDS:
            self[word] = i
        return i


def _write_batch(sink, vocab: Vocabulary, docs: dict[str, list], chunks: list[np.ndarray]) -> None:
    """A batch of documents counted in ``vocab`` and written to ``sink``."""
    tokens = np.concatenate(chunks)
    vocab.count_documents(tokens, np.fromiter(map(len, chunks), np.int64, len(chunks)))
    sink.write(docs, tokens)


def _analyze_into(sink, path, analyzer, fmt, orcas, progress, clicks_required=True) -> tuple[Vocabulary, np.ndarray, int]:
    """Every document analyzed into ``sink`` a batch at a time; the vocabulary, the offsets and
    the count of documents with ORCAS clicks."""
    vocab = Vocabulary()
    term_ids = _TermIds(analyzer, vocab)
    docs: dict[str, list] = {c: [] for c in DOC_COLUMNS}
    chunks: list[np.ndarray] = []
    lengths = array("q")  # int64, not a list of Python ints (3.2M documents for MS MARCO)
    clicked = 0
    reading = isinstance(path, (str, os.PathLike))
    for doc in read_corpus(path, fmt=fmt, orcas=orcas, clicks_required=clicks_required) if reading else path:
        clicked += bool(doc.orcas)
        ids = np.fromiter(filter(None, map(term_ids.__getitem__, analyzer.words(doc.full_text()))), np.int32)
        chunks.append(ids)
        lengths.append(ids.size)
        docs["docid"].append(doc.docid)
        docs["title"].append(doc.title)
        docs["text"].append(doc.text)
        docs["length"].append(ids.size)
        docs["prefix"].append("\n".join(f for f in (doc.orcas, doc.url) if f))
        if len(chunks) == BATCH_DOCS:
            _write_batch(sink, vocab, docs, chunks)
            docs, chunks = {c: [] for c in DOC_COLUMNS}, []
        if progress is not None:
            progress.update(1)
    if chunks:
        _write_batch(sink, vocab, docs, chunks)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return vocab, offsets, clicked
