"""Exact mode's dense path: the restart, the dense pass and the block-by-block ranking."""

from __future__ import annotations

import numpy as np
import pytest

from retriever.kernel_dense import DENSE_BLOCK, dense_select, dense_topk
from retriever.kernel_postings import NO_POST_IMPACT
from retriever.kernel_saat import brute_force_scores
from tests.retriever.kernel_cases import HAND, build, random_index, search


@pytest.mark.parametrize(("acc_dtype", "flat"), [(np.uint32, False), (np.uint16, False), (np.uint32, True)])
def test_exact_mode_restarts_dense_when_nothing_prunes_and_stays_exact(acc_dtype, flat):
    """Uniform impacts and long queries keep exact mode in OR mode past DENSE_AFTER's point:
    it restarts as a dense pass (the postings it reports then exceed the query's own) and its
    hits still equal brute force, ties included (skewed impacts: the same check, fewer restarts)."""
    rng = np.random.default_rng(11)
    num_docs, vocab = 3000, 400
    restarted = 0
    for skew in (False, True):
        a = random_index(rng, num_docs, vocab, skew=skew)
        lengths = np.diff(a["seg_start"])
        for q in range(60):
            terms = np.unique(rng.integers(2, 40 if q % 3 else vocab, rng.integers(4, 12)))
            weights = rng.integers(1, 3, terms.size)
            k = int(rng.choice([1, 10, 100]))
            docs, vals, n = search(a, num_docs, terms, weights, k, warmup=0, acc_dtype=acc_dtype, flat=flat)
            total = sum(int(lengths[a["seg_ptr"][t]:a["seg_ptr"][t + 1]].sum()) for t in terms)
            restarted += (not skew) and n > total
            bf = brute_force_scores(a["postings"], a["seg_start"], a["seg_impact"], a["seg_ptr"], terms, weights, num_docs)
            order = np.lexsort((np.arange(num_docs), -bf))
            want = order[bf[order] > 0][:k]
            assert vals == bf[want].tolist() and docs == want.tolist()
    assert restarted >= 10  # the uniform queries do take the dense path


def test_dense_topk_breaks_ties_by_document_and_resets_accumulators():
    a = build(HAND + [(5, 4, 3), (5, 6, 8)], 6)
    terms, weights = np.array([2, 3, 4, 5], np.int64), np.array([1, 1, 1, 1], np.int64)
    cur, end = a["seg_ptr"][terms].astype(np.int64), a["seg_ptr"][terms + 1].astype(np.int64)
    for k in (0, 1, 3, 10):
        acc = np.zeros(7, np.uint32)
        docs, vals = np.full(max(k, 1), -1, np.int64), np.full(max(k, 1), -1, np.int64)
        n = dense_topk(a["postings"], a["seg_start"], a["seg_impact"], cur, end, weights, acc, NO_POST_IMPACT, k, docs, vals)
        # scores: d0 5, d1 7, d2 9, d3 4, d4 3, d6 8 (d5 untouched)
        want = [(2, 9), (6, 8), (1, 7), (0, 5), (3, 4), (4, 3)][:k]
        assert n == len(want) and list(zip(docs[:n].tolist(), vals[:n].tolist())) == want and not acc.any()
    acc = np.zeros(7, np.uint32)
    docs, vals = np.zeros(3, np.int64), np.zeros(3, np.int64)
    tied = build([(2, 1, 4), (2, 5, 4), (2, 3, 4), (2, 0, 1)], 3)
    n = dense_topk(tied["postings"], tied["seg_start"], tied["seg_impact"], tied["seg_ptr"][[2]].astype(np.int64),
                   tied["seg_ptr"][[3]].astype(np.int64), np.ones(1, np.int64), acc, NO_POST_IMPACT, 2, docs, vals)
    assert n == 2 and docs[:2].tolist() == [1, 3] and vals[:2].tolist() == [4, 4]  # ties: the lower documents


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32])
def test_dense_select_scans_block_by_block_as_a_full_sort_would(dtype):
    """Accumulators over several of DENSE_BLOCK's blocks and a partial last one, with many ties:
    the k best in (score desc, document asc) order, every accumulator reset."""
    rng = np.random.default_rng(5)
    num_docs = 3 * DENSE_BLOCK + 123
    for trial in range(12):
        acc = np.zeros(num_docs, dtype)
        touched = rng.choice(num_docs, int(rng.integers(1, num_docs)), replace=False)
        acc[touched] = rng.integers(1, 40, touched.size)  # few distinct values: ties everywhere
        if trial % 3 == 0:
            acc[-5:] = 60  # the best sit in the partial last block
        order = np.lexsort((np.arange(num_docs), -acc.astype(np.int64)))
        for k in (1, 10, 100):
            work = acc.copy()
            docs, vals = np.empty(k, np.int64), np.empty(k, np.int64)
            n = dense_select(work, k, docs, vals)
            want = [d for d in order[:k].tolist() if acc[d] > 0]
            assert n == len(want) and docs[:n].tolist() == want and vals[:n].tolist() == acc[want].tolist()
            assert not work.any()
