"""OR mode of the score-at-a-time traversal (:mod:`retriever.kernel_saat`): a segment's contribution
added to every document it holds, with or without the histogram of accumulator values that keeps
``theta``, the k-th largest accumulator, exact."""

from __future__ import annotations

import numpy as np

from ckqti.jit import njit  # numba.njit; cache=True only where Numba can write a cache

BRANCH_FREE_DOCS = 1 << 16  # accumulators (uint32) of up to this many documents sit well inside a 512 KB L2


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
