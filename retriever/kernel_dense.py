"""The dense path of exact mode: a query whose impacts do not prune restarts, adds every posting
with no bookkeeping, then ranks all accumulators a block at a time (step 5 of
:mod:`retriever.kernel_saat`)."""

from __future__ import annotations

import numpy as np

from ckqti.jit import njit  # numba.njit; cache=True only where Numba can write a cache
from retriever.kernel_and import EXACT_SLACK
from retriever.kernel_postings import term_ranges
from retriever.kernel_select import ROOT, heap_sift_down, heap_sorted

# Exact mode gives up score-at-a-time for :func:`dense_topk` when, after 1/DENSE_AFTER of
# (the query's postings + half the documents) postings, it is still in OR mode (nothing
# pruned yet): impacts that barely differ within a list (uniform random impacts) keep OR
# mode's per-posting bookkeeping going for most of the query, at several times the cost of a
# plain add. Session 13, 200 head-heavy queries, mean us a query (out-of-tree script):
# 200k documents x uniform impacts 1,267-1,374 without, 873 at 4, 549 at 8, 461 at 16 (a
# dense pass alone: 380-440); 1M x idf impacts 209-252 without, 217 at 4, 224 at 8, 428 at 16.
DENSE_AFTER = 8
# dense_select scans all accumulators a block at a time: the block's maximum first (a vectorized
# loop), the heap only for a block that beats the k-th best, then the block zeroed. One pass over
# 100k uint16 accumulators: 52 us document by document, 11 us so; 1M: 515-645 and 80-90 us
# (session 19, out of tree).
DENSE_BLOCK = 1024


@njit(nogil=True, cache=True)
def dense_topk(postings, seg_start, seg_impact, cur, end, weights, acc, post_impact, k, out_docs, out_vals):
    """Exact top-k by adding every remaining posting of the query with no bookkeeping, then
    one k-heap pass over all accumulators (which it resets): what a query whose postings
    outnumber the documents costs anyway, without the histogram and pruning that cannot pay
    for themselves when impacts barely differ within a list. Ties by ascending document, as
    :func:`~retriever.kernel_select.select_topk`. Returns ``n``."""
    for i in range(cur.shape[0]):
        if post_impact.shape[0] > 0:
            w = weights[i]
            for p in range(seg_start[cur[i]], seg_start[end[i]]):
                d = postings[p]
                acc[d] = acc[d] + w * np.int64(post_impact[p])
        else:
            for s in range(cur[i], end[i]):
                c = weights[i] * np.int64(seg_impact[s])
                for p in range(seg_start[s], seg_start[s + 1]):
                    d = postings[p]
                    acc[d] = acc[d] + c
    return dense_select(acc, k, out_docs, out_vals)


@njit(nogil=True, cache=True)
def dense_select(acc, k, out_docs, out_vals):
    """The k best nonzero accumulators of all documents, sorted (ties by ascending document),
    written to ``out_docs[:n], out_vals[:n]``; every accumulator is reset. Returns ``n``."""
    num_docs = acc.shape[0]
    if k < 1:
        acc[:] = 0
        return 0
    n, d = 0, 0
    while d < num_docs and n < k:  # the first k touched documents fill the heap
        v = np.int64(acc[d])
        if v != 0:
            acc[d] = 0
            out_vals[n], out_docs[n] = v, d
            n += 1
        d += 1
    if n < k:  # fewer documents than k touched: no heap to keep
        return heap_sorted(out_vals, out_docs, n)
    for j in range(k // 2 - 1, -1, -1):
        heap_sift_down(out_vals, out_docs, j, k)
    rv = out_vals[0]  # >= 1, so an untouched document (0) never enters: no branch on it
    for b0 in range(d, num_docs, DENSE_BLOCK):
        block = acc[b0:min(b0 + DENSE_BLOCK, num_docs)]  # a view: indices from 0 let LLVM vectorize its loops
        if np.int64(block_max(block)) > rv:  # rare once the heap holds good scores
            for j in range(block.shape[0]):
                v = np.int64(block[j])
                if v > rv:  # documents come in ascending order: a tie with the root never displaces it
                    out_vals[0], out_docs[0] = v, b0 + j
                    heap_sift_down(out_vals, out_docs, ROOT, k)
                    rv = out_vals[0]
        block[:] = 0
    return heap_sorted(out_vals, out_docs, k)


@njit(nogil=True, cache=True, inline="always")
def block_max(a):
    """The largest value of a non-empty array (a plain loop from index 0, which LLVM vectorizes)."""
    m = a[0]
    for i in range(1, a.shape[0]):
        x = a[i]
        m = x if x > m else m
    return m


@njit(nogil=True, cache=True, inline="always")
def dense_point(postings_total, num_docs, budget, slack):
    """Postings after which exact mode, still in OR mode, restarts dense (-1: never)."""
    if budget >= 0 or slack < EXACT_SLACK:
        return -1
    return (postings_total + num_docs // 2) // DENSE_AFTER


@njit(nogil=True, cache=True)
def restart_dense(postings, seg_start, seg_impact, seg_ptr, terms, weights, cur, end, acc, touched, ntouched, hist,
                  post_impact, k, out_docs, out_vals):
    """OR mode given up (:data:`DENSE_AFTER`): the touched accumulators and their histogram
    back to zero, then :func:`dense_topk` over every posting of the query from the start."""
    for j in range(ntouched):
        d = touched[j]
        hist[acc[d]] = 0
        acc[d] = 0
    term_ranges(terms, seg_ptr, seg_start, cur, end)
    return dense_topk(postings, seg_start, seg_impact, cur, end, weights, acc, post_impact, k, out_docs, out_vals)
