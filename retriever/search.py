"""Query-time search over an opened index: analysis, term lookup, per-shard top-k, merge.

A query's terms become posting lists and integer weights (:mod:`retriever.query`), which the
kernels (:mod:`retriever.kernel_saat`, or :mod:`retriever.scan`'s numpy) run over each shard into
per-thread buffers (:mod:`retriever.workspace`); shards' hits are merged (:mod:`retriever.merge`),
batches cut into chunks over threads (:mod:`retriever.chunks`), and hits returned as
:mod:`retriever.results`.
"""
from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path

import numpy as np

from ckqti.errors import CkqtiError, QueryError, is_real
from retriever.chunks import batch_chunk, run_chunks
from retriever.index import Index, Shard, take_array
from retriever.merge import merge_shard_hits, merged_topk, tie_at_cut, tie_margin
from retriever.query import MAX_QUERY_TERMS, MAX_QUERY_WEIGHT, RESOLUTION, ParsedQuery, QueryPlan, channel_multipliers
from retriever.results import Hit, SearchResult, TopK, TopKColumns, trec_ranking
from retriever.scan import ScanBudget, scan_seconds, scan_topk, with_ties
from retriever.workspace import ACC32_MAX, Workspace

MAX_BATCH_HITS = 1 << 22  # hits a search_many holds at a time ([queries, tie_margin(k)] rows, 3 int64 each: 96 MB)
WARMUP = 16384  # a query with at most this many postings is added whole before any pruning (retriever.kernel_saat.saat_topk)
BUDGET_MAX = int(np.iinfo(np.int64).max)  # the kernels' budget is an int64: a larger one means no limit
# Importing Numba and loading the search kernels from its cache: 0.45 s of a 0.7 s one-query process
# (session 41). engine="auto" scans with numpy until its scans' estimated time would pass this.
KERNEL_LOAD_S = 0.45
SCAN_BUDGET = ScanBudget(KERNEL_LOAD_S)  # the process's: see ScanBudget


def reopen(*args) -> Searcher | Unopened:
    """A pickled :class:`Searcher` (``Searcher(*args)``) as it is unpickled: opened again, or, where that fails
    (the index deleted, damaged, rebuilt without a weighted channel), an :class:`Unopened` that raises why when it
    is used. Raising here would lose the task: a ``multiprocessing.Pool`` worker that cannot unpickle its task
    dies, and the pool waits for the task's result forever."""
    try:
        return Searcher(*args)
    except (CkqtiError, ValueError, OSError) as e:
        return Unopened(args, e)


class Unopened:
    """A pickled :class:`Searcher` whose index did not open where it was unpickled (:func:`reopen`): its searches
    (any public attribute) raise the error that opening met; ``close`` and ``with`` do nothing; pickled, it tries
    again."""

    def __init__(self, args: tuple, error: Exception):
        self._args, self._error = args, error

    def __getattr__(self, name: str):
        if name.startswith("_"):  # pickle's, copy's and IPython's probes: not there, as on any object
            raise AttributeError(name)
        raise self._error.with_traceback(None)

    def close(self) -> None:
        pass

    def __enter__(self) -> Unopened:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def __reduce__(self):
        return reopen, self._args

    def __repr__(self) -> str:
        return f"Unopened({self._args[0]!r}: {self._error})"


class Searcher:
    """Searches an :class:`Index`.

    Args:
        index: an opened index, or a path to one.
        mode: ``"exact"`` (scores equal brute force over the stored impacts) or
            ``"anytime"`` (stops after ``budget`` postings per shard, and prunes with the
            remaining-score bound scaled by ``slack``).
        budget: postings per shard in anytime mode.
        slack: anytime mode's factor (0 < slack <= 1) on the bound of what a document can
            still gain: below 1, exact's pruning drops documents sooner, so a document whose
            score would reach the top k by a narrow margin may be missed (1M synthetic
            head-heavy: 0.8 kept 0.95 of the exact top 10 at 1.3x its speed; docs/BENCH_SEARCH.md).
        resolution: the largest integer query weight of a multi-channel or idf-weighted index
            (finer weights cost a larger accumulator histogram).
        channel_weights: a multiplier per channel, by its weighting name (``{"one": 2.0}``
            scales NDRM3's latent channel against its explicit ``"idf"`` one); unnamed channels
            keep 1; a weight is 0 or from 1e-6 to 1e6, and 0 switches a channel off (its posting
            lists are not read: ``{"one": 0}`` ranks by NDRM3's explicit channel alone), but not
            every channel. Scores are then a re-weighted fusion, not the model's own.
        engine: what searches: ``"numba"``, the kernels of :mod:`retriever.kernel_saat` (pruned;
            compiled once, then loaded from Numba's cache by each process, about 0.45 s);
            ``"numpy"``, exact mode only: every posting of a query's lists added up by
            :mod:`retriever.scan`, which never loads Numba; or ``"auto"``: in exact mode, scans
            while the kernels are not loaded in this process and the scans' estimated time
            (:func:`retriever.scan.scan_seconds`), the next search's included, stays within
            :data:`KERNEL_LOAD_S`, then the kernels (so a process that searches a few queries,
            ``ckqti search`` or a small ``ckqti run``, answers before Numba would have loaded, and
            one that searches many spends at most that long scanning first); anytime mode is always
            the kernels'. The same hits whichever searches. :meth:`topk_batch` is always the kernels'.
        close_index: whether :meth:`close` (the end of a ``with`` block) also closes the index, releasing
            its memory-mapped files; None: when the searcher opened it itself (``index`` a path;
            :func:`ckqti.api.open_searcher`'s too). An :class:`Index` the caller opened is the caller's to close.

    Raises:
        ValueError: an unknown ``mode`` or ``engine``, or options that do not combine (the API's
            :func:`ckqti.api.open_searcher` raises them as :class:`ckqti.errors.QueryError`).
    """

    def __init__(self, index: Index | str | Path, mode: str = "exact", budget: int = 200_000,
                 resolution: int = RESOLUTION, channel_weights: Mapping[str, float] | None = None, slack: float = 1.0,
                 engine: str = "numba", close_index: bool | None = None):
        if mode not in ("exact", "anytime"):
            raise ValueError(f"mode must be 'exact' or 'anytime', got {mode!r}")
        if engine not in ("numba", "numpy", "auto"):
            raise ValueError(f"engine must be 'numba', 'numpy' or 'auto', got {engine!r}")
        if engine == "numpy" and mode != "exact":
            raise ValueError("engine 'numpy' searches in exact mode only (anytime mode is the kernels')")
        if not is_real(slack) or not 0 < slack <= 1:
            raise ValueError(f"slack must be a number in (0, 1], got {slack!r}")
        if slack < 1 and mode != "anytime":
            raise ValueError("slack below 1 needs anytime mode (exact mode never drops a document it could rank)")
        if resolution < 1:
            raise ValueError(f"resolution must be >= 1, got {resolution}")
        if mode == "anytime":
            positive_int(budget, "budget")
        self.index = index if isinstance(index, Index) else Index(index)
        self._close_index = not isinstance(index, Index) if close_index is None else bool(close_index)
        self.channel_mult = channel_multipliers(self.index.quantizer.weights, channel_weights)
        self._channel_weights = None if channel_weights is None else dict(channel_weights)
        self.mode = mode
        self.engine = engine
        self._scan_budget = SCAN_BUDGET  # engine="auto": the process's scanning time left before loading the kernels
        # exact mode does not read it; past the kernels' int64, a budget no shard's postings reach
        self.budget = min(int(budget), BUDGET_MAX) if mode == "anytime" else budget
        self.slack = float(slack)
        # the kernels' integer form, in 1/EXACT_SLACK (exact mode passes EXACT_SLACK itself: no import of Numba here)
        self._slack = max(1, round(slack * self._kernels[3])) if mode == "anytime" else None
        self.resolution = int(resolution)
        self._free: list[Workspace] = []  # idle scratch buffers, reused by whichever thread asks next
        self._pool: ThreadPoolExecutor | None = None  # batch search's helper threads, started on first use
        self._pool_size = 0
        self._pool_lock = threading.Lock()
        self._max_docs = max((s.num_docs for s in self.index.shards), default=1)
        self._num_docs = sum(s.num_docs for s in self.index.shards)  # k beyond it asks for hits that cannot exist
        self._ones = np.ones(MAX_QUERY_TERMS, np.int64)  # weights of 1, read-only, for topk_arrays(weights=None)
        self._shard0 = np.zeros(0, np.int64)  # read-only shard numbers of a one-shard index's last hits, reused

    def parse(self, query: str) -> ParsedQuery:
        """Analyze ``query`` and map its terms to ids; out-of-vocabulary terms are set aside."""
        if not isinstance(query, str):
            raise QueryError(f"a query is a string, got {type(query).__name__}")
        analyzed = self.index.analyzer(query)
        if not analyzed:
            raise QueryError(f"query {query!r} has no searchable terms (empty or only stopwords; the analyzer keeps "
                             f"ASCII letters and digits only)")
        counts = Counter(analyzed)
        known = [t for t in counts if t in self.index.term_ids]
        oov = [t for t in counts if t not in self.index.term_ids]
        ids = np.array([self.index.term_ids[t] for t in known], dtype=np.int64)
        weights = np.array([counts[t] for t in known], dtype=np.int64)
        if ids.size > MAX_QUERY_TERMS:
            raise QueryError(f"query has {ids.size} distinct known terms; a query may have at most {MAX_QUERY_TERMS}")
        return ParsedQuery(ids, weights, known, oov)

    def plan(self, q: ParsedQuery) -> QueryPlan:
        """Integer weights of the query's posting lists (see the module docstring)."""
        quant = self.index.quantizer
        base = float(self.index.offsets[q.terms].astype(np.float64) @ q.weights) if q.terms.size else 0.0
        if quant.weights == ("one",):
            return QueryPlan(q.terms, q.weights, quant.steps[0] * self.channel_mult[0], base).within_bound()
        c = quant.channels
        idf_weighted = np.array([w == "idf" for w in quant.weights])  # [C]
        per_term = np.where(idf_weighted[None, :], self.index.idf[q.terms][:, None], 1.0)  # [T, C]
        f = q.weights[:, None] * (np.asarray(quant.steps) * self.channel_mult)[None, :] * per_term  # [T, C]
        lists = q.terms[:, None] * c + np.arange(c)[None, :]  # [T, C]
        top = float(f.max(initial=0.0))
        if top <= 0:
            return QueryPlan(np.zeros(0, np.int64), np.zeros(0, np.int64), 1.0, base)
        unit = top / self.resolution
        w = np.rint(f / unit)
        w[(w == 0) & (255 * f >= unit)] = 1
        keep = w > 0
        return QueryPlan(lists[keep].astype(np.int64), w[keep].astype(np.int64), unit, base).within_bound()

    def unweighted(self, q: ParsedQuery, plan: QueryPlan) -> list[str]:
        """Known query terms none of whose posting lists the plan keeps: they add nothing to any
        score (NDRM2's idf is 0 for a term in at least half of the documents; a weight can also
        round to nothing beside much heavier terms, as can a channel weighted very little; a
        channel weighted 0 keeps none of its lists)."""
        kept = set((plan.lists // self.index.quantizer.channels).tolist())
        return [t for t, i in zip(q.known, q.terms.tolist()) if i not in kept]

    def unweighted_reason(self, terms: list[str]) -> str:
        """Why the known query ``terms`` (:meth:`unweighted`) add nothing: an idf of 0 (NDRM2's ``max(log((N - df
        + 0.5) / (df + 0.5)), 0)``) where every channel is idf-weighted, else a weight too small to count."""
        index = self.index
        idf_only = all(w == "idf" for w in index.quantizer.weights)
        if idf_only and all(index.idf[index.term_ids[t]] <= 0 for t in terms):
            return "idf 0: each is in at least half of the documents"
        return "their weight rounds to 0 beside the other terms' or their channel is weighted 0"

    def unstored(self, terms: list[str]) -> list[str]:
        """Of the vocabulary's ``terms``, those no shard stores a posting for (a term only past the model's
        ``max_doc_terms`` in its documents): they match no document."""
        c = self.index.quantizer.channels

        def stored(t: int) -> bool:
            for sh in self.index.shards:
                lists = sh.seg_ptr[min(t * c, sh.seg_ptr.shape[0] - 1):min((t + 1) * c, sh.seg_ptr.shape[0] - 1) + 1]
                if lists.size and lists[-1] > lists[0]:
                    return True
            return False

        return [t for t in terms if not stored(self.index.term_ids[t])]

    @cached_property
    def _kernels(self) -> tuple:
        """``(saat_topk, saat_batch, LOOKUP_COST, EXACT_SLACK)`` of :mod:`retriever.kernel_saat` and
        :mod:`retriever.kernel_and`, imported on first use (a searcher that only scans, ``engine="numpy"``,
        never loads Numba) and held as one tuple: reading them off the module cost a one-query call 0.2 us
        (of ~15 on 1M tail queries)."""
        from retriever import kernel_and, kernel_saat

        return kernel_saat.saat_topk, kernel_saat.saat_batch, kernel_and.LOOKUP_COST, kernel_and.EXACT_SLACK

    def _traversal(self) -> tuple[int, int]:
        """The kernels' ``budget`` (-1: none) and ``slack`` for this searcher's mode."""
        if self.mode == "anytime":
            return self.budget, self._slack
        return -1, self._kernels[3]

    def _take(self, max_score: int) -> Workspace:
        """Scratch buffers for one thread's kernel calls, from the pool of idle ones (a new
        thread, a batch's worker, reuses warm buffers instead of faulting in fresh pages;
        ``list.pop``/``append`` are atomic, so no lock); give them back to ``self._free``."""
        try:
            ws = self._free.pop()
        except IndexError:
            ws = Workspace(self._max_docs, max_score)
        if ws.hist.shape[0] < max_score + 2:
            ws.fit(max_score)
        return ws

    @contextmanager
    def _workspace(self, max_score: int):
        """:meth:`_take` for a ``with`` block, given back at its end."""
        ws = self._take(max_score)
        try:
            yield ws
        finally:
            self._free.append(ws)

    def topk_arrays(self, terms: np.ndarray, weights: np.ndarray | None, k: int):
        """Top-k over all shards as arrays ``(scores, shards, docs, processed)``: integer scores
        descending, ties by shard then document (the brute-force order). ``terms`` are posting
        list ids (int64; the term ids of a single-channel index), ``weights`` their integer
        weights (int64; ``None``: 1 each); an id given twice adds up, as once with the summed
        weight would. A shard written before a list existed holds it as empty. A one-shard
        index's ``shards`` is a read-only array of zeros (shared between calls)."""
        k = min(k, self._num_docs)
        if terms.size == 0 or k < 1:
            empty = np.zeros(0, np.int64)
            return empty, empty, empty, 0
        if self.engine != "numba" and self._scans([terms], k):  # the engine test first: a numba searcher pays no call here
            return self._scan_arrays(terms, weights, k)  # before weights=None becomes the kernels' longer array of ones
        if weights is None:  # the kernels read the first terms.size weights: no view needed
            weights = self._ones
            if weights.size < terms.size:
                weights = self._ones = np.ones(terms.size, np.int64)
            max_score = terms.size * 255
        else:
            max_score = sum(weights.tolist()) * 255  # a Python sum: numpy's costs ~1 us on a few weights
            if max_score > ACC32_MAX:
                raise ValueError(f"weights add up to {max_score // 255:,}: scores would overflow the accumulators "
                                 f"(plan() keeps a query's within {MAX_QUERY_WEIGHT:,})")
        saat_topk, _, lookup_cost, exact_slack = self._kernels
        budget, slack = (self.budget, self._slack) if self.mode == "anytime" else (-1, exact_slack)  # _traversal, inline
        shards = self.index.shards
        if len(shards) == 1:  # the common case, kept lean (no context manager): one query a call is latency-bound
            sh = shards[0]
            docs, vals = np.empty(k, np.int64), np.empty(k, np.int64)  # two allocations cost less than views of one
            ws = self._take(max_score)
            try:
                n, processed = saat_topk(sh.postings, sh.seg_start, sh.seg_impact, sh.seg_ptr, terms, weights, k, budget,
                                         ws.acc(max_score), ws.touched, ws.hist, ws.bits, sh.skips, sh.skip_ptr, sh.post_impact,
                                         WARMUP, lookup_cost, slack, docs, vals)
            finally:
                self._free.append(ws)
            zeros = self._shard0  # kept for the next query of as many hits (a view of a longer one costs ~0.1 us)
            if zeros.size != n:
                zeros = np.zeros(n, np.int64)
                zeros.flags.writeable = False
                self._shard0 = zeros
            if n < k:
                return vals[:n], zeros, docs[:n], processed
            return vals, zeros, docs, processed
        with self._workspace(max_score) as ws:
            parts, processed = [], 0
            for si, sh in enumerate(shards):  # lists a shard lacks (ids past its own) are empty in the kernel
                docs, vals = np.empty(k, np.int64), np.empty(k, np.int64)
                n, scanned = saat_topk(sh.postings, sh.seg_start, sh.seg_impact, sh.seg_ptr, terms, weights, k, budget,
                                       ws.acc(max_score), ws.touched, ws.hist, ws.bits, sh.skips, sh.skip_ptr, sh.post_impact,
                                       WARMUP, lookup_cost, slack, docs, vals)
                processed += scanned
                parts.append((vals[:n], np.full(n, si, np.int64), docs[:n]))
        return (*merged_topk(parts, k), processed)

    def _scans(self, lists: list[np.ndarray], k: int) -> bool:
        """Whether queries of posting lists ``lists`` (int64, one array a query) are scanned with numpy
        (see ``engine``): with ``"auto"``, while no kernel is loaded in this process and the process's scans'
        estimated time, these included, stays within :data:`KERNEL_LOAD_S` (:data:`SCAN_BUDGET`). Loading
        first would have cost that time, so a process never spends more than about twice what the better
        choice in hindsight would have (a ski rental)."""
        if self.engine == "numpy":
            return True
        if self.engine == "numba" or self.mode != "exact" or "retriever.kernel_saat" in sys.modules:
            return False
        ptr = np.zeros(len(lists) + 1, np.int64)
        np.cumsum([x.size for x in lists], out=ptr[1:])
        return self._scan_budget.spend(scan_seconds(self.index.shards, np.concatenate(lists), ptr, k))

    def _scan_arrays(self, terms: np.ndarray, weights: np.ndarray | None, k: int, ties: bool = False):
        """:meth:`topk_arrays` by :func:`retriever.scan.scan_topk`, shard by shard; with ``ties``, every
        document tied with the k-th score too, as :meth:`topk_with_ties` gives (one scan finds them)."""
        if weights is None:
            weights = np.ones(terms.size, np.int64)
        parts, processed = [], 0
        for si, sh in enumerate(self.index.shards):
            vals, docs, read = scan_topk(sh.postings, sh.seg_start, sh.seg_impact, sh.seg_ptr, terms, weights, k,
                                         sh.num_docs, ties=ties)
            processed += read
            parts.append((vals, np.full(vals.size, si, np.int64), docs))
        if len(parts) == 1:  # in order already
            return (*parts[0], processed)
        vals, shards, docs = merged_topk(parts, None)
        keep = with_ties(vals, k) if ties else k
        return vals[:keep], shards[:keep], docs[:keep], processed

    def topk_batch(self, lists: list, weights: list | None, k: int, threads: int = 1):
        """:meth:`topk_arrays` for many queries: one kernel call per shard and chunk of queries
        (:func:`batch_chunk`; no Python between queries), chunks spread over ``threads`` threads
        (the kernels release the GIL).

        ``lists`` and ``weights`` hold one sequence (array or list) of posting list ids (a
        repeated id adds up) and of integer weights per query; ``weights=None`` weighs every list 1.

        Returns:
            ``(scores, shards, docs, counts, processed)``: int64 ``[nq, min(k, documents)]`` arrays whose row
            ``q`` holds query ``q``'s hits in :meth:`topk_arrays`'s order up to ``counts[q]``
            (the rest is -1), and int64 ``[nq]`` postings processed.
        """
        nq = len(lists)
        if weights is not None and len(weights) != nq:
            raise ValueError(f"{nq} queries but {len(weights)} weight arrays")
        k = max(min(int(k), self._num_docs), 0)  # a row per query of k hits: never longer than the collection
        out = np.full((3, nq, k), -1, np.int64)
        counts = np.zeros(nq, np.int64)
        processed = np.zeros(nq, np.int64)
        if nq == 0 or k == 0:
            return out[0], out[1], out[2], counts, processed
        # vectorised over the batch: per-query numpy calls cost microseconds, as much as a tail query's kernel
        q_ptr = np.zeros(nq + 1, np.int64)
        np.cumsum(np.fromiter(map(len, lists), np.int64, nq), out=q_ptr[1:])
        q_terms = np.concatenate(lists).astype(np.int64, copy=False) if q_ptr[-1] else np.zeros(0, np.int64)
        if weights is None:
            q_weights = np.ones(q_terms.size, np.int64)
        else:
            q_weights = np.concatenate(weights).astype(np.int64, copy=False) if q_ptr[-1] else np.zeros(0, np.int64)
            if q_weights.size != q_terms.size:
                raise ValueError(f"{q_terms.size} list ids but {q_weights.size} weights")
        cum = np.zeros(q_terms.size + 1, np.int64)
        np.cumsum(q_weights, out=cum[1:])
        top_scores = (cum[q_ptr[1:]] - cum[q_ptr[:-1]]) * 255  # each query's largest score
        if top_scores.max() > ACC32_MAX:
            raise ValueError(f"a query's weights add up to {int(top_scores.max()) // 255:,}: scores would overflow the "
                             f"accumulators (plan() keeps a query's within {MAX_QUERY_WEIGHT:,})")
        budget, slack = self._traversal()
        _, saat_batch, lookup_cost, _ = self._kernels
        shards = self.index.shards

        shard_k = min(k, max(sh.num_docs for sh in shards))  # no shard has more hits (2,000 one-document shards: 1)
        size = batch_chunk(nq, threads, len(shards), shard_k)
        starts = list(range(0, nq, size))
        single = len(shards) == 1

        def chunk(lo: int) -> None:
            hi = min(lo + size, nq)
            ptr = q_ptr[lo:hi + 1] - q_ptr[lo]
            terms, w = q_terms[q_ptr[lo]:q_ptr[hi]], q_weights[q_ptr[lo]:q_ptr[hi]]
            max_score = int(top_scores[lo:hi].max())  # per chunk: one heavy query widens only its chunk's accumulators
            with self._workspace(max_score) as ws:
                if single:  # the kernel writes the hits straight into the output rows
                    sh = shards[0]
                    saat_batch(sh.postings, sh.seg_start, sh.seg_impact, sh.seg_ptr, terms, w, ptr, k, budget,
                               ws.acc(max_score), ws.touched, ws.hist, ws.bits, sh.skips, sh.skip_ptr, sh.post_impact, WARMUP, lookup_cost, slack,
                               out[2, lo:hi], out[0, lo:hi], counts[lo:hi], processed[lo:hi])
                    return
                docs = np.empty((len(shards), hi - lo, shard_k), np.int64)
                vals = np.full((len(shards), hi - lo, shard_k), -1, np.int64)
                n = np.zeros((len(shards), hi - lo), np.int64)
                done = np.zeros((len(shards), hi - lo), np.int64)
                for si, sh in enumerate(shards):
                    saat_batch(sh.postings, sh.seg_start, sh.seg_impact, sh.seg_ptr, terms, w, ptr, shard_k, budget,
                               ws.acc(max_score), ws.touched, ws.hist, ws.bits, sh.skips, sh.skip_ptr, sh.post_impact, WARMUP, lookup_cost, slack,
                               docs[si], vals[si], n[si], done[si])
            processed[lo:hi] = done.sum(0)
            merge_shard_hits(vals, docs, n, out[:, lo:hi], counts[lo:hi])

        run_chunks(chunk, starts, threads, self._submit if threads > 1 and len(starts) > 1 else None)
        if single:
            out[1] = np.where(np.arange(k)[None, :] < counts[:, None], 0, -1)
        return out[0], out[1], out[2], counts, processed

    def _submit(self, fn, n: int) -> list[Future]:
        """``fn`` started on ``n`` helper threads of a pool kept for later batches (starting threads
        costs ~0.2 ms a batch, as much as a batch of short queries takes on one thread). Submitted
        under the pool's lock, so that a :meth:`close` from another thread cannot shut the pool
        down between choosing it and submitting to it."""
        with self._pool_lock:
            if self._pool is None or self._pool_size < n:
                # a smaller pool is not shut down: a concurrent batch may still run on it; its idle
                # threads exit once it is garbage-collected
                self._pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="ckqti-search")
                self._pool_size = n
            return [self._pool.submit(fn) for _ in range(n)]

    def close(self) -> None:
        """Stop batch search's helper threads, after the batches running on them (safe from any thread,
        at any time), and close the index when the searcher opened it (``close_index``): a later search
        then raises :class:`ckqti.errors.IndexClosedError`. A searcher of an index the caller keeps
        open may search again after it, starting new helpers."""
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool, self._pool_size = None, 0
        if self._close_index:
            self.index.close()

    def __enter__(self) -> Searcher:
        return self

    def __reduce__(self):
        """Pickled as how to open it again (a worker process of ``multiprocessing`` gets a searcher of the same
        index, by the absolute path it was opened by, mode and weights, which maps the index's files itself); the
        stemmer and the mapped files are not picklable, and a copy of mapped memory would not be shared. Where the
        index no longer opens so (:func:`reopen`), the copy raises why when it is used."""
        return reopen, (str(self.index.where), self.mode, self.budget, self.resolution, self._channel_weights,
                        self.slack, self.engine)

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Searcher({str(self.index.path)!r}, mode={self.mode!r})"

    def search_many(self, queries: list[str], k: int = 10, threads: int = 1) -> list[SearchResult | QueryError]:
        """:meth:`search` for many query strings through :meth:`topk_batch`; a query that
        cannot be searched (empty, only stopwords, too long) gives its :class:`QueryError`."""
        return [r if isinstance(r, QueryError) else r.result() for r in self.topk_many(queries, k, threads)]

    def topk_many(self, queries: list[str], k: int = 10, threads: int = 1) -> list[TopK | QueryError]:
        """:meth:`search_many`'s hits as columns (:class:`TopK`): for many hits a query, as a run writes."""
        return [top if isinstance(top, QueryError) else self.ranked(*top, k) for top in self._batch_tops(queries, k, threads)]

    def topk_columns(self, queries: list[str], k: int = 10, threads: int = 1) -> list[TopKColumns | QueryError]:
        """:meth:`topk_many` as ``ckqti run`` writes it (:class:`TopKColumns`): a query's docids stay an
        Arrow string array, its scores a numpy array (:func:`retriever.run_writer.write_ranked_run` takes both)."""
        return [top if isinstance(top, QueryError) else self.ranked_columns(*top, k)
                for top in self._batch_tops(queries, k, threads)]

    def _batch_tops(self, queries: list[str], k: int, threads: int) -> list[tuple | QueryError]:
        """Per query, :meth:`ranked`'s arguments but ``k`` (the query, its parse and plan, and hits holding
        every tie of the k-th score), searched through :meth:`topk_batch`; or the query's :class:`QueryError`."""
        positive_int(k, "k")
        positive_int(threads, "threads")
        if isinstance(queries, str):
            raise QueryError("search_many takes a list of query strings, got one string (search takes one)")
        if isinstance(queries, Mapping):  # api.run's {qid: text}: iterating it searched the qids
            raise QueryError(f"search_many takes a list of query strings, got a {type(queries).__name__} (its keys "
                             "would be searched as queries; pass list(d.values()) and zip the results with the keys)")
        try:
            queries = list(queries)  # an iterator is read once: by the parse below, then by the results
        except TypeError:
            raise QueryError(f"search_many takes a list of query strings, got {type(queries).__name__}") from None
        parsed: list[ParsedQuery | QueryError] = []
        for text in queries:
            try:
                parsed.append(self.parse(text))
            except QueryError as err:
                parsed.append(err)
        plans = [self.plan(q) if isinstance(q, ParsedQuery) else None for q in parsed]
        empty = np.zeros(0, np.int64)
        k = min(k, self._num_docs)
        live = [p.lists for p in plans if p is not None]
        if live and self._scans(live, k):
            return [q if plan is None else (text, q, plan, *self._scan_with_ties(plan.lists, plan.weights, k, plan.ties))
                    for text, q, plan in zip(queries, parsed, plans)]
        want = tie_margin(k)
        step = max(1, MAX_BATCH_HITS // want)  # queries a topk_batch call takes: its [queries, k] rows stay bounded
        results: list[tuple | QueryError] = []
        searched = -1  # the first query of the part searched last
        for i, (text, q, plan) in enumerate(zip(queries, parsed, plans)):
            if plan is None:
                results.append(q)
                continue
            lo = i - i % step
            if lo != searched:
                part, searched = plans[lo:lo + step], lo
                vals, shards, docs, counts, processed = self.topk_batch(  # past k (tie_margin): a tie at the cut shows
                    [p.lists if p else empty for p in part], [p.weights if p else empty for p in part], want, threads)
            j = i - lo
            top = (vals[j, :counts[j]], shards[j, :counts[j]], docs[j, :counts[j]], int(processed[j]))
            if tie_at_cut(top[0], k, want, plan.ties):  # this query alone, until every document of the k-th score is in
                top = self.topk_with_ties(plan.lists, plan.weights, k, 2 * want, plan.ties)
            results.append((text, q, plan, *top))
        return results

    def topk_with_ties(self, terms: np.ndarray, weights: np.ndarray | None, k: int, want: int | None = None,
                       held=None):
        """:meth:`topk_arrays`'s top ``k`` and every document tied with the k-th score (so that the
        cut can be made as trec_eval orders ties, by docid; the kernels break them by internal
        number): ``want`` hits (default :func:`tie_margin`), doubled while the last still ties the k-th.
        Scores tie as ``held`` holds them (a function of integer scores, :meth:`QueryPlan.held`; None:
        the integer scores themselves)."""
        k = min(k, self._num_docs)
        if self._scans([terms], k):
            return self._scan_with_ties(terms, weights, k, held)
        want = tie_margin(k) if want is None else min(want, self._num_docs)
        while True:
            top = self.topk_arrays(terms, weights, want)
            if not tie_at_cut(top[0], k, want, held) or want >= self._num_docs:
                return top
            want = min(2 * want, self._num_docs)

    def _scan_with_ties(self, terms: np.ndarray, weights: np.ndarray | None, k: int, held=None):
        """:meth:`topk_with_ties` by a scan, which keeps every tie of the k-th integer score: scanned again
        deeper only while a lower integer score, which it left out, would tie the k-th as ``held`` holds it."""
        want = k
        while True:
            top = self._scan_arrays(terms, weights, want, ties=True)
            vals = top[0]
            if held is None or vals.size < want or want >= self._num_docs or held(vals[-1] - 1) != held(vals[k - 1]):
                return top
            want = min(2 * want, self._num_docs)

    def ranked(self, text: str, q: ParsedQuery, plan: QueryPlan, vals: np.ndarray, shards: np.ndarray, docs: np.ndarray,
               processed: int, k: int) -> TopK:
        """The first ``k`` of hits holding every tie of the k-th score (:meth:`topk_with_ties`),
        ranked as ``ckqti run`` writes them and trec_eval reads them: score descending, then docid
        descending. So a run's top 10 is the first 10 lines of its top 1,000, and search's ranks are
        the run's."""
        return self.ranked_columns(text, q, plan, vals, shards, docs, processed, k).topk()

    def ranked_columns(self, text: str, q: ParsedQuery, plan: QueryPlan, vals: np.ndarray, shards: np.ndarray,
                       docs: np.ndarray, processed: int, k: int) -> TopKColumns:
        """:meth:`ranked`'s :class:`TopK` as :class:`TopKColumns`: the same hits in the same order, docids
        taken in Arrow (:meth:`~retriever.index.Index.docid_column`) and only tied ones made Python strings
        (to order them), scores left in numpy."""
        docids = self.index.docid_column(shards, docs) if vals.size else []
        order = trec_ranking(vals if plan.ties is None else plan.held(vals), docids)[:k]
        if isinstance(docids, list):
            docids = list(map(docids.__getitem__, order.tolist()))
        elif order[-1] == order.size - 1 and bool((order[1:] > order[:-1]).all()):  # the first hits, in their order
            docids = docids.slice(0, order.size)
        else:
            docids = take_array(docids, order)
        return TopKColumns(text, q.known, docids, vals[order] * plan.unit + plan.base, shards[order], docs[order],
                           q.oov, processed, self.unweighted(q, plan))

    def search_ids(self, terms: np.ndarray, weights: np.ndarray, k: int) -> tuple[list[tuple[int, int, int]], int]:
        """Top-k ``(integer score, shard, doc)`` over all shards for posting lists ``terms`` with
        integer ``weights``, and postings processed."""
        vals, shards, docs, processed = self.topk_arrays(terms, weights, k)
        return list(zip(vals.tolist(), shards.tolist(), docs.tolist())), processed

    def search(self, query: str, k: int = 10) -> SearchResult:
        """Top-k documents for a query string, ranked as :meth:`ranked` says (ties by docid, descending)."""
        positive_int(k, "k")
        q = self.parse(query)
        plan = self.plan(q)
        return self.ranked(query, q, plan, *self.topk_with_ties(plan.lists, plan.weights, k, None, plan.ties), k).result()

    def document_score(self, query: str, docid: str) -> float | None:
        """The score :meth:`search` gives ``docid`` for ``query``, from the document's stored (quantized)
        impacts, each looked up in its posting lists; ``None`` when no shard holds ``docid``. A model's own
        score of the document (``ckqti explain``) differs from it by the quantization.

        Raises:
            QueryError: as :meth:`parse` (no searchable term), or ``docid`` is not a string."""
        if not isinstance(docid, str):
            raise QueryError(f"docid must be a string (docids are text, e.g. {str(docid)!r}), got {type(docid).__name__}")
        return self.score_at(query, self.index.locate(docid))

    def score_at(self, query: str, where: tuple[int, int] | None) -> float | None:
        """:meth:`document_score` of the document at ``where``, ``(shard, row)`` as
        :meth:`~retriever.index.Index.locate` gives it (``None``: no document), for a caller that
        located it already (a locate scans the shards' docids).

        Raises:
            QueryError: as :meth:`parse`, or ``where`` is no document of the index."""
        plan = self.plan(self.parse(query))
        if where is None:
            return None
        sh, d = self.shard_row(*where)
        total = 0
        for lst, w in zip(plan.lists.tolist(), plan.weights.tolist()):
            if lst >= sh.seg_ptr.shape[0] - 1:  # a list this shard was written without
                continue
            for s in range(sh.seg_ptr[lst], sh.seg_ptr[lst + 1]):  # documents ascend inside a segment
                seg = sh.postings[sh.seg_start[s]:sh.seg_start[s + 1]]
                i = int(np.searchsorted(seg, d))
                if i < seg.shape[0] and seg[i] == d:
                    total += w * int(sh.seg_impact[s])
                    break
        return total * plan.unit + plan.base

    def document(self, hit: Hit) -> dict:
        """The stored fields of a hit's document (:meth:`retriever.index.Shard.document`).

        Raises:
            QueryError: the hit's ``(shard, doc)`` is no document of the index."""
        sh, d = self.shard_row(hit.shard, hit.doc)
        return sh.document(d)

    def titles(self, hits: list[Hit]) -> list[str]:
        """The titles of the hits' documents, each shard's in one Arrow call (:meth:`document` reads
        each whole document: a search of Vaswani's abstracts at k 1,000 spent 26 ms on its titles, 6.6 searching).

        Raises:
            QueryError: a hit's ``(shard, doc)`` is no document of the index."""
        if not hits:
            return []
        shards, rows = np.array([h.shard for h in hits]), np.array([h.doc for h in hits])
        sizes = np.array([s.num_docs for s in self.index.shards], np.int64)
        if not (shards.dtype.kind == rows.dtype.kind == "i" and shards.min() >= 0 and shards.max() < len(sizes)
                and rows.min() >= 0 and (rows < sizes[shards]).all()):
            for h in hits:
                self.shard_row(h.shard, h.doc)  # raises, naming the first that is no document
        return self.index.titles(shards, rows)

    def shard_row(self, shard: int, row: int) -> tuple[Shard, int]:
        """The :class:`~retriever.index.Shard` ``shard`` and ``row`` when the index holds a document there,
        else a :class:`QueryError` (a row past a shard's end read as no posting, a score of just the
        offsets, and a negative row as a document counted from the end)."""
        shards = self.index.shards
        if isinstance(shard, (int, np.integer)) and isinstance(row, (int, np.integer)) and 0 <= shard < len(shards) \
                and 0 <= row < shards[shard].num_docs:
            return shards[shard], int(row)
        raise QueryError(f"no document at shard {shard!r}, row {row!r} of this index ({len(shards)} shard(s))")


def positive_int(value, name: str) -> None:
    """A count the caller gives (k, threads, a postings budget): an integer of at least 1."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise QueryError(f"{name} must be an integer >= 1, got {value!r}")


