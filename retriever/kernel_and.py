"""AND mode of the score-at-a-time traversal (:mod:`retriever.kernel_saat`), once no unseen document
can enter the top k: only the candidates (documents seen, their bit set) that can still reach
``theta`` are updated, a segment scanned or, when much longer than the candidates, looked up
candidate by candidate through its skip entries; hopeless candidates are pruned; and the finish
by lookup, which merges every segment left against the few candidates. The bound a candidate
must beat is scaled by ``slack`` / :data:`EXACT_SLACK` (anytime mode)."""

from __future__ import annotations

import numpy as np

from ckqti.jit import njit  # numba.njit; cache=True only where Numba can write a cache
from retriever.kernel_accumulate import raise_theta
from retriever.kernel_postings import SKIP_BLOCK, contains, skip_to
from retriever.kernel_select import heap_offer, kth_largest, shell_sort, sort_hits

# What looking one candidate up in a segment costs (the share of a skip walk, then a binary search in
# a block of postings out of cache), in postings scanned in AND mode: the kernels' ``lookup_cost``
# argument (tests pass smaller values to exercise the lookups). AND mode looks a segment's
# candidates up when it holds more than candidates x LOOKUP_COST postings, and prunes first when it
# holds more than candidates x (LOOKUP_COST >> PRUNE_BEFORE_SHIFT); the finish by lookup starts
# once candidates x segments left x LOOKUP_COST x FINISH_FACTOR < postings left. Session 31,
# out-of-tree A/B of the batch kernel (alternated rounds, identical hits, us a query): head-heavy
# 100k 32.1-32.5 before (no lookups in AND mode, the finish at 512) against 30.0-30.4; 1M 200-205
# against 179-191; tail unchanged. Lookups from 16, 32, 64, 96, 192 or 256 postings a candidate and
# pruning first at 4 or 64 measured within noise of these (docs/BENCH_SEARCH.md, session 31).
LOOKUP_COST = 128
PRUNE_BEFORE_SHIFT = 3
SLACK_SHIFT = 10  # ``slack`` is in units of 1/1024
EXACT_SLACK = 1 << SLACK_SHIFT  # slack 1: prune with the true bound (exact)


@njit(nogil=True, cache=True, inline="always")
def raise_live(acc, hist, d, old, c, theta, cnt, k):
    """AND mode: live document ``d``'s accumulator from ``old`` to ``old + c``, its histogram and
    ``theta`` kept up to date; returns the new ``(theta, cnt)``."""
    hist[old] -= 1
    new = old + c
    acc[d] = new
    hist[new] += 1
    return raise_theta(old, new, hist, theta, cnt, k)


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
        theta, cnt = raise_live(acc, hist, d, old, c, theta, cnt, k)
    return theta, cnt


@njit(nogil=True, cache=True)
def lookup_live(postings, seg_start, skips, skip_ptr, s, docs, n, c, acc, hist, theta, cnt, k, bound):
    """AND mode by lookup: add ``c`` to each live candidate of ``docs[:n]`` (ascending) that segment
    ``s`` holds and that can still reach ``theta``: a forward walk over the segment's skip entries,
    then a binary search in one block (the whole segment without skip entries). Returns the new
    ``(theta, cnt)``, as :func:`accumulate_live`, whose scan it replaces for a segment much longer
    than the candidates."""
    a_beg, a_end = seg_start[s], seg_start[s + 1]
    has_skips = skip_ptr.shape[0] > s + 1
    lo, hi = (skip_ptr[s], skip_ptr[s + 1]) if has_skips else (0, 0)
    p = lo
    for j in range(n):
        d = docs[j]
        old = acc[d]
        if old + bound < theta:
            continue
        if has_skips:
            if skips[lo] > d:
                continue
            p = skip_to(skips, p, hi, d)
            a0 = a_beg + (p - lo) * SKIP_BLOCK
            hit = contains(postings, a0, min(a0 + SKIP_BLOCK, a_end), d)
        else:
            hit = contains(postings, a_beg, a_end, d)
        if hit:
            theta, cnt = raise_live(acc, hist, d, old, c, theta, cnt, k)
    return theta, cnt


@njit(nogil=True, cache=True, inline="always")
def and_segment(postings, seg_start, skips, skip_ptr, s, c, acc, touched, ntouched, hist, bits, theta, cnt, k, bound, swept_at,
                is_sorted, lookup_cost):
    """AND mode over segment ``s``: pruned first when it is much longer than the candidates (and the
    bound moved since ``swept_at``, the bound of the last pruning), then looked up candidate by
    candidate (sorted first, once: pruning keeps the order) when longer than ``lookup_cost``
    postings a candidate, else scanned. Returns the new ``(theta, cnt, ntouched, swept_at, is_sorted)``."""
    a0, a1 = seg_start[s], seg_start[s + 1]
    if a1 - a0 > ntouched * (lookup_cost >> PRUNE_BEFORE_SHIFT) and bound < swept_at:
        ntouched = prune(acc, touched, ntouched, hist, theta, bound, bits)
        swept_at = bound
    if a1 - a0 > ntouched * lookup_cost:
        if not is_sorted:
            shell_sort(touched, ntouched)
            is_sorted = True
        theta, cnt = lookup_live(postings, seg_start, skips, skip_ptr, s, touched, ntouched, c, acc, hist, theta, cnt, k, bound)
    else:
        theta, cnt = accumulate_live(postings, a0, a1, c, acc, bits, hist, theta, cnt, k, bound)
    return theta, cnt, ntouched, swept_at, is_sorted


@njit(nogil=True, cache=True)
def set_bits(bits, touched, ntouched, value):
    for i in range(ntouched):
        d = touched[i]
        if value:
            bits[d >> 6] |= np.uint64(1) << np.uint64(d & 63)
        else:
            bits[d >> 6] &= ~(np.uint64(1) << np.uint64(d & 63))


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
def order_descending(pot):
    """Indices of ``pot`` (a query's terms: a few) by decreasing value, ties by index (insertion sort)."""
    m = pot.shape[0]
    order = np.empty(m, np.int64)
    for i in range(m):
        j = i
        while j > 0 and pot[order[j - 1]] < pot[i]:
            order[j] = order[j - 1]
            j -= 1
        order[j] = i
    return order


@njit(nogil=True, cache=True)
def merge_segment(postings, seg_start, skips, skip_ptr, s, docs, found, n, c, vals, blk):
    """Add ``c`` to ``vals[j]`` for every ascending candidate ``docs[j]`` (j < n, not yet
    ``found`` for this term) that segment ``s`` holds.

    Two passes: a forward walk over the segment's skip entries (SKIP_STRIDE entries at a
    time, then one by one) notes each candidate's block in ``blk`` (scratch, >= n); then a
    binary search inside each noted block. Separating the walk from the searches lets the
    blocks' cache misses overlap instead of queueing behind the walk. Without skip entries,
    each candidate binary-searches the whole segment.
    """
    lo, hi = (skip_ptr[s], skip_ptr[s + 1]) if skip_ptr.shape[0] > s + 1 else (0, 0)
    a_beg, a_end = seg_start[s], seg_start[s + 1]
    if hi == lo:
        for j in range(n):
            if not found[j] and contains(postings, a_beg, a_end, docs[j]):
                found[j] = True
                vals[j] += c
        return
    p = lo
    for j in range(n):
        blk[j] = -1
        if found[j]:
            continue
        d = docs[j]
        if skips[lo] > d:
            continue
        p = skip_to(skips, p, hi, d)
        if skips[p] == d:
            found[j] = True
            vals[j] += c
        else:
            blk[j] = a_beg + (p - lo) * SKIP_BLOCK
    for j in range(n):
        a0 = blk[j]
        if a0 >= 0 and contains(postings, a0, min(a0 + SKIP_BLOCK, a_end), docs[j]):
            found[j] = True
            vals[j] += c


@njit(nogil=True, cache=True)
def finish_by_lookup(postings, seg_start, seg_impact, cur, end, weights, acc, touched, ntouched, hist, k, skips, skip_ptr,
                     slack, hd, hv):
    """Exact top-k of the remaining candidates, finishing their scores from the unprocessed
    segments by lookup instead of scanning them (documents ascend inside a segment).

    Candidates are sorted by document; terms go in decreasing order of their largest
    remaining contribution, and each of a term's segments is merged against the candidates
    not yet found in that term (a forward pass over its skip entries, then one block).
    After each term, candidates that cannot reach the k-th best lower bound even with every
    term left at its largest contribution are dropped. The top k go sorted to ``hd[:n],
    hv[:n]`` (int64[>= k], also scratch for :func:`kth_largest`); returns ``n``. Resets
    ``acc`` and ``hist``.
    """
    m = cur.shape[0]
    pot = np.zeros(m, np.int64)  # a term's largest remaining contribution
    for i in range(m):
        if cur[i] < end[i]:
            pot[i] = weights[i] * np.int64(seg_impact[cur[i]])
    rest = pot.sum()
    docs = touched[:ntouched].copy()
    shell_sort(docs, ntouched)
    vals = np.empty(ntouched, np.int64)
    for j in range(ntouched):
        d = docs[j]
        vals[j] = acc[d]
        hist[acc[d]] = 0
        acc[d] = 0
    n = ntouched
    found = np.zeros(n, np.bool_)
    blk = np.empty(n, np.int64)
    for ti in order_descending(pot):
        if pot[ti] == 0:
            break
        found[:n] = False
        for s in range(cur[ti], end[ti]):
            merge_segment(postings, seg_start, skips, skip_ptr, s, docs, found, n, weights[ti] * np.int64(seg_impact[s]), vals,
                          blk)
        rest -= pot[ti]
        floor = kth_largest(vals, docs, n, k, hv, hd)
        j = 0
        for i in range(n):  # keep, in document order, the candidates that can still make it
            if vals[i] + ((rest * slack) >> SLACK_SHIFT) >= floor:
                docs[j], vals[j] = docs[i], vals[i]
                j += 1
        n = j
    h = np.int64(0)
    for j in range(n):
        h = heap_offer(hv, hd, h, k, vals[j], docs[j])
    return sort_hits(hv, hd, h, hist)
