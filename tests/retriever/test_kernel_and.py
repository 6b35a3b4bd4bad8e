"""AND mode: lookups, pruning, ties kept at the k-th score, and the finish by lookup."""

from __future__ import annotations

import numpy as np
import pytest

from retriever.kernel_and import EXACT_SLACK, LOOKUP_COST, finish_by_lookup, merge_segment, order_descending
from retriever.kernel_postings import NO_POST_IMPACT, NO_SKIP_PTR, NO_SKIPS, build_skips
from retriever.kernel_saat import saat_topk
from tests.retriever.kernel_cases import build, random_index, search


@pytest.mark.parametrize("lookup_cost", [1, 4, LOOKUP_COST])
def test_and_mode_lookups_change_no_hit_and_no_count(lookup_cost, monkeypatch):
    """AND mode's lookups, and the pruning before a long segment, change nothing but speed: the
    kernel gives the same hits and postings counts as its own code with every AND-mode segment
    scanned (``saat_topk.py_func`` with ``and_segment`` a plain scan: AND mode as before session 31,
    the finish as now), in exact and anytime modes. Brute force cannot see a pruning before a long
    segment that moves the step pruning's schedule, and with it the finish (e91a698's kernel did:
    exact hits kept, anytime agreement down on the 1M benchmark); this test fails on that kernel."""
    from retriever import kernel_and, kernel_saat

    def scanned(postings, seg_start, skips, skip_ptr, s, c, acc, touched, ntouched, hist, bits, theta, cnt, k, bound,
                swept_at, is_sorted, lookup_cost):
        nonlocal looked_up  # segments the kernel looks up (its candidates, pruned or not, are at most these)
        looked_up += seg_start[s + 1] - seg_start[s] > ntouched * lookup_cost
        theta, cnt = kernel_and.accumulate_live(postings, seg_start[s], seg_start[s + 1], c, acc, bits, hist, theta, cnt, k, bound)
        return theta, cnt, ntouched, swept_at, is_sorted

    looked_up = 0
    rng = np.random.default_rng(13)
    num_docs = 3000
    a = random_index(rng, num_docs, skew=True)
    skips = build_skips(a["postings"], a["seg_start"])
    acc, touched = np.zeros(num_docs, np.uint32), np.zeros(num_docs + 1, np.int64)
    hist, bits = np.zeros(10 * 255 + 2, np.int64), np.zeros(num_docs // 64 + 1, np.uint64)
    for q in range(24):
        terms = rng.integers(2, 12, rng.integers(2, 6))
        weights = rng.integers(1, 3, terms.size)
        k = int(rng.choice([1, 10, 100]))
        for budget, slack in [(-1, EXACT_SLACK), (1000, EXACT_SLACK), (20_000, EXACT_SLACK), (-1, EXACT_SLACK * 7 // 10)]:
            got = []
            for kernel in (saat_topk, saat_topk.py_func):  # the compiled kernel first: it must not see the scan
                out = np.zeros((2, k), np.int64)
                with monkeypatch.context() as m:
                    if kernel is saat_topk.py_func:
                        m.setattr(kernel_saat, "and_segment", scanned)
                    n, processed = kernel(a["postings"], a["seg_start"], a["seg_impact"], a["seg_ptr"], terms, weights, k, budget,
                                          acc, touched, hist, bits, *skips, NO_POST_IMPACT, 0, lookup_cost, slack, out[0], out[1])
                assert not acc.any() and not hist.any() and not bits.any()
                got.append((out[0, :n].tolist(), out[1, :n].tolist(), processed))
            assert got[0] == got[1], (q, budget, slack)
    assert looked_up > 0


def test_merge_segment_finds_every_posting_through_the_skip_entries():
    """The finish by lookup's merge (:func:`merge_segment`) on one segment of 334 postings
    (docs 0, 3, ..., 999: six skip blocks of 64) against every document 0..1000 as a candidate:
    exactly the members are found, each gaining ``c`` once. Pins the edges of the skip walk:
    the segment's first posting (equal to the first skip entry), a document exactly on a skip
    entry (posting 64, 128, ...: the walk must step onto it, not stop in the block before), and
    the last posting of a 64-block (the block search must include it). The same segment placed
    second in the postings (its blocks offset by the first's), and without skip entries."""
    first = np.arange(1, 700, 5).astype(np.uint32)
    post = np.arange(0, 1000, 3).astype(np.uint32)
    for postings, seg_start, s in ((post, np.array([0, post.size], np.int64), 0),
                                   (np.concatenate([first, post]), np.array([0, first.size, first.size + post.size], np.int64), 1)):
        docs = np.arange(0, 1001, dtype=np.int64)
        member = docs % 3 == 0
        skip_sets = (build_skips(postings, seg_start), (NO_SKIPS, NO_SKIP_PTR))
        assert skip_sets[0][0][skip_sets[0][1][s]:skip_sets[0][1][s + 1]].tolist() == [0, 192, 384, 576, 768, 960]
        for skips, skip_ptr in skip_sets:
            found = np.zeros(docs.size, np.bool_)
            vals = np.zeros(docs.size, np.int64)
            blk = np.empty(docs.size, np.int64)
            merge_segment(postings, seg_start, skips, skip_ptr, s, docs, found, docs.size, 7, vals, blk)
            assert np.flatnonzero(found ^ member).tolist() == []
            assert (vals == 7 * member).all()
            # candidates already found in this term are left alone
            again = found.copy()
            merge_segment(postings, seg_start, skips, skip_ptr, s, docs, again, docs.size, 7, vals, blk)
            assert (again == found).all() and (vals == 7 * member).all()


def test_merge_segment_over_a_segment_of_many_skip_entries_finds_exactly_its_documents():
    """:func:`merge_segment` through a segment of 5,000 postings (79 skip entries) against candidates far
    apart (every 600th posting, about 9 entries between them, and documents between those): the walk strides
    over 8 entries at a time, which no test's segment of at most 6 entries made it do. Exactly the segment's
    documents are found, each gaining ``c`` once."""
    rng = np.random.default_rng(11)
    postings = np.sort(rng.choice(40_000, 5000, replace=False)).astype(np.uint32)
    seg_start = np.array([0, postings.size], np.int64)
    skips, skip_ptr = build_skips(postings, seg_start)
    assert skip_ptr[1] - skip_ptr[0] == 79
    members = postings[::600].astype(np.int64)
    docs = np.unique(np.concatenate([members, members[:-1] + 1, rng.choice(40_000, 10, replace=False)]))
    found, vals, blk = np.zeros(docs.size, np.bool_), np.zeros(docs.size, np.int64), np.empty(docs.size, np.int64)
    merge_segment(postings, seg_start, skips, skip_ptr, 0, docs, found, docs.size, 3, vals, blk)
    member = np.isin(docs, postings)
    assert member.sum() >= members.size and (found == member).all() and (vals == 3 * member).all()


@pytest.mark.parametrize("lookup_cost", [LOOKUP_COST, 0])
def test_ties_with_the_kth_score_are_kept_in_and_mode(lookup_cost):
    """A document that can at best tie the k-th score must be kept: ties go to the lower
    document, so doc 0 (10 from term 3, read second) beats doc 5 (10 from term 2). AND mode may
    start only once theta is strictly above the remaining bound (a theta equal to it lets an
    unseen document still tie), and AND mode drops a document only when its accumulator plus
    the bound is strictly below theta. Many documents (1000), so exact mode's dense restart
    does not fire; warmup 0: the histogram and pruning work from the first segment."""
    # two terms of one posting each, impact 10: after term 2, theta = 10 = the bound of term 3
    a = build([(2, 5, 10), (3, 0, 10)], 4)
    assert search(a, 1000, [2, 3], [1, 1], 1, warmup=0, lookup_cost=lookup_cost)[:2] == ([0], [10])
    # doc 0 has 6 after term 3; with term 4's 4 still to come it reaches 10 = theta (doc 5's)
    a = build([(2, 5, 10), (3, 0, 6), (4, 0, 4)], 5)
    assert search(a, 1000, [2, 3, 4], [1, 1, 1], 1, warmup=0, lookup_cost=lookup_cost)[:2] == ([0], [10])
    assert search(a, 1000, [2, 3, 4], [1, 1, 1], 2, warmup=0, lookup_cost=lookup_cost)[:2] == ([0, 5], [10, 10])


def test_order_descending_breaks_ties_by_index():
    rng = np.random.default_rng(0)
    for m in (0, 1, 3, 8, 20):
        pot = rng.integers(0, 4, m).astype(np.int64)
        assert order_descending(pot).tolist() == np.argsort(-pot, kind="stable").tolist()


@pytest.mark.parametrize("skips", [True, False])
def test_finish_by_lookup_drops_with_the_scaled_bound_of_the_terms_left(skips):
    """:func:`finish_by_lookup` on hand-set candidates (k = 1): doc 0 has 25, doc 1 has 22; term 2
    adds 10 to doc 1, then term 3 adds 10 to doc 0 (equal contributions: term order). After term 2
    the k-th best is 32 and 10 is left: exact mode keeps doc 0 (25 + 10 >= 32) and ranks it first
    with 35; slack 1/2 drops it (25 + 5 < 32), as anytime mode's docstring says, and returns doc 1.
    A bound not lowered by the finished term (25 + 20 / 2 >= 32) would keep it; a doc that can at
    best tie the k-th (22 + 10 = 32) is kept, and wins the tie as the lower document."""
    a = build([(2, 1, 10), (3, 0, 10)], 4)
    terms = np.array([2, 3], np.int64)
    cur, end = a["seg_ptr"][terms].astype(np.int64), a["seg_ptr"][terms + 1].astype(np.int64)
    skip_arrays = build_skips(a["postings"], a["seg_start"]) if skips else (NO_SKIPS, NO_SKIP_PTR)
    for first, slack, want in [(25, EXACT_SLACK, (0, 35)), (25, EXACT_SLACK // 2, (1, 32)), (22, EXACT_SLACK, (0, 32))]:
        acc, hist = np.zeros(4, np.uint32), np.zeros(64, np.int64)
        acc[0], acc[1] = first, 22
        hist[first] += 1
        hist[22] += 1
        touched = np.array([1, 0, 0, 0, 0], np.int64)  # candidates in any order: the finish sorts them
        hd, hv = np.full(3, -1, np.int64), np.full(3, -1, np.int64)
        n = finish_by_lookup(a["postings"], a["seg_start"], a["seg_impact"], cur.copy(), end, np.ones(2, np.int64), acc, touched,
                             np.int64(2), hist, np.int64(1), *skip_arrays, np.int64(slack), hd, hv)
        assert (n, hd[0], hv[0]) == (1, *want), (first, slack)
        assert not acc.any() and not hist.any()
