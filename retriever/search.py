"""Query-time search over an opened index: analysis, term lookup, per-shard top-k, merge."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ckqti.errors import QueryError
from retriever.index import Index
from retriever.kernels import saat_topk

MAX_QUERY_TERMS = 1024


@dataclass(frozen=True)
class Hit:
    rank: int
    docid: str
    score: float
    shard: int
    doc: int


@dataclass(frozen=True)
class SearchResult:
    """Hits of one query plus what was skipped or counted on the way."""

    query: str
    terms: list[str]
    hits: list[Hit]
    oov: list[str] = field(default_factory=list)
    postings: int = 0


@dataclass(frozen=True)
class ParsedQuery:
    terms: np.ndarray  # int64 distinct term ids
    weights: np.ndarray  # int64 counts
    known: list[str]
    oov: list[str]


class Workspace:
    """Per-thread scratch buffers for the kernels, sized for the largest shard."""

    def __init__(self, max_docs: int, max_score: int):
        self.acc = np.zeros(max(max_docs, 1), dtype=np.uint32)
        self.touched = np.zeros(max(max_docs, 1), dtype=np.int64)
        self.hist = np.zeros(max_score + 2, dtype=np.int64)
        self.bits = np.zeros(max(max_docs, 1) // 64 + 1, dtype=np.uint64)

    def fit(self, max_score: int) -> None:
        if self.hist.shape[0] < max_score + 2:
            self.hist = np.zeros(max_score + 2, dtype=np.int64)


class Searcher:
    """Searches an :class:`Index`.

    Args:
        index: an opened index, or a path to one.
        mode: ``"exact"`` (scores equal brute force over the stored impacts) or
            ``"anytime"`` (stops after ``budget`` postings per shard).
        budget: postings per shard in anytime mode.
    """

    def __init__(self, index: Index | str, mode: str = "exact", budget: int = 200_000):
        if mode not in ("exact", "anytime"):
            raise ValueError(f"mode must be 'exact' or 'anytime', got {mode!r}")
        self.index = index if isinstance(index, Index) else Index(index)
        self.mode = mode
        self.budget = int(budget)
        self._local = threading.local()
        self._max_docs = max((s.num_docs for s in self.index.shards), default=1)

    def parse(self, query: str) -> ParsedQuery:
        """Analyze ``query`` and map its terms to ids; out-of-vocabulary terms are set aside."""
        analyzed = self.index.analyzer(query)
        if not analyzed:
            raise QueryError(f"query {query!r} has no searchable terms (empty or only stopwords)")
        counts = Counter(analyzed)
        known = [t for t in counts if t in self.index.term_ids]
        oov = [t for t in counts if t not in self.index.term_ids]
        ids = np.array([self.index.term_ids[t] for t in known], dtype=np.int64)
        weights = np.array([counts[t] for t in known], dtype=np.int64)
        if ids.size > MAX_QUERY_TERMS:
            raise QueryError(f"query has {ids.size} distinct terms; at most {MAX_QUERY_TERMS} are searched")
        return ParsedQuery(ids, weights, known, oov)

    def _workspace(self, max_score: int) -> Workspace:
        ws = getattr(self._local, "ws", None)
        if ws is None:
            ws = self._local.ws = Workspace(self._max_docs, max_score)
        ws.fit(max_score)
        return ws

    def topk_arrays(self, terms: np.ndarray, weights: np.ndarray, k: int):
        """Top-k over all shards as arrays ``(scores, shards, docs, processed)``: integer scores
        descending, ties by shard then document (the brute-force order)."""
        empty = np.zeros(0, np.int64)
        if terms.size == 0 or k < 1:
            return empty, empty, empty, 0
        ws = self._workspace(int(weights.sum()) * 255)
        budget = self.budget if self.mode == "anytime" else -1
        parts, processed = [], 0
        for si, sh in enumerate(self.index.shards):
            docs, vals, n = saat_topk(
                sh.postings, sh.seg_start, sh.seg_impact, sh.seg_ptr, terms, weights, k, budget,
                ws.acc, ws.touched, ws.hist, ws.bits,
            )
            processed += int(n)
            parts.append((vals, np.full(docs.size, si, np.int64), docs))
        if len(parts) == 1:
            return (*parts[0], processed)
        vals, shards, docs = (np.concatenate(x) for x in zip(*parts))
        order = np.lexsort((docs, shards, -vals))[:k]
        return vals[order], shards[order], docs[order], processed

    def search_ids(self, terms: np.ndarray, weights: np.ndarray, k: int) -> tuple[list[tuple[int, int, int]], int]:
        """Top-k ``(integer score, shard, doc)`` over all shards, and postings processed."""
        vals, shards, docs, processed = self.topk_arrays(terms, weights, k)
        return list(zip(vals.tolist(), shards.tolist(), docs.tolist())), processed

    def search(self, query: str, k: int = 10) -> SearchResult:
        """Top-k documents for a query string."""
        q = self.parse(query)
        top, processed = self.search_ids(q.terms, q.weights, k)
        base = float(self.index.offsets[q.terms].astype(np.float64) @ q.weights) if q.terms.size else 0.0
        step = self.index.quantizer.step
        hits = [
            Hit(r + 1, self.index.shards[s].docid(d), v * step + base, s, d) for r, (v, s, d) in enumerate(top)
        ]
        return SearchResult(query, q.known, hits, q.oov, processed)

    def document(self, hit: Hit) -> dict:
        return self.index.shards[hit.shard].document(hit.doc)
