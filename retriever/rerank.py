"""Reranking first-stage candidates with any ranking model: TK, TKL, IDCM and NDRM1-3 alike.

Candidates come from one of four places:

* ``"bm25"``: Pyserini BM25 over the corpus file (Java runs in a child process; its Lucene
  index is built once in the work folder);
* a ckqti index directory: the learned index's own top ``depth`` (:class:`retriever.search.Searcher`);
* a TREC run file: its top ``depth`` per query (trec_eval order);
* a dict in memory (the Python API): ``{qid: [docid, ...]}`` in rank order, or ``{qid: {docid: score}}``
  ranked as a run file's lines are (:func:`memory_candidates`).

Candidate text comes from the corpus when one is given, a file or documents in memory
(``Document.full_text()``: title and text, as in training; with an ORCAS file its clicked queries first,
URL next, as ``ckqti index --orcas`` reads them), else from the index's document store (every field the
index read, joined the same way). Each document is tokenized once however many queries rank
it within a window of queries. A query's candidates are scored by the model and written in the model's order
(a TREC run whose documents per query are exactly the candidates, sorted by model score, ties by docid as
trec_eval breaks them).

Queries are scored a window at a time, in their order (:data:`WINDOW_PAIRS` candidates a window,
:func:`rerank_windows`), and each window's rankings are written before the next is scored: what scoring holds
(documents' token ids, NDRM's term tables, TK's pair scores, the rankings) is bounded by the window, not the
query set. What a rerank holds for all queries is their candidates (4 bytes each, :class:`CandidateLists`) and
the candidates' text; a candidates run grouped by query is read a query at a time (one whose query's lines come
back after another's is read whole: docs/SCALE.md).
"""

from __future__ import annotations

import itertools
import math
import os
import tempfile
import time
from array import array
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ckqti.errors import InputError, OptionError, QueryError, is_real
from ckqti.vocab import Vocabulary
from retriever.index import Index, open_index

if TYPE_CHECKING:
    from ckqti.models.reranker import Reranker
    from indexer.readers.corpus import Clicks, Document, Orcas  # Orcas: docid -> clicked queries (load_orcas)

Candidates = dict[str, list[str]]
# A corpus: a file, or documents in memory (:func:`indexer.readers.documents_in_memory`); read as a list of Documents once checked
CorpusSource = str | Path | Mapping | Iterable
# Candidates scored at once (:func:`rerank_windows`): a document ranked by queries of two windows is encoded
# in each. SciFact's 1,109 claims x BM25's top 100 fit one; MS MARCO dev's 6,980 x 1,000, 35 windows of 200 queries.
WINDOW_PAIRS = 200_000
WORD_SAMPLE = 500  # candidate documents whose words are counted for RerankStats.unknown_words


@dataclass(frozen=True)
class RerankStats:
    """What :func:`rerank` did.

    Attributes:
        queries: queries read; reranked: queries with at least one candidate.
        skipped: ids of queries without candidates (no searchable term, or none retrieved).
        reasons: why each skipped query was skipped.
        pairs: (query, document) pairs scored.
        seconds: scoring time (candidate retrieval and reading text excluded).
        model_id, kind: the model's checkpoint id and kind.
        candidates: where the candidates came from: ``bm25``, ``index:PATH``, ``run:PATH`` or ``dict`` (in memory).
        out: the run file written; None when the rankings were returned in memory instead.
        unknown_words: the share of the candidates' words (a sample of up to :data:`WORD_SAMPLE`
            documents) that a TK, TKL or NDRM model read as unknown: trained on another
            collection and not adapted to this one (``adapt_vocabulary``); None for IDCM.
        repeated_clicks: lines of the ORCAS file dropped as a query their document already held.
        rankings: with ``out=None``, every reranked query's ranking, ``qid -> [(docid, score), ...]`` in the
            order a run file lists them (:func:`retriever.runs.trec_order`), queries in their order; else None.
    """

    queries: int
    reranked: int
    skipped: tuple[str, ...]
    pairs: int
    seconds: float
    model_id: str
    kind: str
    candidates: str
    out: Path | None
    reasons: dict[str, str] = field(default_factory=dict)
    unknown_words: float | None = None  # share of the candidates' words the model read as unknown (TK, TKL, NDRM)
    repeated_clicks: int = 0
    rankings: dict[str, list[tuple[str, float]]] | None = field(default=None, repr=False, compare=False)

    @property
    def ms_per_query(self) -> float:
        return 1000.0 * self.seconds / self.reranked if self.reranked else 0.0

    @property
    def docs_per_second(self) -> float:
        return self.pairs / self.seconds if self.seconds > 0 else float("inf")


@dataclass
class DocumentRows:
    """Each document's model ids (capped) and true length, computed once."""

    reranker: Reranker
    texts: Mapping[str, str]
    rows: dict[str, np.ndarray] = field(default_factory=dict)
    lengths: dict[str, int] = field(default_factory=dict)

    def add(self, docids: Sequence[str]) -> None:
        """Compute the rows of those not yet here, in one :meth:`Reranker.doc_rows` call."""
        new = [d for d in dict.fromkeys(docids) if d not in self.rows]
        if new:
            rows, lengths = self.reranker.doc_rows([self.texts[d] for d in new])
            self.rows.update(zip(new, rows))
            self.lengths.update(zip(new, lengths))

    def get(self, docid: str) -> tuple[np.ndarray, int]:
        if docid not in self.rows:
            self.add([docid])
        return self.rows[docid], self.lengths[docid]


def rerank_candidates(
    reranker: Reranker, queries: Mapping[str, str], candidates: Mapping[str, Sequence[str]],
    texts: Mapping[str, str], batch_size: int = 32, progress: bool = False, skipped: dict[str, str] | None = None,
) -> dict[str, list[tuple[str, float]]]:
    """``qid -> [(docid, score), ...]`` in model order for every query with candidates the model
    can rank; the others, and why (:meth:`Reranker.unreadable`), go into ``skipped`` when given.

    Documents with the same text as the model reads it get one score (a tie broken by docid
    whatever the batch size). A document of which the model reads nothing it knows (empty, only
    stopwords, another script) ranks below every document it reads, scored 1 below the lowest of
    them: a model's score there is an artefact (TKL's and IDCM's missing windows count 0, above
    any negative window score), and the index holds no posting of it for any query term.

    An NDRM (QTI) model encodes each distinct candidate once, however many queries rank it
    (:func:`qti_term_scores`), and so do TK and TKL, whose document vectors do not depend on the
    query (:func:`encoded_pair_scores`); IDCM's cross-encoder reads every (query, document) pair.

    Raises:
        InputError: a candidate without text.
    """
    from ckqti.models.checkpoint import QTI_KINDS
    from ckqti.models.reranker import ENCODED_KINDS
    from ckqti.progress import progress_bar

    missing = next((d for docs in candidates.values() for d in docs if d not in texts), None)
    if missing is not None:
        raise InputError(f"candidate document {missing!r} is not in the corpus")
    cache = DocumentRows(reranker, texts)
    ranked: dict[str, tuple[np.ndarray, list[str]]] = {}  # qid -> (query ids, its distinct candidates)
    for qid in (q for q in queries if candidates.get(q)):
        query = reranker.query_ids(queries[qid])
        if why := reranker.unreadable(query):  # every score would be equal: the candidates in docid order
            if skipped is not None:
                skipped[qid] = why
            continue
        ranked[qid] = query, list(dict.fromkeys(candidates[qid]))
    if reranker.kind in QTI_KINDS:
        table = qti_term_scores(reranker, cache, ranked.values(), batch_size, progress)

        def score_of(query: np.ndarray, rows: Sequence[tuple[np.ndarray, int]]) -> np.ndarray:
            terms, counts = np.unique(query[query > 1], return_counts=True)
            return np.array([sum(table[row_key(r, n)].get(t, 0.0) * c for t, c in zip(terms.tolist(), counts.tolist()))
                             for r, n in rows], dtype=np.float64)
    elif reranker.kind in ENCODED_KINDS:
        pair_table = encoded_pair_scores(reranker, cache, ranked.values(), batch_size, progress)

        def score_of(query: np.ndarray, rows: Sequence[tuple[np.ndarray, int]]) -> np.ndarray:
            return np.array([pair_table[row_key(r, n)][query.tobytes()] for r, n in rows], dtype=np.float64)
    else:
        def score_of(query: np.ndarray, rows: Sequence[tuple[np.ndarray, int]]) -> np.ndarray:
            return reranker.score_rows(query, [r for r, _ in rows], [n for _, n in rows], batch_size)

    out = {}
    per_query = reranker.kind not in QTI_KINDS + ENCODED_KINDS  # the others scored every document above
    for qid in progress_bar(list(ranked), desc="rerank", unit="q", show=progress and per_query):
        query, docs = ranked[qid]
        cache.add(docs)
        scores = distinct_scores(reranker, query, [cache.get(d) for d in docs], score_of)
        out[qid] = sorted(zip(docs, scores.tolist()), key=lambda p: (p[1], p[0]), reverse=True)
    return out


@dataclass
class Tally:
    """What :func:`rerank_windows` has scored so far: the queries ranked, pairs, and seconds of scoring."""

    reranked: set[str] = field(default_factory=set)
    pairs: int = 0
    seconds: float = 0.0


def query_windows(queries: Iterable[str], candidates: Mapping[str, Sequence[str]], pairs: int) -> Iterator[list[str]]:
    """The queries with candidates, in order, in windows of at least ``pairs`` candidates (the last: the rest)."""
    window: list[str] = []
    size = 0
    for qid in queries:
        if docs := candidates.get(qid):
            window.append(qid)
            size += len(docs)
            if size >= pairs:
                yield window
                window, size = [], 0
    if window:
        yield window


def rerank_windows(
    reranker: Reranker, queries: Mapping[str, str], candidates: Mapping[str, Sequence[str]], texts: Mapping[str, str],
    batch_size: int = 32, progress: bool = False, skipped: dict[str, str] | None = None,
    pairs: int | None = None, tally: Tally | None = None,
) -> Iterator[tuple[str, list[tuple[str, float]]]]:
    """:func:`rerank_candidates`' ``(qid, ranking)`` pairs in query order, a window of queries of about ``pairs``
    candidates (default :data:`WINDOW_PAIRS`) at a time: a window is scored when the one before it has been
    consumed (:func:`retriever.runs.write_run` writes as it goes), so memory is bounded by the window. Within a
    window each distinct document is encoded once; ``tally`` counts what was scored."""
    tally = Tally() if tally is None else tally
    for window in query_windows(queries, candidates, WINDOW_PAIRS if pairs is None else pairs):
        started = time.perf_counter()
        ranked = rerank_candidates(reranker, {q: queries[q] for q in window}, {q: candidates[q] for q in window},
                                   texts, batch_size, progress, skipped)
        tally.seconds += time.perf_counter() - started
        tally.reranked.update(ranked)
        tally.pairs += sum(map(len, ranked.values()))
        yield from ranked.items()
        del ranked


def distinct(lists: Iterable[Iterable[str]]) -> Iterator[str]:
    """The distinct strings of ``lists``, in order, as they are read."""
    seen: set[str] = set()
    for strings in lists:
        for s in strings:
            if s not in seen:
                seen.add(s)
                yield s


def row_key(ids: np.ndarray, length: int) -> tuple[bytes, int]:
    """A document as the model reads it: its id row and true length (same text, same key)."""
    return ids.tobytes(), length


def readable_candidates(reranker: Reranker, cache: DocumentRows, ranked: Iterable[tuple[np.ndarray, Sequence[str]]]
                        ) -> Iterator[tuple[np.ndarray, list[tuple[tuple[bytes, int], np.ndarray, int]]]]:
    """Each ranked ``(query, docids)`` as ``(query, [(row key, ids, length), ...])``: its candidates the model
    can read, as :func:`qti_term_scores` and :func:`encoded_pair_scores` encode them."""
    for query, docs in ranked:
        cache.add(docs)
        rows = (cache.get(d) for d in docs)
        yield query, [(row_key(r, n), r, n) for r, n in rows if reranker.reads(r)]


def qti_term_scores(reranker: Reranker, cache: DocumentRows, ranked: Collection[tuple[np.ndarray, Sequence[str]]],
                    batch_size: int, progress: bool) -> dict[tuple[bytes, int], dict[int, float]]:
    """Under query term independence a query's score is a sum of its terms' scores, so each distinct
    readable candidate row (:func:`row_key`) is encoded once, in batches of similar length, and scored
    against the known terms of the queries that rank it (its own: not a batch's union of them, ten
    times as many pairs on Cranfield's BM25 top 100): ``row key -> {term: score}``."""
    from ckqti.progress import progress_bar

    wanted: dict[tuple[bytes, int], set[int]] = {}
    rows: dict[tuple[bytes, int], tuple[np.ndarray, int]] = {}
    for query, found in readable_candidates(reranker, cache, ranked):
        terms = set(query[query > 1].tolist())
        for key, r, n in found:
            rows[key] = r, n
            wanted.setdefault(key, set()).update(terms)
    order = sorted(wanted, key=lambda key: len(rows[key][0]))
    table: dict[tuple[bytes, int], dict[int, float]] = {}
    with progress_bar(total=len(order), desc="rerank", unit="doc", show=progress) as bar:
        for start in range(0, len(order), batch_size):
            part = order[start: start + batch_size]
            terms = [sorted(wanted[key]) for key in part]
            scores = reranker.term_table([np.array(t, dtype=np.int64) for t in terms], [rows[key][0] for key in part],
                                         [rows[key][1] for key in part])
            for key, own, line in zip(part, terms, scores):
                table[key] = dict(zip(own, line.tolist()))
            bar.update(len(part))
    return table


def encoded_pair_scores(reranker: Reranker, cache: DocumentRows, ranked: Collection[tuple[np.ndarray, Sequence[str]]],
                        batch_size: int, progress: bool) -> dict[tuple[bytes, int], dict[bytes, float]]:
    """TK and TKL contextualise a document apart from the query, so each distinct readable candidate row
    (:func:`row_key`) is encoded once and scored against every query that ranks it
    (:meth:`Reranker.score_pairs`, a batch of documents at a time): ``row key -> {query ids' bytes: score}``."""
    from ckqti.progress import progress_bar

    queries: dict[bytes, int] = {}  # query ids' bytes -> index
    query_rows: list[np.ndarray] = []
    docs: dict[tuple[bytes, int], int] = {}  # row key -> index
    doc_rows: list[np.ndarray] = []
    pairs: dict[tuple[int, int], None] = {}  # (query, document), in order
    for query, found in readable_candidates(reranker, cache, ranked):
        q = queries.setdefault(query.tobytes(), len(queries))
        if q == len(query_rows):
            query_rows.append(query)
        for key, r, _ in found:
            d = docs.setdefault(key, len(docs))
            if d == len(doc_rows):
                doc_rows.append(r)
            pairs[q, d] = None
    index = np.array(list(pairs), dtype=np.int64).reshape(-1, 2)  # [P, 2]
    with progress_bar(total=len(doc_rows), desc="rerank", unit="doc", show=progress) as bar:
        scores = reranker.score_pairs(query_rows, doc_rows, index, batch_size, bar.update)
    query_keys, doc_keys = list(queries), list(docs)
    table: dict[tuple[bytes, int], dict[bytes, float]] = {key: {} for key in doc_keys}
    for (q, d), score in zip(index.tolist(), scores.tolist()):
        table[doc_keys[d]][query_keys[q]] = score
    return table


def distinct_scores(reranker: Reranker, query: np.ndarray, rows: Sequence[tuple[np.ndarray, int]],
                    score_of) -> np.ndarray:
    """Scores of ``(ids, length)`` rows, each distinct row scored once by ``score_of(query, rows)``,
    unreadable rows below the rest (see :func:`rerank_candidates`)."""
    key_of = [row_key(r, n) for r, n in rows]
    first = dict(zip(reversed(key_of), reversed(range(len(rows)))))  # key -> its first row
    readable = [i for i in first.values() if reranker.reads(rows[i][0])]
    scored = dict(zip(readable, score_of(query, [rows[i] for i in readable]).tolist()))
    floor = min(scored.values(), default=1.0) - 1.0
    return np.array([scored.get(first[k], floor) for k in key_of], dtype=np.float64)


def corpus_texts(corpus: str | Path | Sequence[Document], fmt: str | None = None, keep: set[str] | None = None,
                 orcas: str | Path | Orcas | None = None) -> dict[str, str]:
    """``docid -> title and text`` (``Document.full_text()``) of a corpus file (or of documents read by
    :func:`indexer.readers.documents_in_memory`), only ``keep`` when given; with ``orcas`` (an ORCAS file or its
    :func:`indexer.readers.load_orcas` mapping) each document's clicked queries lead, the text an index built
    with them holds (:meth:`retriever.index.Shard.indexed_text`)."""
    from indexer.readers import read_corpus

    docs = read_corpus(corpus, fmt=fmt, orcas=orcas) if is_path(corpus) else corpus
    return {d.docid: d.full_text() for d in docs if keep is None or d.docid in keep}


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
    (:func:`retriever.runs.iter_run_queries`): what is held does not grow with its queries but for their
    candidates' indices (:class:`CandidateLists`). A run whose query comes back after another's (concatenated
    runs) is read whole (:func:`retriever.runs.read_run_queries`), as was every run before session 45."""
    from retriever.runs import NotGrouped, iter_run_queries, read_run_queries, trec_order

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


def memory_candidates(candidates: Mapping, queries: Mapping[str, str], depth: int) -> CandidateLists:
    """Top ``depth`` per query of candidates given in memory, in ``queries``' order: ``{qid: [docid, ...]}`` (in
    rank order: its first ``depth``) or ``{qid: {docid: score}}`` (ranked as :func:`run_candidates` ranks a run
    file's lines, :func:`retriever.runs.trec_order`: score descending as trec_eval holds it, in single precision,
    ties by docid descending; then its first ``depth``). Every entry is checked as a run file's lines are (those
    of queries not in ``queries`` too, and not held): query ids and docids are strings (an integer query id is
    read as its digits, as :func:`indexer.readers.read_query_mapping` reads one) that :func:`check_id` takes,
    a docid once a query, a score a finite number. A query whose list is empty has no candidates.

    Raises:
        InputError: naming the entry (``candidates['q1']``).
    """
    from indexer.readers.formats import check_id

    cands = CandidateLists()
    first: dict[str, str] = {}  # query id -> where it was first given
    for key, ranking in candidates.items():
        where = f"candidates[{key!r}]"
        if isinstance(key, bool) or not isinstance(key, (str, int)):
            raise InputError(f"a query id must be a string, found {type(key).__name__}", where)
        qid = check_id(str(key), "query id", where, None)
        if qid in first:
            raise InputError(f"duplicate query id {qid!r} (first at {first[qid]})", where)
        first[qid] = where
        docids = ranked_docids(qid, ranking, where)
        if qid in queries:
            cands.add(qid, docids[:depth])
    return cands.ordered(queries)


def ranked_docids(qid: str, ranking, where: str) -> list[str]:
    """One query's candidates in memory (:func:`memory_candidates`), checked, in rank order."""
    from retriever.runs import trec_order

    if isinstance(ranking, Mapping):
        docids, scores = checked_docids(qid, list(ranking), where), list(ranking.values())
        try:  # every score a number (a bool is none) that is finite: at once, else the first that is not named
            good = all(map(math.isfinite, array("d", scores))) and not any(isinstance(v, bool) for v in scores)
        except TypeError:
            good = False
        if not good:
            for docid, score in zip(docids, scores):
                if not is_real(score):
                    raise InputError(f"the score of doc {docid!r} is not a number: {score!r}", where)
                if not math.isfinite(score):
                    raise InputError(f"the score of doc {docid!r} is not finite: {score!r}", where)
        return [docid for docid, _ in trec_order(zip(docids, scores))]
    if isinstance(ranking, (str, bytes, Set)) or not isinstance(ranking, Iterable):  # a set has no rank order
        raise InputError(f"a query's candidates are [docid, ...] in rank order or {{docid: score}}, found "
                         f"{type(ranking).__name__}", where)
    return checked_docids(qid, list(ranking), where)


def checked_docids(qid: str, docids: list, where: str) -> list[str]:
    """``docids`` as strings, each as :func:`check_id` takes it, none repeated; an error naming the first that is
    not. All are checked at once first (as :func:`retriever.runs.write_run` checks a query's), one at a time only
    when that finds something to name or to strip."""
    from indexer.readers.formats import check_id

    try:
        joined = "".join(docids)
    except TypeError:  # one is not a string
        joined = None
    if joined is not None and joined.isprintable() and " " not in joined and "" not in docids \
            and len(set(docids)) == len(docids):  # printable: no control, format or whitespace character but " "
        return list(map(str, docids))  # numpy's str_ as str
    checked: list[str] = []
    seen: set[str] = set()
    for i, docid in enumerate(docids):
        if not isinstance(docid, str):
            pairs = "; with scores, a query's candidates are {docid: score}" if isinstance(docid, (tuple, list)) else ""
            raise InputError(f"a docid must be a string, found {type(docid).__name__} (item {i}{pairs})", where)
        docid = check_id(docid, "docid", where, None)
        if docid in seen:
            raise InputError(f"query {qid!r} retrieves doc {docid!r} twice", where)
        seen.add(docid)
        checked.append(docid)
    return checked


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


def no_memory_candidates_error(candidates: Mapping, queries: Mapping[str, str], where_queries: str | Path) -> InputError:
    """The error when no query has a candidate in a dict of them (:func:`memory_candidates`): one of another
    query set names both sides' query ids, as :func:`no_candidates_error` does for a run file's."""
    from ckqti.terminal import counted

    first = next(iter(queries), "")
    if not any(str(q).strip() in queries for q in candidates):
        theirs = next(iter(candidates), "")
        return InputError(f"none of the {counted(len(queries), 'query', 'queries')} of {where_queries} is in this "
                          f"dict (query ids such as {theirs!r} here against {first!r} there): another query set?"
                          if candidates else "the dict holds no query", "candidates")
    return InputError(f"no query of {where_queries} has a candidate in this dict (each one's list is empty)",
                      "candidates")


def no_candidates_error(where: str, queries: Mapping[str, str], where_queries: str | Path,
                        refused: Mapping[str, str]) -> InputError:
    """The error when no query has a candidate, from :func:`gather_candidates`' ``where`` (``bm25``,
    ``index:PATH`` or ``run:PATH``): a run of another query set names both sides' query ids (as
    ``ckqti eval`` does); an index says why its first query retrieved nothing."""
    from ckqti.terminal import counted

    kind, _, path = where.partition(":")
    first = next(iter(queries), "")
    if kind == "run":
        from retriever.runs import read_run_queries

        theirs = next(iter(read_run_queries(path, ())[1]), "")  # its first query id, no ranking held
        return InputError(f"none of the {counted(len(queries), 'query', 'queries')} of {where_queries} is in this run "
                          f"(query ids such as {theirs!r} here against {first!r} there): another query set?", path)
    if kind == "index":
        return InputError(f"no query retrieves a document from this index ({first!r}: "
                          f"{refused.get(first, 'no document')})", path)
    return InputError(f"no query retrieves a document by BM25 from the corpus (such as {first!r})", where_queries)


def collection_of(corpus: str | Path | Sequence[Document] | None, index: str | Path | Index | None, fmt: str | None,
                  analyzer: dict, orcas: str | Path | Orcas | None = None) -> tuple[Vocabulary, dict]:
    """A collection's vocabulary in ``analyzer``'s terms: an index's (a directory, or an open
    :class:`Index`) as it holds it, with its build's model constants
    (:meth:`retriever.index.Index.vocabulary`), or a corpus file's (or documents', :func:`indexer.readers.documents_in_memory`),
    ORCAS clicks too when given (no constants)."""
    if index is not None:
        idx = open_index(index)  # checksums verified, as search does: a corrupted vocabulary gave NaN scores
        if idx.manifest.analyzer != analyzer:
            raise InputError("the index analyzed text otherwise than the model; read the documents from a corpus "
                             "file (--corpus)", idx.path)
        return idx.vocabulary(), dict(idx.manifest.model_constants)
    if corpus is None:
        raise InputError("the collection's statistics need the corpus (--corpus) or an index")
    from ckqti.models.inputs import collection_vocabulary
    from ckqti.text import Analyzer

    return collection_vocabulary(corpus_texts(corpus, fmt, orcas=orcas).values(), Analyzer.from_dict(analyzer)), {}


def open_reranker(model_path: str | Path, device: str | None = None, max_doc_length: int | None = None,
                  adapt_to: str | Path | Index | Sequence[Document] | None = None, fmt: str | None = None,
                  adapt_kinds: Collection[str] | None = None, orcas: str | Path | Orcas | None = None) -> Reranker:
    """Load a checkpoint, reading text with its training vocabulary, or with ``adapt_to``'s: a
    corpus file's (with ``orcas``'s clicks, as :func:`corpus_texts`) or documents', or an index directory's as it
    holds it (an NDRM model then takes the build's constants too: it scores as the index does). ``"ndrm2"`` or ``"ndrm2-anserini"`` (untrained)
    always reads ``adapt_to``'s statistics.

    ``adapt_kinds``: adapt only checkpoints of these kinds and read the others as trained; None
    adapts every kind and refuses IDCM, whose WordPiece pieces every text shares.
    """
    from ckqti.models.checkpoint import QTI_KINDS, load_checkpoint
    from ckqti.models.reranker import adapt_reranker, load_reranker, reranker_from_checkpoint, untrained_reranker
    from ckqti.models.specs import UNTRAINED, resolve_model
    from ckqti.text import Analyzer

    model_path = resolve_model(model_path)  # a short name ('ndrm3-scifact') as its checkpoint
    untrained = model_path in UNTRAINED
    if adapt_to is None and not untrained:
        return load_reranker(model_path, device, max_doc_length)
    is_index = isinstance(adapt_to, Index) or (is_path(adapt_to) and Path(adapt_to).is_dir())
    corpus, index = (None, adapt_to) if is_index else (adapt_to, None)
    if untrained:
        vocab, constants = collection_of(corpus, index, fmt, Analyzer().to_dict(), orcas)
        return untrained_reranker(str(model_path), vocab, constants, device, max_doc_length)
    ckpt = load_checkpoint(model_path)  # once: its analyzer, then its weights
    if adapt_kinds is not None and ckpt.kind not in adapt_kinds:
        return reranker_from_checkpoint(ckpt, device, max_doc_length)
    if "tokenizer" in ckpt.analyzer:
        raise InputError("IDCM reads WordPiece pieces, which every text shares: there is no vocabulary to adapt "
                         "(--adapt-vocabulary is for TK, TKL and NDRM)", model_path)
    vocab, constants = collection_of(corpus, index, fmt, ckpt.analyzer, orcas)
    reranker = adapt_reranker(ckpt, vocab, device, max_doc_length)
    if ckpt.kind in QTI_KINDS and constants:
        reranker.model.set_index_constants(constants)
    return reranker


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


def rerank(
    queries: str | Path | Mapping[str, str],
    candidates: str | Path | Mapping,
    model_path: str | Path,
    out: str | Path | None,
    depth: int = 100,
    corpus: CorpusSource | None = None,
    *,
    fmt: str | None = None,
    batch_size: int = 32,
    device: str | None = None,
    tag: str | None = None,
    work_dir: str | Path | None = None,
    max_doc_length: int | None = None,
    adapt_vocabulary: bool = False,
    orcas: str | Path | None = None,
    progress: bool = False,
) -> RerankStats:
    """Rerank every query's top ``depth`` candidates with a model and write a TREC run (or return the rankings).

    Args:
        queries: queries file (TSV, JSONL, TREC or SMART), or a dict ``qid -> text``
            (:func:`indexer.readers.read_query_mapping`).
        candidates: ``"bm25"`` (needs a corpus file), an index directory, a TREC run file (needs
            ``corpus``), or a dict in memory (needs ``corpus``): ``{qid: [docid, ...]}`` in rank order or
            ``{qid: {docid: score}}``, checked and cut to ``depth`` as a run file is (:func:`memory_candidates`).
        model_path: a checkpoint of any kind (TK, TKL, IDCM, NDRM1-3).
        out: run file to write; None returns the rankings in :attr:`RerankStats.rankings` instead (held for every
            query until the call returns; a run file is written a window of queries at a time).
        depth: candidates reranked per query.
        corpus: corpus file for BM25 and for document text (else the index's stored text), or the documents in
            memory, as :func:`ckqti.api.index` takes them (:func:`indexer.readers.documents_in_memory`): the same text as a file of
            the same fields.
        fmt: corpus format (None: from the file).
        batch_size: documents scored at once.
        device: torch device (default CUDA when available).
        tag: run tag (default ``ckqti-<kind>``).
        work_dir: where the BM25 index is kept (default ``<out>.work``; with ``out`` None, a temporary folder).
        max_doc_length: read this many document tokens instead of the model's trained cap.
        adapt_vocabulary: read text with the collection's own vocabulary (TK, TKL, NDRM: zero-shot
            use on another collection; see :func:`ckqti.models.reranker.adapt_reranker`): the
            corpus's, else the candidate index's (its terms as the index read them, ORCAS clicks too).
            Without it, an NDRM model reranking an index's candidates with no ``corpus`` reads the
            index's vocabulary and build constants all the same, as ``explain --index`` does: it
            scores as the index does (it read only its training words, and on a new collection
            ranked the index's own top 100 below the index's order).
        orcas: an ORCAS file (``docid<TAB>query``, see :func:`indexer.readers.load_orcas`) whose
            clicked queries lead each document's corpus text, as ``ckqti index --orcas`` indexes
            them (the collection's statistics count them too). Needs a corpus file: an index's stored
            text holds its own clicks, or none. BM25 candidates still come from the plain corpus.
        progress: show a progress bar.

    Raises:
        InputError: unreadable inputs (a dict's error names its entry: ``candidates['q1']``), missing corpus,
            candidates without text.
        OptionError: ``fmt`` or ``orcas`` with documents in memory, BM25 candidates of them, ``tag`` without a run.
        CkqtiError: an unreadable checkpoint.
    """
    if out is None and work_dir is None and is_bm25(candidates):  # no run file to keep BM25's index beside
        with tempfile.TemporaryDirectory(prefix="ckqti-bm25-") as work:
            return rerank(queries, candidates, model_path, out, depth, corpus, fmt=fmt, batch_size=batch_size,
                          device=device, tag=tag, work_dir=work, max_doc_length=max_doc_length,
                          adapt_vocabulary=adapt_vocabulary, orcas=orcas, progress=progress)
    from ckqti.files import check_folder_of
    from ckqti.models.specs import resolve_model
    from indexer.readers import read_queries, read_query_mapping
    from retriever.runs import check_run_path

    if out is not None:
        check_run_path(out, tag, {"queries file": queries, "corpus": corpus, "ORCAS file": orcas,
                                  "candidates run": None if is_bm25(candidates) else candidates})
    elif tag is not None:
        raise OptionError("tag is for a run file; rankings returned in memory (out None) have none", ("tag",))
    model_path = resolve_model(model_path)  # before any work: a model that is not there, by name or path
    if depth < 1:
        raise InputError(f"depth must be at least 1, got {depth}")
    corpus = checked_corpus(corpus, fmt, orcas)
    check_candidates(candidates, corpus)
    work = Path(work_dir) if work_dir is not None else None if out is None else Path(out).with_name(Path(out).name + ".work")
    if is_bm25(candidates):
        check_folder_of(work / "bm25", "BM25's Lucene index")
    clicks = corpus_clicks(orcas, corpus)  # before the candidates are gathered: a bad line is said at once
    where_queries = "queries" if isinstance(queries, Mapping) else queries
    queries = read_query_mapping(queries) if isinstance(queries, Mapping) else read_queries(queries)
    candidates, gathered = early_candidates(candidates, queries, depth, corpus, fmt, work, where_queries)
    reranker = reranker_for(model_path, candidates, corpus, device, max_doc_length, fmt, adapt_vocabulary, clicks)
    cands, texts, where, refused = gathered or gather_candidates(candidates, queries, depth, corpus, fmt, work)
    if not any(cands.values()):
        raise no_candidates_error(where, queries, where_queries, refused)
    if texts is None:
        texts = corpus_texts(corpus, fmt, set(cands.docids), clicks)
        if not all(map(texts.__contains__, cands.docids)):  # the first missing in the queries' order is named
            q, d = next((q, d) for q, docs in cands.items() for d in docs if d not in texts)
            raise InputError(f"candidate document {d!r} of query {q!r} ({where}) is not in the corpus",
                             corpus if is_path(corpus) else "corpus")
    unknown = unknown_share(reranker, [texts[d] for d in itertools.islice(distinct(cands.values()), WORD_SAMPLE)])
    unread: dict[str, str] = {}
    tally = Tally()  # each window's rankings written before the next is scored
    ranked = rerank_windows(reranker, queries, cands, texts, batch_size, progress, unread, tally=tally)
    held = write_or_hold(out, ranked, f"ckqti-{reranker.kind}" if tag is None else tag)
    skipped = tuple(q for q in queries if q not in tally.reranked)
    reasons = {q: refused.get(q) or unread.get(q) or f"no candidates from {where}" for q in skipped}
    return RerankStats(len(queries), len(tally.reranked), skipped, tally.pairs, tally.seconds, reranker.model_id,
                       reranker.kind, where, None if out is None else Path(out), reasons, unknown,
                       clicks.repeated if clicks else 0, held)


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


def early_candidates(candidates: str | Path | Mapping, queries: Mapping[str, str], depth: int,
                     corpus: str | Path | Sequence[Document] | None, fmt: str | None, work: Path | None,
                     where_queries: str | Path):
    """``(candidates, gathered)``: a dict's or a run file's candidates read before the model loads, as the queries
    are (a bad entry or line is said at once; ``gathered`` as :func:`gather_candidates` gives them), an index
    directory opened once (its checksums are read for its statistics and for its candidates), BM25 left as it is
    (``gathered`` None: gathered once the model is loaded)."""
    if isinstance(candidates, Mapping):
        gathered = memory_candidates(candidates, queries, depth), None, "dict", {}
        if not any(gathered[0].values()):
            raise no_memory_candidates_error(candidates, queries, where_queries)
        return candidates, gathered
    if is_bm25(candidates):
        return candidates, None
    if Path(candidates).is_dir():
        return Index(candidates), None
    gathered = gather_candidates(candidates, queries, depth, corpus, fmt, work)
    if not any(gathered[0].values()):
        raise no_candidates_error(gathered[2], queries, where_queries, gathered[3])
    return candidates, gathered


def reranker_for(model_path: str | Path, candidates, corpus: str | Path | Sequence[Document] | None,
                 device: str | None, max_doc_length: int | None, fmt: str | None, adapt_vocabulary: bool,
                 clicks: Clicks | None) -> Reranker:
    """The model reading text as :func:`rerank` does: the collection's vocabulary and statistics (the corpus's,
    else the candidate index's; without a corpus the candidates are an index's, :func:`check_candidates`) when
    adapted or untrained; an NDRM model reranking an index's candidates without a corpus reads the index."""
    from ckqti.models.specs import UNTRAINED

    source = candidates if corpus is None else corpus
    if adapt_vocabulary or str(model_path) in UNTRAINED:  # the untrained read the collection's statistics
        return open_reranker(model_path, device, max_doc_length, source, fmt, orcas=clicks)
    if isinstance(candidates, Index) and corpus is None:  # an NDRM model reads the index as it does its own
        from ckqti.models.checkpoint import QTI_KINDS  # torch: after every check

        return open_reranker(model_path, device, max_doc_length, candidates, fmt, QTI_KINDS)  # as explain --index
    return open_reranker(model_path, device, max_doc_length, None, fmt)


def write_or_hold(out: str | Path | None, ranked: Iterable[tuple[str, list[tuple[str, float]]]],
                  tag: str) -> dict[str, list[tuple[str, float]]] | None:
    """Write ``ranked`` (:func:`rerank_windows`' rankings) as the run ``out``, a window at a time; or, ``out``
    None, return them, each in the order the run would list it (:func:`retriever.runs.trec_order`)."""
    from retriever.runs import trec_order, write_run

    if out is None:
        return {qid: trec_order(ranking) for qid, ranking in ranked}
    write_run(Path(out), ranked, tag)
    return None


def unknown_share(reranker: Reranker, texts: Sequence[str]) -> float | None:
    """The share of ``texts``' words a TK, TKL or NDRM model reads as unknown (id 1); None for IDCM, whose
    WordPiece pieces cover every text, or when there are no words."""
    from ckqti.models.inputs import WordPieceText

    if isinstance(reranker.text, WordPieceText) or not texts:
        return None
    rows, _ = reranker.doc_rows(list(texts))
    words = sum(len(r) for r in rows)
    return sum(int((r == 1).sum()) for r in rows) / words if words else None
