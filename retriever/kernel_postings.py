"""A shard's postings as the search kernels read them: a query term's segments, skip entries
(every ``SKIP_BLOCK``-th document of a segment) and the lookups through them, and each posting's
impact where segments are short (see ``indexer.format`` for the layout). Skip entries and impacts
are derived when a shard is first searched (:class:`retriever.index.Shard`)."""

from __future__ import annotations

import numpy as np

from ckqti.jit import njit  # numba.njit; cache=True only where Numba can write a cache

SKIP_BLOCK = 64  # postings per block of the two-level lookup
SKIP_STRIDE = 8  # skip entries stepped over at a time before one by one (finish by lookup)
NO_SKIPS = np.zeros(0, np.uint32)  # no skip entries: lookups binary-search whole segments
NO_SKIP_PTR = np.zeros(1, np.int64)
NO_POST_IMPACT = np.zeros(0, np.uint8)  # no per-posting impacts: the warm-up goes segment by segment
# Per-posting impacts are derived at load when segments hold fewer postings than this on
# average: a learned index has a segment for each distinct impact of a term (SciFact's NDRM
# indexes: 2 postings a segment), and starting a loop a segment then costs more than the
# postings (the 1M synthetic index: 168 a segment, no copy).
POST_IMPACT_BELOW = 8


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
