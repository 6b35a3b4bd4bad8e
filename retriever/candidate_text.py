"""Candidate documents' text: a corpus file's (with ORCAS clicks) or documents in memory."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ckqti.errors import InputError, OptionError
from retriever.candidates import is_path

if TYPE_CHECKING:
    from indexer.readers.corpus import Clicks, Document, Orcas  # Orcas: docid -> clicked queries (load_orcas)

# A corpus: a file, or documents in memory (:func:`indexer.readers.documents_in_memory`); read as a list of Documents once checked
CorpusSource = str | Path | Mapping | Iterable


def corpus_texts(corpus: str | Path | Sequence[Document], fmt: str | None = None, keep: set[str] | None = None,
                 orcas: str | Path | Orcas | None = None) -> dict[str, str]:
    """``docid -> title and text`` (``Document.full_text()``) of a corpus file (or of documents read by
    :func:`indexer.readers.documents_in_memory`), only ``keep`` when given; with ``orcas`` (an ORCAS file or its
    :func:`indexer.readers.load_orcas` mapping) each document's clicked queries lead, the text an index built
    with them holds (:meth:`retriever.index.Shard.indexed_text`)."""
    from indexer.readers import read_corpus

    docs = read_corpus(corpus, fmt=fmt, orcas=orcas) if is_path(corpus) else corpus
    return {d.docid: d.full_text() for d in docs if keep is None or d.docid in keep}


def checked_corpus(corpus: CorpusSource | None, fmt: str | None, orcas) -> str | Path | list[Document] | None:
    """A corpus file as it is, or documents in memory read (:func:`indexer.readers.documents_in_memory`), which take no file
    options (an :class:`OptionError`)."""
    if corpus is None or is_path(corpus):
        return corpus
    for name, value in (("fmt", fmt), ("orcas", orcas)):
        if value is not None:
            raise OptionError(f"{name} is for a corpus file; documents given in memory are read as they are", (name,))
    from indexer.readers import documents_in_memory

    return documents_in_memory(corpus)  # checked before the model loads, as a file's start is


def corpus_clicks(orcas: str | Path | None, corpus: str | Path | None) -> Clicks | None:
    """The clicks of an ORCAS file (None: none) for a corpus file's documents, loaded once
    (:func:`indexer.readers.load_orcas`: a malformed line is an error naming the file and line).

    Raises:
        InputError: clicks without a corpus file (an index's stored text holds its own clicks, or none).
    """
    if orcas is None:
        return None
    if corpus is None:
        raise InputError("ORCAS clicks (--orcas) join the documents of a corpus file (--corpus); an index's "
                         "stored text holds its own clicks, or none", orcas)
    from indexer.readers import load_orcas

    return load_orcas(orcas)
