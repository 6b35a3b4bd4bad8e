"""Numba kernels for top-k retrieval over impact-ordered segments.

Pure functions over flat arrays (see ``indexer.format`` for the layout); every one
also runs with ``NUMBA_DISABLE_JIT=1``. The caller owns scratch buffers (``acc``,
``touched``, ``hist``): they are zero on entry and restored to zero on exit, so a
query never pays for zero-filling an array of the collection's size.

Score-at-a-time traversal (Anh & Moffat's impact-ordered evaluation): the segments of
all query terms are processed in decreasing order of ``weight * impact``. Accumulators
are integers.

1. Warm-up: a short query (at most ``warmup`` postings: most tail queries) is added
   whole with no bookkeeping beyond the list of touched documents, and its top k is
   selected with a k-heap, or for a k that is not small beside the touched documents by
   the k-th value, found by a histogram (:func:`select_topk`); a longer one adds its first
   segments that way, up to ``warmup >> WARMUP_SHIFT`` postings.
2. OR mode: a histogram of accumulator values, built once from the touched documents,
   keeps ``theta``, the k-th largest accumulator, up to date in amortised O(1) per
   posting. ``R``, the sum over query terms of their next unprocessed contribution,
   bounds what any document can still gain.
3. AND mode, once ``theta > R``: no unseen document can enter the top k; only documents
   already seen whose accumulator plus ``R`` can still reach ``theta`` are updated (a
   bitset marks them). Each time ``R`` falls below 4/5 of its value at the last pruning,
   candidates that cannot reach ``theta`` are dropped; so they are too before a segment
   much longer than the candidates. A segment longer than the candidates times
   ``lookup_cost`` is not scanned: each candidate is looked up in it (the candidates sorted
   by document once, which pruning keeps).
4. Finish, once looking the few candidates up in every segment left costs less than scanning
   what is left: each remaining segment is merged against the candidates (a forward
   pass over the segment's skip entries, every ``SKIP_BLOCK``-th document, then a search
   in one block of postings), terms in decreasing order of contribution, dropping
   candidates that can no longer reach the k-th best after each term.

5. Dense restart (exact mode): a query still in OR mode after ``1 / DENSE_AFTER`` of its
   postings plus half the collection's documents has impacts that do not prune (uniform
   random impacts do not); its accumulators go back to zero and :func:`dense_topk` adds
   every posting with no bookkeeping, then ranks all accumulators in one pass.

Exact mode gives scores equal to brute force. Anytime mode stops once a postings budget
is spent, at a segment boundary (the finish by lookup reads no postings, so it is not
charged to the budget), and may prune with the bound ``R`` scaled by ``slack`` /
:data:`EXACT_SLACK` < 1 (a document is dropped once its accumulator plus the scaled bound
falls below ``theta``): a top-k document is then missed only when its score is within
(1 - slack) * R of the k-th best.
"""

from __future__ import annotations

import numpy as np

from ckqti.jit import njit  # numba.njit; cache=True only where Numba can write a cache

SKIP_BLOCK = 64  # postings per block of the two-level lookup
BRANCH_FREE_DOCS = 1 << 16  # accumulators (uint32) of up to this many documents sit well inside a 512 KB L2
SKIP_STRIDE = 8  # skip entries stepped over at a time before one by one (finish by lookup)
# A query whose postings exceed ``warmup`` warms up on warmup >> WARMUP_SHIFT postings only, so
# that the histogram can bound the k-th best (and AND mode start) before many documents
# are touched (WARMUP 16,384 and 4: +36-50% head-heavy QPS on the 100k synthetic index, +23% on
# SciFact, +2-3% at 1M, against 8,192 for both).
WARMUP_SHIFT = 4
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
# The finish merges every segment left against the candidates, short ones too, so it pays off later
# than one segment's lookups: at 32x (factors 16 and 64, and never finishing, within noise).
FINISH_FACTOR = 32
# Anytime mode finishes where exact mode did before session 31 (512 a lookup): the finish reads no
# postings, so it is not charged to the budget, and with a slack it drops candidates term by term;
# finishing at FINISH_FACTOR cost anytime agreement on the 1M benchmark (budget 20k 0.685 -> 0.615,
# slack 0.8 0.950 -> 0.924).
ANYTIME_FINISH_FACTOR = 4
# AND mode drops hopeless candidates each time the remaining bound falls below DEN / NUM
# (4/5) of its value at the last pruning (waiting for it to halve, before session 5, left
# more candidates to scan and look up; pruning at every segment cost more than it saved).
PRUNE_STEP_NUM, PRUNE_STEP_DEN = 5, 4
NO_SKIPS = np.zeros(0, np.uint32)  # no skip entries: lookups binary-search whole segments
NO_SKIP_PTR = np.zeros(1, np.int64)
NO_POST_IMPACT = np.zeros(0, np.uint8)  # no per-posting impacts: the warm-up goes segment by segment
# Per-posting impacts are derived at load when segments hold fewer postings than this on
# average: a learned index has a segment for each distinct impact of a term (SciFact's NDRM
# indexes: 2 postings a segment), and starting a loop a segment then costs more than the
# postings (the 1M synthetic index: 168 a segment, no copy).
POST_IMPACT_BELOW = 8
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
# A heap's root index. Calls pass it, counters start at np.int64(0) and flags are np.bool_, never a
# literal 0 or True: Numba compiles a callee once more for each literal argument (a first search, cold
# cache, compiled for 10.6 s with them and 8.9 s without; tests/retriever/test_kernels.py checks).
ROOT = np.int64(0)
# select_topk: a k-heap while the touched documents outnumber k more than SELECT_HEAP_RATIO times, else
# the k-th value by a histogram of SELECT_BUCKETS buckets, and the hits sorted by sort_hits (collect_topk
# takes them so too: its theta is exact). Session 41, out-of-tree A/B against the k-heap and heapsort
# (SciFact's 1,109 claims on the NDRM3 index, topk_arrays, us a query, identical hits): k = 1,000
# 99-103 -> 28-30, k = 100 24-26 -> 16-18, k = 10 unchanged; the ratio at 8, 32, 128 and never a heap:
# k = 100 23.0, 20.0, 17.7, 18.3; k = 10 +2%, 0, +3%, +7%. 256 and 4,096 buckets: within 5% of 1,024.
SELECT_HEAP_RATIO = 64
SELECT_BUCKETS = 1024
# sort_hits: hits sorted by an LSD radix sort, RADIX_BITS a pass, from RADIX_MIN hits (fewer: heapsort).
RADIX_BITS = 8
RADIX_SIZE = 1 << RADIX_BITS
RADIX_MASK = RADIX_SIZE - 1
RADIX_MIN = 64
SLACK_SHIFT = 10  # ``slack`` is in units of 1/1024
EXACT_SLACK = 1 << SLACK_SHIFT  # slack 1: prune with the true bound (exact)


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
def advanced_bound(bound, c, i, cur, end, seg_impact, weights):
    """:func:`remaining_bound` after term ``i`` (whose segment contributed ``c``) moved on one
    segment: only its part changes."""
    if cur[i] < end[i]:
        return bound - c + weights[i] * np.int64(seg_impact[cur[i]])
    return bound - c


@njit(nogil=True, cache=True, inline="always")
def raise_theta(old, new, hist, theta, cnt, k):
    """Keep ``theta`` (the k-th largest accumulator; 1 while fewer than k documents are touched)
    and ``cnt`` (documents at or above it) exact after one accumulator rose from ``old`` to ``new``
    (``hist`` already updated). ``theta`` can rise when a document reaches it from below (``cnt``
    grows) and when one at ``theta`` moves above it (``hist[theta]`` falls); checking the first
    alone, before session 40, left ``theta`` a lagging lower bound (k = 1: 96 against a best of
    116), though on the benchmark queries it changed no postings processed. ``new >= theta`` is
    tested first (it rarely holds): ``old <= theta <= new`` compiled to a hot loop that made
    head-heavy queries on the 1M synthetic index 2x slower."""
    if new >= theta and old <= theta:
        if old < theta:
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


@njit(nogil=True, cache=True, inline="always")
def accumulate_plain(postings, a0, a1, c, acc, touched, ntouched):
    """Warm-up OR mode: add ``c`` to every document of postings[a0:a1], listing new ones.

    While ``acc`` stays in a core's cache (up to :data:`BRANCH_FREE_DOCS` documents), branch-
    free: every document is written to the list's next slot, which only a new one keeps
    (``touched`` has one slot more than there are documents); whether a document is new is
    a coin toss when a query's terms share documents, and a branch on it cost 3x on SciFact.
    Beyond that, a branch: it is predictable there (most documents are new), and the
    branch-free form makes each posting wait for the previous one's cache miss."""
    if acc.shape[0] <= BRANCH_FREE_DOCS:
        for p in range(a0, a1):
            d = postings[p]
            old = acc[d]
            touched[ntouched] = d
            ntouched += old == 0
            acc[d] = old + c
        return ntouched
    for p in range(a0, a1):
        d = postings[p]
        old = acc[d]
        if old == 0:
            touched[ntouched] = d
            ntouched += 1
        acc[d] = old + c
    return ntouched


@njit(nogil=True, cache=True, inline="always")
def accumulate_flat(postings, post_impact, a0, a1, w, acc, touched, ntouched):
    """:func:`accumulate_plain` over a whole posting list, each posting adding ``w`` times its
    own impact (``post_impact``): one loop however many segments the list has.

    The two loops are written out again on purpose: sharing them with
    :func:`accumulate_plain` through an inlined one-posting helper made tail queries on the
    1M synthetic index 5x slower (session 5 A/B)."""
    if acc.shape[0] <= BRANCH_FREE_DOCS:
        for p in range(a0, a1):
            d = postings[p]
            old = acc[d]
            touched[ntouched] = d
            ntouched += old == 0
            acc[d] = old + w * np.int64(post_impact[p])
        return ntouched
    for p in range(a0, a1):
        d = postings[p]
        old = acc[d]
        if old == 0:
            touched[ntouched] = d
            ntouched += 1
        acc[d] = old + w * np.int64(post_impact[p])
    return ntouched


@njit(nogil=True, cache=True)
def fill_histogram(acc, touched, ntouched, hist, k):
    """Histogram of the touched accumulators, and the ``(theta, cnt)`` that
    :func:`raise_theta` would have kept: ``theta`` the k-th largest value (1 while fewer
    than k documents are touched), ``cnt`` the documents at or above it."""
    top = 0
    for i in range(ntouched):
        v = acc[touched[i]]
        hist[v] += 1
        if v > top:
            top = v
    if ntouched < k:
        return 1, ntouched
    cnt = 0
    theta = top
    while True:
        cnt += hist[theta]
        if cnt >= k:
            return theta, cnt
        theta -= 1


@njit(nogil=True, cache=True)
def heap_sift_down(hv, hd, i, n):
    """Min-heap on (value, -doc): the root is the worst kept hit."""
    while True:
        left = 2 * i + 1
        if left >= n:
            return
        j = left
        r = left + 1
        if r < n and (hv[r] < hv[left] or (hv[r] == hv[left] and hd[r] > hd[left])):
            j = r
        if hv[j] < hv[i] or (hv[j] == hv[i] and hd[j] > hd[i]):
            hv[i], hv[j] = hv[j], hv[i]
            hd[i], hd[j] = hd[j], hd[i]
            i = j
        else:
            return


@njit(nogil=True, cache=True)
def heap_sorted(hv, hd, n):
    """Sorts ``n`` hits in place (heapsort on the min-heap of :func:`heap_sift_down`: the worst
    goes last): values descending, ties by ascending document; returns ``n``. No allocation,
    where two stable argsorts made six arrays a query. The hits need not be a heap yet
    (:func:`heap_offer` makes one only once it holds k)."""
    for i in range(n // 2 - 1, -1, -1):
        heap_sift_down(hv, hd, i, n)
    for last in range(n - 1, 0, -1):
        hv[0], hv[last] = hv[last], hv[0]
        hd[0], hd[last] = hd[last], hd[0]
        heap_sift_down(hv, hd, ROOT, last)
    return n


@njit(nogil=True, cache=True)
def select_topk(acc, touched, ntouched, k, hist, hd, hv):
    """Top-k (document, accumulator) of the touched documents, ties by ascending document,
    written sorted to ``hd[:n], hv[:n]`` (int64[>= k]); returns ``n``. Resets the accumulators;
    ``hist`` (zero, more entries than the largest accumulator) is scratch, left zero.

    A k-heap while the touched documents outnumber k more than :data:`SELECT_HEAP_RATIO` times
    (most fail one comparison with its root), else :func:`select_by_histogram`."""
    n = min(k, ntouched)
    if n < ntouched <= k * SELECT_HEAP_RATIO:
        return select_by_histogram(acc, touched, ntouched, k, hist, hd, hv)
    for i in range(n):
        d = touched[i]
        hv[i], hd[i] = acc[d], d
        acc[d] = 0
    for i in range(n // 2 - 1, -1, -1):
        heap_sift_down(hv, hd, i, n)
    if n > 0:
        rv, rd = hv[0], hd[0]  # the root in registers: the stores to acc might alias hv, hd
        for i in range(n, ntouched):
            d = touched[i]
            v = np.int64(acc[d])
            acc[d] = 0
            if v > rv or (v == rv and d < rd):
                hv[0], hd[0] = v, d
                heap_sift_down(hv, hd, ROOT, n)
                rv, rd = hv[0], hd[0]
    return sort_hits(hv, hd, n, hist)


@njit(nogil=True, cache=True, inline="always")
def select_by_histogram(acc, touched, ntouched, k, hist, hd, hv):
    """:func:`select_topk` of more than k touched documents by the k-th value: a histogram of the
    values' top bits (:data:`SELECT_BUCKETS` buckets), then one of the boundary bucket's values
    among the documents in or above it (kept in place in ``touched``), then :func:`take_hits`."""
    top = np.int64(0)
    for i in range(ntouched):
        v = np.int64(acc[touched[i]])
        top = v if v > top else top
    shift = np.int64(0)
    while (top >> shift) >= SELECT_BUCKETS:
        shift += 1
    for i in range(ntouched):
        hist[np.int64(acc[touched[i]]) >> shift] += 1
    b = top >> shift  # the bucket of the k-th value, and how many are in buckets above it
    above = np.int64(0)
    while above + hist[b] < k:
        above += hist[b]
        b -= 1
    for j in range((top >> shift) + 1):
        hist[j] = 0
    lo = b << shift  # the boundary bucket's values: lo .. lo + 2**shift - 1
    width = np.int64(1) << shift  # <= top: fits in hist
    m = np.int64(0)
    for i in range(ntouched):  # keep the candidates (buckets >= b), in place
        d = touched[i]
        v = np.int64(acc[d])
        if v >= lo:
            touched[m] = d
            m += 1
            if v - lo < width:
                hist[v - lo] += 1
        else:
            acc[d] = 0
    t = width - 1
    while above + hist[t] < k:
        above += hist[t]
        t -= 1
    ties = hist[t]
    for j in range(width):
        hist[j] = 0
    return take_hits(acc, touched, m, k, lo + t, above, ties, hist, hd, hv)


@njit(nogil=True, cache=True)
def take_hits(acc, touched, m, k, theta, above, ties, hist, hd, hv):
    """The top k of ``touched[:m]`` given the k-th value ``theta``, ``above`` documents above it and
    ``ties`` at it (``above < k <= above + ties``): every document above it, and the ``k - above``
    smallest documents at it (the heap of :func:`heap_sift_down` in ``[above:k]`` while ties outnumber them),
    sorted into ``hd[:k], hv[:k]`` (:func:`sort_hits`); resets ``acc``, ``hist`` (zero) is scratch. Returns k."""
    need = k - above
    p = np.int64(0)
    h = np.int64(0)
    for i in range(m):
        d = touched[i]
        v = np.int64(acc[d])
        acc[d] = 0
        if v > theta:
            hv[p], hd[p] = v, d
            p += 1
        elif v == theta:
            if h < need:
                hv[above + h], hd[above + h] = v, d
                h += 1
                if h == need and ties > need:
                    for j in range(need // 2 - 1, -1, -1):
                        heap_sift_down(hv[above:k], hd[above:k], j, need)
            elif d < hd[above]:  # all tie: the heap's root is its largest document
                hd[above] = d
                heap_sift_down(hv[above:k], hd[above:k], ROOT, need)
    return sort_hits(hv, hd, k, hist)


@njit(nogil=True, cache=True, inline="always")
def bit_length(x):
    """Bits of the non-negative ``x`` (0 for 0)."""
    b = np.int64(0)
    while (x >> b) > 0:
        b += 1
    return b


@njit(nogil=True, cache=True)
def sort_hits(hv, hd, n, counts):
    """Sorts ``n`` hits in place, values descending, ties by ascending document; returns ``n``.
    Few hits: :func:`heap_sorted`. Else an LSD radix sort (:data:`RADIX_BITS` a pass) of one int64
    key a hit, ``(top - value) << document bits | document``, ascending in the sorted order: ``hv``
    holds the keys, ``hd`` is the other buffer, ``counts`` (zero, >= 2**RADIX_BITS entries, left
    zero) the digits' counts. Keys too wide for int64 fall back to :func:`heap_sorted`."""
    if n < RADIX_MIN or counts.shape[0] < RADIX_SIZE:
        return heap_sorted(hv, hd, n)
    top, low, dmax = hv[0], hv[0], hd[0]
    for i in range(1, n):
        v = hv[i]
        top = v if v > top else top
        low = v if v < low else low
        dmax = hd[i] if hd[i] > dmax else dmax
    dbits = bit_length(dmax)
    kbits = dbits + bit_length(top - low)
    if kbits > 62:
        return heap_sorted(hv, hd, n)
    for i in range(n):
        hv[i] = ((top - hv[i]) << dbits) | hd[i]
    src, dst = hv, hd
    shift = np.int64(0)
    while shift < kbits:
        for i in range(n):
            counts[(src[i] >> shift) & RADIX_MASK] += 1
        total = np.int64(0)
        for b in range(RADIX_SIZE):
            c = counts[b]
            counts[b] = total
            total += c
        for i in range(n):
            x = src[i]
            b = (x >> shift) & RADIX_MASK
            dst[counts[b]] = x
            counts[b] += 1
        for b in range(RADIX_SIZE):
            counts[b] = 0
        src, dst = dst, src
        shift += RADIX_BITS
    mask = (np.int64(1) << dbits) - 1
    for i in range(n):
        x = src[i]
        hv[i] = top - (x >> dbits)
        hd[i] = x & mask
    return n


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


@njit(nogil=True, cache=True, inline="always")
def skip_to(skips, p, hi, d):
    """The last skip entry at or after ``p`` (below ``hi``) that is at most ``d``: a forward walk,
    SKIP_STRIDE entries at a time, then one by one."""
    while p + SKIP_STRIDE < hi and skips[p + SKIP_STRIDE] <= d:
        p += SKIP_STRIDE
    while p + 1 < hi and skips[p + 1] <= d:
        p += 1
    return p


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
def collect_topk(acc, touched, ntouched, hist, k, theta, cnt, hd, hv):
    """Top-k (document, accumulator) from the touched documents, written sorted to
    ``hd[:n], hv[:n]`` (int64[>= k]); returns ``n``. Resets the buffers.

    Ties are broken by ascending document number. With ``theta`` exact (``cnt >= k``), the
    ``cnt`` documents at or above it are kept in place and :func:`take_hits` takes the hits from
    them (``hist`` tells how many tie at ``theta``), with no heap.
    """
    if cnt < k:  # fewer than k documents touched: all of them
        for i in range(ntouched):
            d = touched[i]
            v = np.int64(acc[d])
            hv[i], hd[i] = v, d
            hist[v] = 0
            acc[d] = 0
        return sort_hits(hv, hd, ntouched, hist)
    ties = hist[theta]
    m = np.int64(0)
    for i in range(ntouched):
        d = touched[i]
        v = np.int64(acc[d])
        hist[v] = 0
        if v >= theta:
            touched[m] = d
            m += 1
        else:
            acc[d] = 0
    return take_hits(acc, touched, m, k, theta, cnt - ties, ties, hist, hd, hv)


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
def heap_offer(hv, hd, n, k, v, d):
    """Offer hit ``(v, d)`` to a k-heap holding ``n`` hits; returns the new ``n``."""
    if n < k:
        hv[n], hd[n] = v, d
        n += 1
        if n == k:
            for i in range(n // 2 - 1, -1, -1):
                heap_sift_down(hv, hd, i, n)
    elif v > hv[0] or (v == hv[0] and d < hd[0]):
        hv[0], hd[0] = v, d
        heap_sift_down(hv, hd, ROOT, n)
    return n


@njit(nogil=True, cache=True)
def kth_largest(vals, docs, n, k, hv, hd):
    """The k-th largest of ``vals[:n]`` (the smallest when ``n < k``), kept by :func:`heap_offer`
    in ``hv, hd`` (scratch, >= k): no sort and no allocation, once per finished term."""
    h = np.int64(0)
    for i in range(n):
        h = heap_offer(hv, hd, h, k, vals[i], docs[i])
    if h == k:
        return hv[0]  # the heap's root: the worst of the k best
    low = hv[0] if h > 0 else 0  # fewer than k: not a heap yet, the smallest by a scan
    for i in range(1, h):
        low = min(low, hv[i])
    return low


@njit(nogil=True, cache=True)
def shell_sort(a, n):
    """Sorts ``a[:n]`` ascending in place (Shell's sort, Ciura's gaps). The candidates a finish by
    lookup sorts are few (at most postings left / (segments left x ``lookup_cost``), typically tens
    to hundreds), and ``np.sort``'s quicksort, with ``np.argsort``'s, took half of the first
    search's 15 s of compiling."""
    for gap in (701, 301, 132, 57, 23, 10, 4, 1):
        for i in range(gap, n):
            x = a[i]
            j = i
            while j >= gap and a[j - gap] > x:
                a[j] = a[j - gap]
                j -= gap
            a[j] = x


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


@njit(nogil=True, cache=True)
def warm_up(postings, seg_start, seg_impact, cur, end, weights, budget, acc, touched, warmup, left, post_impact):
    """Add whole segments without histogram or pruning: all ``left`` postings of the query
    when they total at most ``warmup`` (term by term: no search for the next segment, which
    matters as a learned index's term has a segment for each of its distinct impacts), else
    segments in traversal order while they total at most ``warmup >> WARMUP_SHIFT`` (and the
    budget lasts). With ``post_impact`` (each posting's impact, see :func:`posting_impacts`)
    the whole query goes in one flat loop a term, with no loop a segment to start and leave.
    Returns ``(ntouched, processed)``."""
    ntouched, processed = 0, 0
    if left <= warmup and (budget < 0 or left <= budget):  # everything goes in: the order does not matter
        if post_impact.shape[0] > 0:
            for i in range(cur.shape[0]):
                ntouched = accumulate_flat(postings, post_impact, seg_start[cur[i]], seg_start[end[i]], weights[i], acc, touched,
                                           ntouched)
                cur[i] = end[i]
            return ntouched, left
        for i in range(cur.shape[0]):
            for s in range(cur[i], end[i]):
                ntouched = accumulate_plain(postings, seg_start[s], seg_start[s + 1], weights[i] * np.int64(seg_impact[s]),
                                            acc, touched, ntouched)
            cur[i] = end[i]
        return ntouched, left
    while budget < 0 or processed < budget:
        i = next_term(cur, end, seg_impact, weights)
        if i < 0:
            break
        s = cur[i]
        a0, a1 = seg_start[s], seg_start[s + 1]
        if processed + a1 - a0 > (warmup >> WARMUP_SHIFT):
            break
        ntouched = accumulate_plain(postings, a0, a1, weights[i] * np.int64(seg_impact[s]), acc, touched, ntouched)
        processed += a1 - a0
        cur[i] += 1
    return ntouched, processed


@njit(nogil=True, cache=True)
def dense_topk(postings, seg_start, seg_impact, cur, end, weights, acc, post_impact, k, out_docs, out_vals):
    """Exact top-k by adding every remaining posting of the query with no bookkeeping, then
    one k-heap pass over all accumulators (which it resets): what a query whose postings
    outnumber the documents costs anyway, without the histogram and pruning that cannot pay
    for themselves when impacts barely differ within a list. Ties by ascending document, as
    :func:`select_topk`. Returns ``n``."""
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
def term_ranges(terms, seg_ptr, seg_start, cur, end):
    """Each term's segments ``cur[i]:end[i]`` (empty for a list the shard does not have: written
    before the term existed); returns the postings they hold."""
    left = np.int64(0)  # not the literal 0: a literal argument compiles warm_up twice
    for i in range(terms.shape[0]):
        if 0 <= terms[i] < seg_ptr.shape[0] - 1:
            cur[i], end[i] = seg_ptr[terms[i]], seg_ptr[terms[i] + 1]
        else:
            cur[i], end[i] = 0, 0
        left += seg_start[end[i]] - seg_start[cur[i]]
    return left


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


@njit(nogil=True, cache=True)
def saat_topk(postings, seg_start, seg_impact, seg_ptr, terms, weights, k, budget, acc, touched, hist, bits, skips, skip_ptr,
              post_impact, warmup, lookup_cost, slack, out_docs, out_vals):
    """Top-k documents by the sum of ``weight * impact`` over the query terms.

    Args:
        terms: int64[m] term (posting list) ids, those outside ``seg_ptr`` empty; weights:
            int64[>= m] positive integer weights (the first m are the terms'). A repeated id
            adds its list once per occurrence, as one occurrence with the summed weight would.
        k: results wanted; budget: postings to process at most (< 0: exact).
        acc: uint16/uint32/int64[num_docs] (wide enough for sum(weights)*255),
            touched: uint32/int64[num_docs + 1], hist: int64[>= sum(weights)*255+2],
            bits: uint64[num_docs // 64 + 1], all zero on entry and on exit.
        skips, skip_ptr: :func:`build_skips` of the shard (``NO_SKIPS, NO_SKIP_PTR``: plain binary search).
        post_impact: :func:`posting_impacts` of the shard, or ``NO_POST_IMPACT``.
        warmup: a query of at most this many postings is added whole without pruning; a
            longer one warms up on ``warmup >> WARMUP_SHIFT`` (0: the histogram and pruning
            work from the first segment).
        lookup_cost: a lookup's cost in postings scanned (:data:`LOOKUP_COST`): AND mode looks
            candidates up in a segment longer than this many postings a candidate, and the finish
            by lookup starts once candidates x segments left x this x :data:`FINISH_FACTOR`
            (anytime: :data:`ANYTIME_FINISH_FACTOR`) is below the postings left (smaller values look
            up and finish earlier).
        slack: the bound ``R`` is scaled by ``slack / EXACT_SLACK`` wherever it prunes
            (:data:`EXACT_SLACK`: exact; smaller: approximate, sooner).

        out_docs, out_vals: int64[>= k], where the hits go (written, not allocated: a
            returned array costs a call ~0.4 us of boxing).

    Returns:
        ``(n, processed)``: the hits are ``out_docs[:n]`` (shard-local documents) and
        ``out_vals[:n]`` (integer scores), best first, ties by ascending document;
        postings scanned.
    """
    m = terms.shape[0]
    cur = np.empty(m, np.int64)
    end = np.empty(m, np.int64)
    left = term_ranges(terms, seg_ptr, seg_start, cur, end)  # postings not yet processed
    ntouched, processed = warm_up(postings, seg_start, seg_impact, cur, end, weights, budget, acc, touched, warmup, left,
                                  post_impact)
    left -= processed
    if left == 0 or (budget >= 0 and processed >= budget):
        return select_topk(acc, touched, ntouched, k, hist, out_docs, out_vals), processed
    theta, cnt = fill_histogram(acc, touched, ntouched, hist, k)
    dense_at = dense_point(left + processed, acc.shape[0], budget, slack)
    finish_cost = lookup_cost * (FINISH_FACTOR if budget < 0 and slack >= EXACT_SLACK else ANYTIME_FINISH_FACTOR)
    bound = remaining_bound(cur, end, seg_impact, weights)
    eff = (bound * slack) >> SLACK_SHIFT
    and_mode = False
    is_sorted = False  # touched[:ntouched] ascending (pruning keeps the order)
    pruned_at = 0  # the bound at the last step's pruning (which then checks whether to finish)
    swept_at = 0  # the bound at the last pruning of either kind (step, or before a long segment)
    while True:
        if not and_mode and cnt >= k and theta > eff:
            and_mode = True
            pruned_at = swept_at = eff + 1
            set_bits(bits, touched, ntouched, np.bool_(True))  # not a literal: see ROOT
        if and_mode and PRUNE_STEP_NUM * eff < PRUNE_STEP_DEN * pruned_at:
            ntouched = prune(acc, touched, ntouched, hist, theta, eff, bits)
            pruned_at = swept_at = eff
            segs_left = 0
            for j in range(m):
                segs_left += end[j] - cur[j]
            if ntouched * segs_left * finish_cost < left:
                n = finish_by_lookup(postings, seg_start, seg_impact, cur, end, weights, acc, touched, ntouched, hist, k, skips,
                                     skip_ptr, slack, out_docs, out_vals)
                set_bits(bits, touched, ntouched, np.bool_(False))
                return n, processed
        if not and_mode and 0 <= dense_at <= processed and left > dense_at:
            n = restart_dense(postings, seg_start, seg_impact, seg_ptr, terms, weights, cur, end, acc, touched, ntouched,
                              hist, post_impact, k, out_docs, out_vals)
            return n, 2 * processed + left
        i = next_term(cur, end, seg_impact, weights)
        if i < 0 or (budget >= 0 and processed >= budget):
            break
        s = cur[i]
        c = weights[i] * np.int64(seg_impact[s])
        a0, a1 = seg_start[s], seg_start[s + 1]
        if and_mode:
            theta, cnt, ntouched, swept_at, is_sorted = and_segment(postings, seg_start, skips, skip_ptr, s, c, acc, touched,
                                                                    ntouched, hist, bits, theta, cnt, k, eff, swept_at,
                                                                    is_sorted, lookup_cost)
        else:
            ntouched, theta, cnt = accumulate(postings, a0, a1, c, acc, touched, ntouched, hist, theta, cnt, k)
        processed += a1 - a0
        left -= a1 - a0
        cur[i] += 1
        bound = advanced_bound(bound, c, i, cur, end, seg_impact, weights)
        eff = (bound * slack) >> SLACK_SHIFT
    if and_mode:
        set_bits(bits, touched, ntouched, np.bool_(False))
    return collect_topk(acc, touched, ntouched, hist, k, theta, cnt, out_docs, out_vals), processed


@njit(nogil=True, cache=True)
def saat_batch(postings, seg_start, seg_impact, seg_ptr, q_terms, q_weights, q_ptr, k, budget, acc, touched, hist, bits,
               skips, skip_ptr, post_impact, warmup, lookup_cost, slack, out_docs, out_vals, out_n, out_processed):
    """:func:`saat_topk` for many queries in one call (no Python between queries).

    Args:
        q_terms, q_weights: int64, query ``q``'s lists and weights at ``q_ptr[q]:q_ptr[q + 1]``.
        hist: sized for the largest ``sum(weights) * 255 + 2`` of the batch.
        out_docs, out_vals: int64[nq, k] (filled up to ``out_n[q]``); out_n, out_processed: int64[nq].
    Other arguments as :func:`saat_topk`.
    """
    for q in range(q_ptr.shape[0] - 1):
        a, b = q_ptr[q], q_ptr[q + 1]
        if b == a:
            out_n[q] = 0
            out_processed[q] = 0
            continue
        out_n[q], out_processed[q] = saat_topk(postings, seg_start, seg_impact, seg_ptr, q_terms[a:b], q_weights[a:b], k,
                                               budget, acc, touched, hist, bits, skips, skip_ptr, post_impact, warmup,
                                               lookup_cost, slack, out_docs[q], out_vals[q])


def brute_force_scores(postings, seg_start, seg_impact, seg_ptr, terms, weights, num_docs):
    """Reference: dense integer scores of every document (numpy, no pruning)."""
    scores = np.zeros(num_docs, np.int64)
    for t, w in zip(terms, weights):
        for s in range(seg_ptr[t], seg_ptr[t + 1]):
            a0, a1 = seg_start[s], seg_start[s + 1]
            np.add.at(scores, postings[a0:a1].astype(np.int64), int(w) * int(seg_impact[s]))
    return scores



@njit(nogil=True, cache=True)
def build_skips(postings, seg_start, block=SKIP_BLOCK):
    """Every ``block``-th document of every segment, for two-level lookups.

    Returns ``(skips, skip_ptr)``: segment ``s``'s entries are ``skips[skip_ptr[s]:skip_ptr[s + 1]]``,
    entry ``j`` being ``postings[seg_start[s] + j * block]``.
    """
    nseg = seg_start.shape[0] - 1
    skip_ptr = np.zeros(nseg + 1, np.int64)
    for s in range(nseg):
        skip_ptr[s + 1] = skip_ptr[s] + (seg_start[s + 1] - seg_start[s] + block - 1) // block
    skips = np.empty(skip_ptr[nseg], postings.dtype)
    for s in range(nseg):
        a0 = seg_start[s]
        for j in range(skip_ptr[s + 1] - skip_ptr[s]):
            skips[skip_ptr[s] + j] = postings[a0 + j * block]
    return skips, skip_ptr


def posting_impacts(postings, seg_start, seg_impact):
    """Each posting's impact (uint8, one byte a posting), when a shard's segments average fewer
    than :data:`POST_IMPACT_BELOW` postings; else :data:`NO_POST_IMPACT`."""
    nseg = seg_start.shape[0] - 1
    if nseg == 0 or postings.shape[0] >= POST_IMPACT_BELOW * nseg:
        return NO_POST_IMPACT
    return np.repeat(np.asarray(seg_impact[:nseg]), np.diff(np.asarray(seg_start))).astype(np.uint8)
