"""Top-k selection for the search kernels: the k best touched accumulators, best first, ties by
ascending document, by a k-heap or by the k-th value found with a histogram, then sorted (a radix
sort, heapsort for few hits); the k-th largest of a few candidates (the finish by lookup); a sort
of candidate documents."""

from __future__ import annotations

import numpy as np

from ckqti.jit import njit  # numba.njit; cache=True only where Numba can write a cache

# A heap's root index. Calls pass it, counters start at np.int64(0) and flags are np.bool_, never a
# literal 0 or True: Numba compiles a callee once more for each literal argument (a first search, cold
# cache, compiled for 10.6 s with them and 8.9 s without; tests/retriever/test_kernel_saat.py checks).
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
