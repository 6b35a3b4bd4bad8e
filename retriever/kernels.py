"""Numba kernels for top-k retrieval over impact-ordered segments.

Pure functions over flat arrays (see ``indexer.format`` for the layout); every one
also runs with ``NUMBA_DISABLE_JIT=1``. The caller owns scratch buffers (``acc``,
``touched``, ``hist``): they are zero on entry and restored to zero on exit, so a
query never pays for zero-filling an array of the collection's size.

Score-at-a-time traversal (Anh & Moffat's impact-ordered evaluation): the segments
of all query terms are processed in decreasing order of ``weight * impact``.
Accumulators are integers. A histogram of accumulator values keeps ``theta``, the
k-th largest accumulator, up to date in amortised O(1) per posting. ``R``, the sum
over query terms of their next unprocessed contribution, bounds what any document
can still gain. Once ``theta > R`` no unseen document can enter the top k, and the
traversal switches from OR mode (every posting) to AND mode (only documents already
seen whose accumulator plus ``R`` can still reach ``theta``). Exact mode processes
all segments, so final scores are exact; anytime mode stops once a postings budget
is spent, at a segment boundary.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def next_term(cur, end, seg_impact, weights):
    """Index of the query term whose next segment contributes most (-1 when all are done)."""
    best, best_c = -1, -1
    for i in range(cur.shape[0]):
        if cur[i] < end[i]:
            c = weights[i] * np.int64(seg_impact[cur[i]])
            if c > best_c:
                best, best_c = i, c
    return best


@njit(nogil=True, cache=True)
def remaining_bound(cur, end, seg_impact, weights):
    """Sum over query terms of their next segment's contribution: what any document can still gain."""
    r = 0
    for i in range(cur.shape[0]):
        if cur[i] < end[i]:
            r += weights[i] * np.int64(seg_impact[cur[i]])
    return r


@njit(nogil=True, cache=True, inline="always")
def raise_theta(old, new, hist, theta, cnt, k):
    """Keep ``theta`` (the k-th largest accumulator) and ``cnt`` (documents at or above it)
    up to date after one accumulator moved from ``old`` to ``new`` (``hist`` already updated)."""
    if old < theta and new >= theta:
        cnt += 1
        while cnt - hist[theta] >= k:
            cnt -= hist[theta]
            theta += 1
    return theta, cnt


@njit(nogil=True, cache=True)
def accumulate(postings, a0, a1, c, acc, touched, ntouched, hist, theta, cnt, k):
    """OR mode: add contribution ``c`` to every document of postings[a0:a1], listing the
    documents seen for the first time. Returns the new ``(ntouched, theta, cnt)``."""
    for p in range(a0, a1):
        d = postings[p]
        old = acc[d]
        if old == 0:
            touched[ntouched] = d
            ntouched += 1
        else:
            hist[old] -= 1
        new = old + c
        acc[d] = new
        hist[new] += 1
        theta, cnt = raise_theta(old, new, hist, theta, cnt, k)
    return ntouched, theta, cnt


@njit(nogil=True, cache=True)
def accumulate_live(postings, a0, a1, c, acc, bits, hist, theta, cnt, k, bound):
    """AND mode: add ``c`` only to live documents (their bit set in ``bits``) that can still
    reach ``theta``. The bitset (one bit a document) stays in cache where ``acc`` would not.
    Returns the new ``(theta, cnt)``."""
    for p in range(a0, a1):
        d = postings[p]
        if not (bits[d >> 6] >> (d & 63)) & 1:
            continue
        old = acc[d]
        if old + bound < theta:
            continue
        hist[old] -= 1
        new = old + c
        acc[d] = new
        hist[new] += 1
        theta, cnt = raise_theta(old, new, hist, theta, cnt, k)
    return theta, cnt


@njit(nogil=True, cache=True)
def set_bits(bits, touched, ntouched, value):
    for i in range(ntouched):
        d = touched[i]
        if value:
            bits[d >> 6] |= np.uint64(1) << np.uint64(d & 63)
        else:
            bits[d >> 6] &= ~(np.uint64(1) << np.uint64(d & 63))


@njit(nogil=True, cache=True)
def collect_topk(acc, touched, ntouched, hist, k, theta, cnt):
    """Top-k (document, accumulator) from the touched documents; resets the buffers.

    Ties are broken by ascending document number.
    """
    floor = theta if cnt >= k else 1
    m = 0
    for i in range(ntouched):
        if acc[touched[i]] >= floor:
            m += 1
    docs = np.empty(m, np.int64)
    vals = np.empty(m, np.int64)
    j = 0
    for i in range(ntouched):
        d = touched[i]
        if acc[d] >= floor:
            docs[j] = d
            vals[j] = acc[d]
            j += 1
        hist[acc[d]] = 0
        acc[d] = 0
    # sort by value desc, doc asc: docs are in touch order, so sort docs first (stable)
    o1 = np.argsort(docs, kind="mergesort")
    docs, vals = docs[o1], vals[o1]
    o2 = np.argsort(-vals, kind="mergesort")
    n = min(k, m)
    return docs[o2[:n]], vals[o2[:n]]


@njit(nogil=True, cache=True)
def prune(acc, touched, ntouched, hist, theta, bound, bits):
    """Drop documents that can no longer reach ``theta`` (accumulator reset to 0, bit
    cleared, so AND mode skips them); returns the new count of touched documents."""
    j = 0
    for i in range(ntouched):
        d = touched[i]
        if acc[d] + bound < theta:
            hist[acc[d]] -= 1
            acc[d] = 0
            bits[d >> 6] &= ~(np.uint64(1) << np.uint64(d & 63))
        else:
            touched[j] = d
            j += 1
    return j


@njit(nogil=True, cache=True)
def contains(postings, a0, a1, d):
    """Binary search for document ``d`` in the ascending ``postings[a0:a1]``."""
    lo, hi = a0, a1
    while lo < hi:
        mid = (lo + hi) >> 1
        if postings[mid] < d:
            lo = mid + 1
        else:
            hi = mid
    return lo < a1 and postings[lo] == d


@njit(nogil=True, cache=True)
def complete_by_lookup(postings, seg_start, seg_impact, cur, end, weights, acc, touched, ntouched, hist):
    """Finish the scores of the remaining candidates by binary search in every unprocessed
    segment (documents ascend inside a segment) instead of scanning its postings."""
    for i in range(cur.shape[0]):
        for s in range(cur[i], end[i]):
            c = weights[i] * np.int64(seg_impact[s])
            a0, a1 = seg_start[s], seg_start[s + 1]
            for j in range(ntouched):
                d = touched[j]
                if contains(postings, a0, a1, d):
                    hist[acc[d]] -= 1
                    acc[d] += c
                    hist[acc[d]] += 1
        cur[i] = end[i]


@njit(nogil=True, cache=True)
def saat_topk(postings, seg_start, seg_impact, seg_ptr, terms, weights, k, budget, acc, touched, hist, bits):
    """Top-k documents by the sum of ``weight * impact`` over the query terms.

    Args:
        terms: int64[m] distinct term ids; weights: int64[m] positive integer weights.
        k: results wanted; budget: postings to process at most (< 0: exact).
        acc: uint32/int64[num_docs], touched: int64[num_docs], hist: int64[>= sum(weights)*255+2],
            bits: uint64[num_docs // 64 + 1], all zero on entry and on exit.

    Returns:
        ``(docs, scores, processed)``: int64[<=k] shard-local documents, int64 integer
        scores, postings scanned.
    """
    m = terms.shape[0]
    cur = np.empty(m, np.int64)
    end = np.empty(m, np.int64)
    left = 0  # postings not yet processed
    for i in range(m):
        cur[i], end[i] = seg_ptr[terms[i]], seg_ptr[terms[i] + 1]
        left += seg_start[end[i]] - seg_start[cur[i]]
    bound = remaining_bound(cur, end, seg_impact, weights)
    theta, cnt, ntouched, processed = 1, 0, 0, 0
    and_mode = False
    pruned_at = 0
    while True:
        i = next_term(cur, end, seg_impact, weights)
        if i < 0 or (budget >= 0 and processed >= budget):
            break
        s = cur[i]
        c = weights[i] * np.int64(seg_impact[s])
        a0, a1 = seg_start[s], seg_start[s + 1]
        if and_mode:
            theta, cnt = accumulate_live(postings, a0, a1, c, acc, bits, hist, theta, cnt, k, bound)
        else:
            ntouched, theta, cnt = accumulate(postings, a0, a1, c, acc, touched, ntouched, hist, theta, cnt, k)
        processed += a1 - a0
        left -= a1 - a0
        cur[i] += 1
        bound = remaining_bound(cur, end, seg_impact, weights)
        if not and_mode and cnt >= k and theta > bound:
            and_mode = True
            pruned_at = bound + 1
            set_bits(bits, touched, ntouched, True)
        if and_mode and 2 * bound < pruned_at:
            ntouched = prune(acc, touched, ntouched, hist, theta, bound, bits)
            pruned_at = bound
            segs_left = 0
            for j in range(m):
                segs_left += end[j] - cur[j]
            if budget < 0 and ntouched * segs_left * 24 < left:
                complete_by_lookup(postings, seg_start, seg_impact, cur, end, weights, acc, touched, ntouched, hist)
                break
    if and_mode:
        set_bits(bits, touched, ntouched, False)
    docs, vals = collect_topk(acc, touched, ntouched, hist, k, theta, cnt)
    return docs, vals, processed


def brute_force_scores(postings, seg_start, seg_impact, seg_ptr, terms, weights, num_docs):
    """Reference: dense integer scores of every document (numpy, no pruning)."""
    scores = np.zeros(num_docs, np.int64)
    for t, w in zip(terms, weights):
        for s in range(seg_ptr[t], seg_ptr[t + 1]):
            a0, a1 = seg_start[s], seg_start[s + 1]
            np.add.at(scores, postings[a0:a1].astype(np.int64), int(w) * int(seg_impact[s]))
    return scores
