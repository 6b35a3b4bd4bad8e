"""Reranking first-stage candidates with any ranking model: TK, TKL, IDCM and NDRM1-3 alike.

Candidates come from one of three places:

* ``"bm25"``: Pyserini BM25 over the corpus file (Java runs in a child process; its Lucene
  index is built once in the work folder);
* a ckqti index directory: the learned index's own top ``depth`` (:class:`retriever.search.Searcher`);
* a TREC run file: its top ``depth`` per query (trec_eval order).

Candidate text comes from the corpus file when one is given (``Document.full_text()``: title
and text, as in training; with an ORCAS file its clicked queries first, URL next, as
``ckqti index --orcas`` reads them), else from the index's document store (every field the
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
import time
from array import array
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ckqti.errors import InputError, QueryError
from ckqti.vocab import Vocabulary
from retriever.index import Index, open_index

if TYPE_CHECKING:
    from ckqti.models.reranker import Reranker
    from indexer.readers.corpus import Clicks, Orcas  # docid -> clicked queries (indexer.readers.load_orcas)

Candidates = dict[str, list[str]]
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
        candidates: where the candidates came from.
        out: the run file written.
        unknown_words: the share of the candidates' words (a sample of up to :data:`WORD_SAMPLE`
            documents) that a TK, TKL or NDRM model read as unknown: trained on another
            collection and not adapted to this one (``adapt_vocabulary``); None for IDCM.
        repeated_clicks: lines of the ORCAS file dropped as a query their document already held.
    """

    queries: int
    reranked: int
    skipped: tuple[str, ...]
    pairs: int
    seconds: float
    model_id: str
    kind: str
    candidates: str
    out: Path
    reasons: dict[str, str] = field(default_factory=dict)
    unknown_words: float | None = None  # share of the candidates' words the model read as unknown (TK, TKL, NDRM)
    repeated_clicks: int = 0

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


def corpus_texts(corpus: str | Path, fmt: str | None = None, keep: set[str] | None = None,
                 orcas: str | Path | Orcas | None = None) -> dict[str, str]:
    """``docid -> title and text`` (``Document.full_text()``) of a corpus file, only ``keep`` when given;
    with ``orcas`` (an ORCAS file or its :func:`indexer.readers.load_orcas` mapping) each document's
    clicked queries lead, the text an index built with them holds (:meth:`retriever.index.Shard.indexed_text`)."""
    from indexer.readers import read_corpus

    return {d.docid: d.full_text() for d in read_corpus(corpus, fmt=fmt, orcas=orcas) if keep is None or d.docid in keep}


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


def gather_candidates(candidates: str | Path | Index, queries: Mapping[str, str], depth: int, corpus: str | Path | None,
                      fmt: str | None, work: Path) -> tuple[CandidateLists, dict[str, str] | None, str, dict[str, str]]:
    """``(candidates, texts or None, description, refused)`` from ``"bm25"``, an index directory or a
    run file; ``refused``: why the index's search gave a query no candidates (``qid -> message``)."""
    if str(candidates) == "bm25":
        from ckqti.bm25 import bm25_candidates

        work.mkdir(parents=True, exist_ok=True)
        return CandidateLists.of(bm25_candidates(corpus, dict(queries), work, depth, fmt)), None, "bm25", {}
    if isinstance(candidates, Index) or Path(candidates).is_dir():
        index = open_index(candidates)
        cands, texts, refused = index_candidates(index, queries, depth, with_text=corpus is None)
        return CandidateLists.of(cands), (texts if corpus is None else None), f"index:{index.path}", refused
    return run_candidates(Path(candidates), queries, depth), None, f"run:{candidates}", {}


def check_candidates(candidates: str | Path, corpus: str | Path | None) -> None:
    """``candidates`` is ``"bm25"``, an index directory or a run file, and the text of BM25's or a
    run's candidates has a corpus to come from (an index holds its own): said before the model loads.

    Raises:
        InputError: neither of the three, or BM25 or a run without ``corpus``.
    """
    if str(candidates) == "bm25":
        if corpus is None:
            raise InputError("BM25 candidates need the corpus (--corpus)")
    elif not Path(candidates).exists():
        raise InputError("candidates must be 'bm25', an index directory or a TREC run file", candidates)
    elif corpus is None and not Path(candidates).is_dir():
        raise InputError("candidates from a run file need the corpus for their text (--corpus)", candidates)
    if corpus is not None and Path(corpus).is_dir():  # else taken below for an index to read statistics from
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
        from retriever.runs import read_run_queries

        theirs = next(iter(read_run_queries(path, ())[1]), "")  # its first query id, no ranking held
        return InputError(f"none of the {counted(len(queries), 'query', 'queries')} of {where_queries} is in this run "
                          f"(query ids such as {theirs!r} here against {first!r} there): another query set?", path)
    if kind == "index":
        return InputError(f"no query retrieves a document from this index ({first!r}: "
                          f"{refused.get(first, 'no document')})", path)
    return InputError(f"no query retrieves a document by BM25 from the corpus (such as {first!r})", where_queries)


def collection_of(corpus: str | Path | None, index: str | Path | Index | None, fmt: str | None,
                  analyzer: dict, orcas: str | Path | Orcas | None = None) -> tuple[Vocabulary, dict]:
    """A collection's vocabulary in ``analyzer``'s terms: an index's (a directory, or an open
    :class:`Index`) as it holds it, with its build's model constants
    (:meth:`retriever.index.Index.vocabulary`), or a corpus file's, ORCAS clicks too when given (no constants)."""
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
                  adapt_to: str | Path | Index | None = None, fmt: str | None = None,
                  adapt_kinds: Collection[str] | None = None, orcas: str | Path | Orcas | None = None) -> Reranker:
    """Load a checkpoint, reading text with its training vocabulary, or with ``adapt_to``'s: a
    corpus file's (with ``orcas``'s clicks, as :func:`corpus_texts`), or an index directory's as it
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
    is_index = isinstance(adapt_to, Index) or (adapt_to is not None and Path(adapt_to).is_dir())
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
    candidates: str | Path,
    model_path: str | Path,
    out: str | Path,
    depth: int = 100,
    corpus: str | Path | None = None,
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
    """Rerank every query's top ``depth`` candidates with a model and write a TREC run.

    Args:
        queries: queries file (TSV, JSONL, TREC or SMART), or a dict ``qid -> text``
            (:func:`indexer.readers.read_query_mapping`).
        candidates: ``"bm25"`` (needs ``corpus``), an index directory, or a TREC run file
            (needs ``corpus``).
        model_path: a checkpoint of any kind (TK, TKL, IDCM, NDRM1-3).
        out: run file to write.
        depth: candidates reranked per query.
        corpus: corpus file for BM25 and for document text (else the index's stored text).
        fmt: corpus format (None: from the file).
        batch_size: documents scored at once.
        device: torch device (default CUDA when available).
        tag: run tag (default ``ckqti-<kind>``).
        work_dir: where the BM25 index is kept (default ``<out>.work``).
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
            them (the collection's statistics count them too). Needs ``corpus``: an index's stored
            text holds its own clicks, or none. BM25 candidates still come from the plain corpus.
        progress: show a progress bar.

    Raises:
        InputError: unreadable inputs, missing corpus, candidates without text.
        CkqtiError: an unreadable checkpoint.
    """
    from ckqti.files import check_folder_of
    from ckqti.models.specs import UNTRAINED, resolve_model
    from indexer.readers import read_queries, read_query_mapping
    from retriever.runs import check_run_path, write_run

    check_run_path(out, tag, {"queries file": queries, "corpus": corpus, "ORCAS file": orcas,
                              "candidates run": None if str(candidates) == "bm25" else candidates})
    model_path = resolve_model(model_path)  # before any work: a model that is not there, by name or path
    if depth < 1:
        raise InputError(f"depth must be at least 1, got {depth}")
    check_candidates(candidates, corpus)
    out = Path(out)
    work = Path(work_dir) if work_dir is not None else out.with_name(out.name + ".work")
    if str(candidates) == "bm25":
        check_folder_of(work / "bm25", "BM25's Lucene index")
    clicks = corpus_clicks(orcas, corpus)  # before the candidates are gathered: a bad line is said at once
    where_queries = "queries" if isinstance(queries, Mapping) else queries
    queries = read_query_mapping(queries) if isinstance(queries, Mapping) else read_queries(queries)
    gathered = None  # a run's candidates, read as the queries are before the model loads: a bad line is said at once
    if str(candidates) != "bm25":
        if Path(candidates).is_dir():
            candidates = Index(candidates)  # once: its checksums are read for its statistics and for its candidates
        else:
            gathered = gather_candidates(candidates, queries, depth, corpus, fmt, work)
            if not any(gathered[0].values()):
                raise no_candidates_error(gathered[2], queries, where_queries, gathered[3])
    # the collection whose vocabulary and statistics a model may read: the corpus's, else the candidate index's
    # (check_candidates: without a corpus the candidates are an index's)
    source = corpus or candidates
    untrained = str(model_path) in UNTRAINED  # reads the collection's statistics
    if adapt_vocabulary or untrained:
        reranker = open_reranker(model_path, device, max_doc_length, source, fmt, orcas=clicks)
    elif isinstance(candidates, Index) and corpus is None:  # an NDRM model reads the index as it does its own
        from ckqti.models.checkpoint import QTI_KINDS  # torch: after every check above

        reranker = open_reranker(model_path, device, max_doc_length, candidates, fmt, QTI_KINDS)  # as explain --index
    else:
        reranker = open_reranker(model_path, device, max_doc_length, None, fmt)
    cands, texts, where, refused = gathered or gather_candidates(candidates, queries, depth, corpus, fmt, work)
    if not any(cands.values()):
        raise no_candidates_error(where, queries, where_queries, refused)
    if texts is None:
        texts = corpus_texts(corpus, fmt, set(cands.docids), clicks)
        if not all(map(texts.__contains__, cands.docids)):  # the first missing in the queries' order is named
            q, d = next((q, d) for q, docs in cands.items() for d in docs if d not in texts)
            raise InputError(f"candidate document {d!r} of query {q!r} ({where}) is not in the corpus", corpus)
    unknown = unknown_share(reranker, [texts[d] for d in itertools.islice(distinct(cands.values()), WORD_SAMPLE)])
    unread: dict[str, str] = {}
    tally = Tally()  # each window's rankings written before the next is scored
    write_run(out, rerank_windows(reranker, queries, cands, texts, batch_size, progress, unread, tally=tally),
              f"ckqti-{reranker.kind}" if tag is None else tag)
    skipped = tuple(q for q in queries if q not in tally.reranked)
    reasons = {q: refused.get(q) or unread.get(q) or f"no candidates from {where}" for q in skipped}
    return RerankStats(len(queries), len(tally.reranked), skipped, tally.pairs, tally.seconds, reranker.model_id,
                       reranker.kind, where, out, reasons, unknown, clicks.repeated if clicks else 0)


def unknown_share(reranker: Reranker, texts: Sequence[str]) -> float | None:
    """The share of ``texts``' words a TK, TKL or NDRM model reads as unknown (id 1); None for IDCM, whose
    WordPiece pieces cover every text, or when there are no words."""
    from ckqti.models.inputs import WordPieceText

    if isinstance(reranker.text, WordPieceText) or not texts:
        return None
    rows, _ = reranker.doc_rows(list(texts))
    words = sum(len(r) for r in rows)
    return sum(int((r == 1).sum()) for r in rows) / words if words else None
