"""Exact top-k of a query by a plain numpy scan of its posting lists: no Numba.

A process that searches a few queries (``ckqti search``, :func:`ckqti.api.search`, a ``ckqti run``
over a small collection) spends more on starting Numba than on searching: importing it and loading
the cached kernels took 0.45 s of a 0.7 s ``ckqti search`` on the bundled sample, and the first
search after an install compiles them for 10-20 s. Adding up a query's postings with numpy answers
the same question, exactly, in microseconds to milliseconds (a list of a million postings: about
ten). ``Searcher(engine="auto")`` scans while the scans' estimated time (:func:`scan_seconds`) stays
below what loading the kernels costs; the kernels stay the engine for everything that searches
many queries over a large collection, for ``ckqti serve`` and for anytime mode, which this scan
does not have.

The hits are the kernels' (``retriever.kernel_saat.saat_topk`` in exact mode): documents scoring above
0, by integer score descending, then document number ascending."""

from __future__ import annotations

import threading

import numpy as np

# What a scan costs, to choose it over loading the kernels (Searcher(engine="auto")), measured on this
# project's 2-core machine and rounded up: seconds a query, a posting list and a shard, a posting summed
# in a dense array (and a document of the shard: the array filled and tested), a posting summed by
# sorting, a hit ranked. Against real scans (session 42, best of 3): SciFact's 1,109 claims over four
# indexes of 1,500 to 103,660 documents are estimated at 1.7-3.1x their time (their arrays fit a cache);
# synthetic 4-list queries over 100k and 1M documents at 0.55-1.6x.
SCAN_QUERY_S = 20e-6
SCAN_LIST_S = 3e-6
SCAN_POSTING_S = 15e-9
SCAN_DOC_S = 1.5e-9
SCAN_SORTED_POSTING_S = 30e-9
SCAN_HIT_S = 50e-9
# a dense scan's array out of cache: a document costs up to 2.4x as much, reached at this many documents
OUT_OF_CACHE_DOCS, OUT_OF_CACHE_FACTOR = 1_000_000, 1.4
# a query's postings below 1/3 of a shard's documents are summed by sorting them (session 42, 4 lists, ms sorted /
# dense: 100k documents and 10k postings 0.25 / 1.06, 88k 3.9 / 2.2; 1M and 99k 2.7 / 7.4, 885k 32 / 15)
SPARSE_RATIO = 3


def shard_has(seg_ptr: np.ndarray, lists: np.ndarray) -> np.ndarray:
    """Which of posting lists ``lists`` (int64) a shard has (bool): an id past its own is a list that did
    not exist when it was written."""
    return (lists >= 0) & (lists < seg_ptr.shape[0] - 1)


def query_postings(postings: np.ndarray, seg_start: np.ndarray, seg_impact: np.ndarray, seg_ptr: np.ndarray,
                   lists: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The documents (int64) of every posting of ``lists`` in a shard and what each adds to its
    document's score (``weight * impact``, int64). A list id past the shard's own (a list that did
    not exist when it was written) is empty here."""
    inside = shard_has(seg_ptr, lists)
    lists, weights = lists[inside], weights[inside]
    s0, s1 = seg_ptr[lists], seg_ptr[lists + 1]
    a0, a1 = seg_start[s0].tolist(), seg_start[s1].tolist()
    docs = [postings[x:y] for x, y in zip(a0, a1) if y > x]
    if not docs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    # every list's segments in one array (list after list, as docs are), each with its list's weight
    nseg = s1 - s0
    first = np.cumsum(nseg) - nseg  # where each list's segments start in segs
    segs = np.arange(int(nseg.sum())) + np.repeat(s0 - first, nseg)
    gains = np.repeat(seg_impact[segs].astype(np.int64) * np.repeat(weights, nseg), seg_start[segs + 1] - seg_start[segs])
    return np.concatenate(docs).astype(np.int64), gains


def scan_topk(postings: np.ndarray, seg_start: np.ndarray, seg_impact: np.ndarray, seg_ptr: np.ndarray,
              lists: np.ndarray, weights: np.ndarray, k: int, num_docs: int,
              ties: bool = False) -> tuple[np.ndarray, np.ndarray, int]:
    """Top-``k`` documents of one shard for posting lists ``lists`` (int64) weighted ``weights``
    (int64 > 0), every posting read.

    Returns:
        ``(vals, docs, processed)``: int64 integer scores descending, ties by document ascending,
        only documents scoring above 0: at most ``k`` of them, or with ``ties`` every document tied
        with the k-th score too (what a run needs to cut at ``k`` by docid, found in the same pass);
        and the postings read.
    """
    docs, gains = query_postings(postings, seg_start, seg_impact, seg_ptr, lists, weights)
    if docs.size == 0 or k < 1:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), int(docs.size)
    # float64 sums of integers stay exact below 2^53 (a query scores at most 1,024 terms x 128 x 255 a channel)
    if docs.size * SPARSE_RATIO < num_docs:  # few postings: sort them rather than fill and test an array a document
        hit, inverse = np.unique(docs, return_inverse=True)
        vals = np.bincount(inverse, weights=gains).astype(np.int64)
        keep = vals > 0
        hit, vals = hit[keep], vals[keep]
    else:
        scores = np.bincount(docs, weights=gains, minlength=num_docs).astype(np.int64)
        hit = np.flatnonzero(scores > 0)
        vals = scores[hit]
    if hit.size > k:
        kth = np.partition(vals, hit.size - k)[hit.size - k]  # the k-th largest score
        keep = vals >= kth  # all of the k-th score's ties; the lowest documents among them are kept below
        hit, vals = hit[keep], vals[keep]
    order = np.lexsort((hit, -vals))
    if not ties:
        order = order[:k]
    return vals[order], hit[order], int(docs.size)


def with_ties(vals: np.ndarray, k: int) -> int:
    """How many of hits ``vals`` (descending) rank ``k`` with every tie of the k-th score."""
    if vals.size <= k:
        return vals.size
    return k + int(np.count_nonzero(vals[k:] == vals[k - 1]))  # descending: the k-th's ties follow it


def list_postings(seg_start: np.ndarray, seg_ptr: np.ndarray, lists: np.ndarray) -> np.ndarray:
    """Postings (int64) of each posting list of ``lists`` (int64; ids past the shard's own are empty) in a shard."""
    inside = shard_has(seg_ptr, lists)
    lists = np.where(inside, lists, 0)
    return np.where(inside, seg_start[seg_ptr[lists + 1]] - seg_start[seg_ptr[lists]], 0)


def scan_seconds(shards, lists: np.ndarray, ptr: np.ndarray, k: int) -> float:
    """About how long :func:`scan_topk` takes for queries of posting lists ``lists[ptr[q]:ptr[q + 1]]``
    (int64) at ``k`` over ``shards`` (objects with ``seg_start``, ``seg_ptr`` and ``num_docs``), by the
    constants above."""
    seconds = 0.0
    for sh in shards:
        per_list = np.concatenate(([0], np.cumsum(list_postings(sh.seg_start, sh.seg_ptr, lists))))
        postings = per_list[ptr[1:]] - per_list[ptr[:-1]]
        sparse = postings * SPARSE_RATIO < sh.num_docs
        seconds += (ptr.size - 1) * SCAN_QUERY_S + lists.size * SCAN_LIST_S + float(np.minimum(postings, k).sum()) * SCAN_HIT_S
        seconds += float(postings[sparse].sum()) * SCAN_SORTED_POSTING_S
        doc_s = SCAN_DOC_S * (1 + OUT_OF_CACHE_FACTOR * min(1.0, sh.num_docs / OUT_OF_CACHE_DOCS))
        seconds += float(postings[~sparse].sum()) * SCAN_POSTING_S + int((~sparse).sum()) * sh.num_docs * doc_s
    return seconds


class ScanBudget:
    """Estimated seconds of scanning a process may still spend instead of loading the kernels: one for
    the whole process (``retriever.search.SCAN_BUDGET``), as the kernels, once loaded, serve every
    searcher in it; so a process that opens one searcher a run, as ``ckqti.api.run`` does, still goes
    to the kernels after that much scanning. Safe from any thread."""

    def __init__(self, seconds: float):
        self.left = float(seconds)
        self._lock = threading.Lock()

    def spend(self, seconds: float) -> bool:
        """Take ``seconds`` for a scan and say True, or, where less is left, say False and keep none
        (every later search goes to the kernels: scanning on would only add to what loading costs)."""
        with self._lock:
            if seconds > self.left:
                self.left = 0.0
                return False
            self.left -= seconds
            return True
