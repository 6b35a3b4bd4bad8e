"""OR mode's accumulators and the histogram that keeps the k-th largest exact."""

from __future__ import annotations

import numpy as np
import pytest

from retriever.kernel_accumulate import accumulate, fill_histogram


def kth_and_histogram(acc, touched, ntouched, hist, k):
    """The touched accumulators' k-th largest (1 when fewer than k) and values, after checking that
    ``hist`` is their histogram."""
    vals = acc[touched[:ntouched]].astype(np.int64)
    assert np.array_equal(hist, np.bincount(vals, minlength=hist.size)) and (vals > 0).all()
    return (int(np.sort(vals)[::-1][k - 1]) if ntouched >= k else 1), vals


@pytest.mark.parametrize("k", [1, 3, 10, 60])
def test_theta_and_count_track_the_kth_largest_accumulator(k):
    """OR mode's bookkeeping against a sort after every segment. :func:`fill_histogram` gives the
    k-th largest accumulator as ``theta`` (1 while fewer than k documents are touched, also with
    exactly k) and the documents at or above it as ``cnt``; :func:`accumulate` keeps both exact,
    also while documents at ``theta`` move above it (a raise checked only when a document reaches
    ``theta`` from below left it lagging: k = 1, 96 against a best of 116). A ``theta`` too low
    still gives exact hits, only later pruning: brute force cannot see it."""
    rng = np.random.default_rng(k)
    num_docs = 50
    for trial in range(30):
        acc = np.zeros(num_docs, np.uint32)
        touched = np.zeros(num_docs + 1, np.int64)
        hist = np.zeros(64 * 40 + 2, np.int64)
        segments = [np.sort(rng.choice(num_docs, int(rng.integers(1, 12)), replace=False)) for _ in range(40)]
        contributions = rng.integers(1, 4 if trial % 2 else 40, len(segments))  # few distinct values: ties
        warm = 0 if trial % 5 == 0 else int(rng.integers(0, 6))
        ntouched = 0
        for seg, c in zip(segments[:warm], contributions[:warm]):  # the warm-up's plain adds
            for d in seg:
                if acc[d] == 0:
                    touched[ntouched] = d
                    ntouched += 1
                acc[d] += c
        if trial % 5 == 0:  # exactly k documents touched when the histogram is built, none at 1
            for d in range(min(k, num_docs)):
                touched[ntouched], acc[d] = d, 2 + d % 3
                ntouched += 1
        theta, cnt = fill_histogram(acc, touched, np.int64(ntouched), hist, np.int64(k))

        kth, vals = kth_and_histogram(acc, touched, ntouched, hist, k)
        assert (theta, cnt) == (kth, int((vals >= kth).sum())), trial
        for seg, c in zip(segments[warm:], contributions[warm:]):
            ntouched, theta, cnt = accumulate(seg.astype(np.uint32), np.int64(0), np.int64(seg.size), np.int64(c), acc, touched,
                                              np.int64(ntouched), hist, theta, cnt, np.int64(k))
            kth, vals = kth_and_histogram(acc, touched, ntouched, hist, k)
            assert (theta, cnt) == (kth, int((vals >= kth).sum())), trial
