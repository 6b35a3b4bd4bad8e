"""Queries' candidates scored by a Reranker, each distinct document read and encoded once."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ckqti.errors import InputError

if TYPE_CHECKING:
    from ckqti.models.reranker import Reranker


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
