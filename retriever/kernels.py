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
def gather_segments(seg_ptr, seg_impact, terms, weights):
    """The query's segments in processing order.

    Returns ``(segs, contrib, owner, first_contrib)``: segment ids sorted by
    ``weight * impact`` descending (stable, so each term's segments stay in order),
    their contributions, the query-term index owning each, and each term's first
    (largest) contribution.
    """
    m = terms.shape[0]
    n = 0
    for i in range(m):
        n += seg_ptr[terms[i] + 1] - seg_ptr[terms[i]]
    segs = np.empty(n, np.int64)
    contrib = np.empty(n, np.int64)
    owner = np.empty(n, np.int64)
    first = np.zeros(m, np.int64)
    j = 0
    for i in range(m):
        a, b = seg_ptr[terms[i]], seg_ptr[terms[i] + 1]
        if b > a:
            first[i] = weights[i] * np.int64(seg_impact[a])
        for s in range(a, b):
            segs[j] = s
            contrib[j] = weights[i] * np.int64(seg_impact[s])
            owner[j] = i
            j += 1
    order = np.argsort(-contrib, kind="mergesort")
    return segs[order], contrib[order], owner[order], first


@njit(nogil=True, cache=True)
def accumulate(postings, a0, a1, c, acc, touched, ntouched, hist, theta, cnt, k, and_mode, bound):
    """Add contribution ``c`` to the documents of postings[a0:a1].

    In AND mode only documents already seen whose accumulator plus ``bound`` reaches
    ``theta`` are updated. Returns the new ``(ntouched, theta, cnt)``.
    """
    for p in range(a0, a1):
        d = postings[p]
        old = acc[d]
        if old == 0:
            if and_mode:
                continue
            touched[ntouched] = d
            ntouched += 1
        else:
            if and_mode and old + bound < theta:
                continue
            hist[old] -= 1
        new = old + c
        acc[d] = new
        hist[new] += 1
        if old < theta and new >= theta:
            cnt += 1
            while cnt - hist[theta] >= k:
                cnt -= hist[theta]
                theta += 1
    return ntouched, theta, cnt


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
def saat_topk(postings, seg_start, seg_impact, seg_ptr, terms, weights, k, budget, acc, touched, hist):
    """Top-k documents by the sum of ``weight * impact`` over the query terms.

    Args:
        terms: int64[m] distinct term ids; weights: int64[m] positive integer weights.
        k: results wanted; budget: postings to process at most (< 0: exact).
        acc: uint32/int64[num_docs], touched: int64[num_docs], hist: int64[>= sum(weights)*255+1],
            all zero on entry and on exit.

    Returns:
        ``(docs, scores, processed)``: int64[<=k] shard-local documents, int64 integer
        scores, postings processed.
    """
    segs, contrib, owner, nxt = gather_segments(seg_ptr, seg_impact, terms, weights)
    bound = 0
    for i in range(nxt.shape[0]):
        bound += nxt[i]
    theta, cnt, ntouched, processed = 1, 0, 0, 0
    and_mode = False
    for j in range(segs.shape[0]):
        if budget >= 0 and processed >= budget:
            break
        s, c, i = segs[j], contrib[j], owner[j]
        a0, a1 = seg_start[s], seg_start[s + 1]
        ntouched, theta, cnt = accumulate(
            postings, a0, a1, c, acc, touched, ntouched, hist, theta, cnt, k, and_mode, bound
        )
        processed += a1 - a0
        # the term's next segment (if it has one) now bounds what it can still add
        bound -= c
        if s + 1 < seg_ptr[terms[i] + 1]:
            nxt[i] = weights[i] * np.int64(seg_impact[s + 1])
            bound += nxt[i]
        else:
            nxt[i] = 0
        if not and_mode and cnt >= k and theta > bound:
            and_mode = True
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
