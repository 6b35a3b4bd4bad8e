"""Reranking's candidates gathered and checked: BM25's, an index's own top k or a TREC run's, held compactly."""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ckqti.errors import InputError, OptionError, QueryError
from retriever.index import Index, open_index

if TYPE_CHECKING:
    from indexer.readers.corpus import Document

Candidates = dict[str, list[str]]


def is_path(value) -> bool:
    """Whether ``value`` names a file or folder (else it is data in memory, or None)."""
    return isinstance(value, (str, os.PathLike))


def is_bm25(candidates) -> bool:
    """Whether ``candidates`` asks for BM25's (``"bm25"``); a dict in memory is never written out to compare."""
    return is_path(candidates) and str(candidates) == "bm25"


def index_candidates(index: str | Path | Index, queries: Mapping[str, str], depth: int,
                     with_text: bool) -> tuple[Candidates, dict[str, str], dict[str, str]]:
    """Top ``depth`` of the learned index (a directory or an open :class:`Index`) per query, the
    candidates' stored text when asked, and why a query has none (``qid -> message``: search refused
    it, or retrieved nothing)."""
    from retriever.search import Searcher

    searcher = Searcher(open_index(index), engine="auto")  # a few queries over a small index: no Numba to load
    cands: Candidates = {}
    texts: dict[str, str] = {}
    refused: dict[str, str] = {}
    for qid, top in zip(queries, searcher.topk_many(list(queries.values()), depth)):  # one batch: no Hit a document
        if isinstance(top, QueryError):
            refused[qid] = top.message
            continue
        if not top.docids:
            refused[qid] = top.why_empty()
        cands[qid] = top.docids
        if with_text:
            for docid, shard, doc in zip(top.docids, top.shards.tolist(), top.docs.tolist()):
                if docid not in texts:  # every field the index read: ORCAS clicks and URL too
                    texts[docid] = searcher.index.shards[shard].indexed_text(doc)
    return cands, texts, refused


class CandidateLists(Mapping[str, list[str]]):
    """Queries' candidate docids, each held as a 4-byte index into one list of the distinct docids: a rerank of
    2,000,000 candidates holds 8 MB of them, where lists of strings (one string a distinct docid) took ~9 bytes a
    candidate and a run read whole ~120 bytes a line. A query's list is made when it is asked for."""

    def __init__(self) -> None:
        self.docids: list[str] = []  # the distinct docids, in the order first added
        self._number: dict[str, int] = {}
        self._ids = array("i")
        self._spans: dict[str, tuple[int, int]] = {}

    def add(self, qid: str, docids: Iterable[str]) -> None:
        number, ids, start = self._number, self._ids, len(self._ids)
        for docid in docids:
            n = number.get(docid)
            if n is None:
                n = number[docid] = len(self.docids)
                self.docids.append(docid)
            ids.append(n)
        self._spans[qid] = start, len(ids)

    @classmethod
    def of(cls, candidates: Mapping[str, Iterable[str]]) -> CandidateLists:
        """``candidates``' lists, in their order."""
        lists = cls()
        for qid, docids in candidates.items():
            lists.add(qid, docids)
        return lists

    def ordered(self, qids: Iterable[str]) -> CandidateLists:
        """The queries listed in ``qids``' order (those not held left out)."""
        spans = self._spans
        self._spans = {q: spans[q] for q in qids if q in spans}
        return self

    def __getitem__(self, qid: str) -> list[str]:
        start, stop = self._spans[qid]
        return list(map(self.docids.__getitem__, self._ids[start:stop]))

    def __iter__(self) -> Iterator[str]:
        return iter(self._spans)

    def __len__(self) -> int:
        return len(self._spans)


def run_candidates(path: str | Path, queries: Mapping[str, str], depth: int) -> CandidateLists:
    """Top ``depth`` per query of a TREC run file (trec_eval order), in ``queries``' order; the rankings of the
    file's other queries are not held. A run grouped by query is read a query at a time
    (:func:`retriever.run_reader.iter_run_queries`): what is held does not grow with its queries but for their
    candidates' indices (:class:`CandidateLists`). A run whose query comes back after another's (concatenated
    runs) is read whole (:func:`retriever.run_reader.read_run_queries`), as was every run before session 45."""
    from retriever.run_reader import NotGrouped, iter_run_queries, read_run_queries
    from retriever.runs import trec_order

    cands = CandidateLists()
    try:
        for qid, docs in iter_run_queries(path, queries):
            cands.add(qid, [d for d, _ in trec_order(docs)[:depth]])
    except NotGrouped:
        cands = CandidateLists()
        run, _ = read_run_queries(path, queries)
        for qid in list(run):
            cands.add(qid, [d for d, _ in trec_order(run.pop(qid))[:depth]])
    return cands.ordered(queries)


def gather_candidates(candidates: str | Path | Index, queries: Mapping[str, str], depth: int,
                      corpus: str | Path | Sequence[Document] | None, fmt: str | None, work: Path | None
                      ) -> tuple[CandidateLists, dict[str, str] | None, str, dict[str, str]]:
    """``(candidates, texts or None, description, refused)`` from ``"bm25"`` (a corpus file's, ``work`` holding
    its Lucene index), an index directory or a run file; ``refused``: why the index's search gave a query no
    candidates (``qid -> message``)."""
    if is_bm25(candidates):
        from ckqti.bm25 import bm25_candidates

        assert work is not None and is_path(corpus), "BM25 needs a corpus file and a work folder"
        work.mkdir(parents=True, exist_ok=True)
        return CandidateLists.of(bm25_candidates(corpus, dict(queries), work, depth, fmt)), None, "bm25", {}
    if isinstance(candidates, Index) or Path(candidates).is_dir():
        index = open_index(candidates)
        cands, texts, refused = index_candidates(index, queries, depth, with_text=corpus is None)
        return CandidateLists.of(cands), (texts if corpus is None else None), f"index:{index.path}", refused
    return run_candidates(Path(candidates), queries, depth), None, f"run:{candidates}", {}


def check_candidates(candidates: str | Path | Mapping, corpus: str | Path | Sequence[Document] | None) -> None:
    """``candidates`` is ``"bm25"``, an index directory, a run file or a dict, and the text of BM25's, a run's
    or a dict's candidates has a corpus to come from (an index holds its own): said before the model loads.
    ``corpus`` is a path, or documents read from memory (BM25 indexes a file).

    Raises:
        InputError: neither of the four, BM25, a run or a dict without ``corpus``, a corpus that is a folder.
        OptionError: BM25 candidates of documents in memory.
    """
    if isinstance(candidates, Mapping):
        if corpus is None:
            raise InputError("candidates in memory need the corpus for their text (corpus: a file or documents "
                             "in memory)")
    elif is_bm25(candidates):
        if corpus is None:
            raise InputError("BM25 candidates need the corpus (--corpus)")
        if not is_path(corpus):
            raise OptionError("BM25 candidates need a corpus file (Pyserini indexes a file); with documents in "
                              "memory give the candidates: a dict {qid: [docid, ...]}, a run file or an index",
                              ("candidates", "corpus"))
    elif not Path(candidates).exists():
        raise InputError("candidates must be 'bm25', an index directory or a TREC run file", candidates)
    elif corpus is None and not Path(candidates).is_dir():
        raise InputError("candidates from a run file need the corpus for their text (--corpus)", candidates)
    if is_path(corpus) and Path(corpus).is_dir():  # else taken below for an index to read statistics from
        raise InputError("is a directory, expected a corpus file (an index goes to --candidates)", corpus)


def no_candidates_error(where: str, queries: Mapping[str, str], where_queries: str | Path,
                        refused: Mapping[str, str]) -> InputError:
    """The error when no query has a candidate, from :func:`gather_candidates`' ``where`` (``bm25``,
    ``index:PATH`` or ``run:PATH``): a run of another query set names both sides' query ids (as
    ``ckqti eval`` does); an index says why its first query retrieved nothing."""
    from ckqti.terminal import counted

    kind, _, path = where.partition(":")
    first = next(iter(queries), "")
    if kind == "run":
        from retriever.run_reader import read_run_queries

        theirs = next(iter(read_run_queries(path, ())[1]), "")  # its first query id, no ranking held
        return InputError(f"none of the {counted(len(queries), 'query', 'queries')} of {where_queries} is in this run "
                          f"(query ids such as {theirs!r} here against {first!r} there): another query set?", path)
    if kind == "index":
        return InputError(f"no query retrieves a document from this index ({first!r}: "
                          f"{refused.get(first, 'no document')})", path)
    return InputError(f"no query retrieves a document by BM25 from the corpus (such as {first!r})", where_queries)
