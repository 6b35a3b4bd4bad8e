"""Top-k selection and the sorts of hits and candidates."""

from __future__ import annotations

import numpy as np
import pytest

from retriever.kernel_saat import brute_force_scores
from retriever.kernel_select import RADIX_MIN, SELECT_HEAP_RATIO, kth_largest, select_topk, shell_sort, sort_hits
from tests.retriever.kernel_cases import build, search


@pytest.mark.parametrize(("warmup", "wide"), [(10**9, False), (10**9, True), (0, False), (0, True), (300, False)])
def test_deep_k_keeps_the_lowest_documents_tied_at_the_cut(warmup, wide):
    """Deep k (up to all the documents) against brute force, with ties at the k-th score that
    outnumber the places left for them: the histogram selection of a query added whole (warm-up
    10**9; its boundary bucket narrowed to one value when the scores pass SELECT_BUCKETS), the
    hits at or above theta of the pruning path (warm-up 0, 300), and the radix sort of the hits
    (``wide``: impacts 1-255, scores of several radix digits; else 1-3, ties everywhere)."""
    rng = np.random.default_rng(11 + wide)
    num_docs, vocab, n = 2000, 60, 30_000
    t = rng.integers(2, vocab, n)
    d = rng.integers(0, num_docs, n)
    imp = rng.integers(1, 256 if wide else 4, n)
    key = np.unique(t * num_docs + d, return_index=True)[1]
    a = build(list(zip(t[key], d[key], imp[key])), vocab)
    crowded = 0  # cuts whose k-th score ties with more documents than were left for it
    for _ in range(40):
        terms = np.unique(rng.integers(2, vocab, rng.integers(1, 8)))
        weights = rng.integers(1, 4, terms.size)
        bf = brute_force_scores(a["postings"], a["seg_start"], a["seg_impact"], a["seg_ptr"], terms, weights, num_docs)
        order = np.lexsort((np.arange(num_docs), -bf))
        hits = order[bf[order] > 0]
        for k in (RADIX_MIN - 1, 150, 700, num_docs):
            want = hits[:k]
            docs, vals, _ = search(a, num_docs, terms, weights, k, warmup=warmup)
            assert docs == want.tolist() and vals == bf[want].tolist()
            crowded += k < hits.size and bf[hits[k]] == bf[want[-1]]
    assert crowded >= 20


def test_select_topk_by_histogram_and_by_heap_as_a_sort_would():
    """:func:`select_topk` on hand-set accumulators, on both sides of SELECT_HEAP_RATIO and with
    scores past SELECT_BUCKETS: the k best (score desc, document asc), ``acc`` and ``hist`` left zero."""
    rng = np.random.default_rng(3)
    num_docs = 5000
    for trial in range(24):
        top = [3, 900, 5000, 60_000][trial % 4]
        acc = np.zeros(num_docs, np.uint32)
        touched = rng.choice(num_docs, int(rng.integers(1, num_docs)), replace=False).astype(np.uint32)
        acc[touched] = rng.integers(1, top + 1, touched.size)
        hist = np.zeros(top + 2, np.int64)
        order = np.lexsort((np.arange(num_docs), -acc.astype(np.int64)))
        for k in (1, 10, touched.size // SELECT_HEAP_RATIO + 1, touched.size // 3 + 1, touched.size + 1):
            work, docs, vals = acc.copy(), np.full(k + 2, -7, np.int64), np.full(k + 2, -7, np.int64)
            n = select_topk(work, touched.copy(), touched.size, k, hist, docs, vals)
            want = order[:min(k, touched.size)]
            assert docs[:n].tolist() == want.tolist() and vals[:n].tolist() == acc[want].tolist()
            assert (docs[n:] == -7).all() and not work.any() and not hist.any()


@pytest.mark.parametrize("n", [0, 1, RADIX_MIN - 1, RADIX_MIN, 500, 3000])
def test_sort_hits_orders_by_score_then_document(n):
    """Heapsort below RADIX_MIN, else the radix sort on one key (scores of one to five radix
    digits, the widest beyond 62 bits with the documents': heapsort again); counts left zero."""
    rng = np.random.default_rng(n)
    for high in (4, 2**20, 2**40, 2**56):
        vals = rng.integers(1, high, n + 3)
        docs = rng.permutation(10**6)[:n + 3].astype(np.int64)
        counts = np.zeros(300, np.int64)
        want = np.lexsort((docs[:n], -vals[:n]))
        hv, hd = vals.copy(), docs.copy()
        assert sort_hits(hv, hd, n, counts) == n
        assert hv[:n].tolist() == vals[want].tolist() and hd[:n].tolist() == docs[want].tolist()
        assert hv[n:].tolist() == vals[n:].tolist() and hd[n:].tolist() == docs[n:].tolist() and not counts.any()


@pytest.mark.parametrize("n", [0, 1, 2, 9, 10, 57, 300, 2_000])
def test_shell_sort_sorts_the_first_n_and_leaves_the_rest(n):
    rng = np.random.default_rng(n)
    a = rng.integers(0, 50 if n % 2 else 2**32, n + 5).astype(np.uint32)  # odd n: many duplicates
    want = np.concatenate([np.sort(a[:n]), a[n:]])
    shell_sort(a, n)
    assert np.array_equal(a, want)


def test_kth_largest_is_the_smallest_when_fewer_than_k():
    vals = np.array([7, 3, 9, 5], np.int64)
    docs = np.arange(4, dtype=np.int64)
    hv, hd = np.zeros(10, np.int64), np.zeros(10, np.int64)
    assert kth_largest(vals, docs, 4, 2, hv, hd) == 7
    assert kth_largest(vals, docs, 3, 5, hv, hd) == 3
    assert kth_largest(vals, docs, 0, 5, hv, hd) == 0
