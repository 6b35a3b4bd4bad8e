"""The traversal kernels on hand-built and random indexes, against brute force."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from retriever.kernel_accumulate import BRANCH_FREE_DOCS
from retriever.kernel_and import EXACT_SLACK, LOOKUP_COST
from retriever.kernel_saat import advanced_bound, brute_force_scores, remaining_bound, saat_topk
from tests.retriever.kernel_cases import HAND, build, random_index, search


def test_segments_are_impact_ordered():
    a = build(HAND, 5)
    # term 2 has two segments: impact 5 (doc 0) then impact 3 (docs 1, 3 ascending)
    s0, s1 = a["seg_ptr"][2], a["seg_ptr"][3]
    assert a["seg_impact"][s0:s1].tolist() == [5, 3]
    assert a["postings"][a["seg_start"][s0] : a["seg_start"][s1]].tolist() == [0, 1, 3]
    assert a["seg_ptr"][0] == a["seg_ptr"][2] == 0  # reserved ids have no postings


@pytest.mark.parametrize("warmup", [0, 1, 8192])
def test_hand_built_exact_results(warmup):
    a = build(HAND, 5)
    assert search(a, 4, [2, 3], [1, 1], 10, warmup=warmup)[:2] == ([2, 1, 0, 3], [9, 7, 5, 3])
    assert search(a, 4, [2, 3], [1, 1], 2, warmup=warmup)[:2] == ([2, 1], [9, 7])
    # a weight of 2 (the term twice in the query) doubles its contribution
    assert search(a, 4, [2, 4], [2, 1], 2, warmup=warmup)[:2] == ([0, 3], [10, 7])
    assert search(a, 4, [4], [1], 5, warmup=warmup)[:2] == ([3], [1])
    assert search(a, 4, [1], [1], 5, warmup=warmup)[:2] == ([], [])  # a term without postings
    # a list id beyond the shard's lists (a term added after the shard was written) is empty
    assert search(a, 4, [2, 3, 99], [1, 1, 1], 10, warmup=warmup)[:2] == ([2, 1, 0, 3], [9, 7, 5, 3])


@pytest.mark.parametrize("warmup", [0, 8192])
def test_ties_break_by_document_number(warmup):
    a = build([(2, 3, 7), (2, 1, 7), (2, 2, 7), (3, 0, 7)], 4)
    assert search(a, 4, [2], [1], 2, warmup=warmup)[:2] == ([1, 2], [7, 7])
    assert search(a, 4, [2, 3], [1, 1], 3, warmup=warmup)[:2] == ([0, 1, 2], [7, 7, 7])


@pytest.mark.parametrize("warmup", [0, 8192])
def test_anytime_budget_stops_at_segment_boundary(warmup):
    a = build(HAND, 5)
    docs, vals, n = search(a, 4, [2, 3], [1, 1], 10, budget=1, warmup=warmup)
    assert n == 1 and docs == [2] and vals == [9]  # only the highest segment (term 3, impact 9)
    docs, vals, n = search(a, 4, [2, 3], [1, 1], 10, budget=10**9, warmup=warmup)
    assert n == 5 and docs == [2, 1, 0, 3]


@pytest.mark.parametrize("skew", [True, False])
@pytest.mark.parametrize(
    ("warmup", "acc_dtype", "skips", "lookup_cost", "acc_docs", "flat"),
    [(0, np.uint32, True, LOOKUP_COST, None, False), (300, np.uint16, True, LOOKUP_COST, None, False),
     (0, np.uint32, True, 1, None, False), (0, np.uint32, False, 1, None, False), (10**9, np.uint32, True, LOOKUP_COST, None, False),
     (300, np.uint32, True, LOOKUP_COST, BRANCH_FREE_DOCS + 1, False), (10**9, np.uint32, True, LOOKUP_COST, BRANCH_FREE_DOCS + 1, False),
     (10**9, np.uint32, True, LOOKUP_COST, None, True), (10**9, np.uint32, True, LOOKUP_COST, BRANCH_FREE_DOCS + 1, True),
     (300, np.uint32, True, LOOKUP_COST, None, True)],
)
def test_exact_equals_brute_force_on_random_indexes(skew, warmup, acc_dtype, skips, lookup_cost, acc_docs, flat):
    """Every path: histogram from the first posting, a warm-up then pruning, warm-up only;
    AND mode's lookups and the finish by lookup, through skip entries and without (these
    small indexes reach the finish with ``lookup_cost`` 1, 25 of the 120 skewed queries, and
    not with the default; AND mode then looks up 2,584 segments and scans 6,429, and 33 and
    9,610 with the default); the
    warm-up's branch-free and branchy accumulation (scratch sized past BRANCH_FREE_DOCS), by
    segment and by posting list (per-posting impacts)."""
    rng = np.random.default_rng(7 + skew)
    num_docs, vocab = 3000, 400
    a = random_index(rng, num_docs, vocab, skew=skew)
    for q in range(120):
        size = rng.integers(9, 15) if q % 5 == 0 else rng.integers(1, 7)  # long queries too
        terms = np.unique(rng.integers(2, 12 if q % 2 else vocab, size))
        weights = rng.integers(1, 3, terms.size)
        k = int(rng.choice([1, 10, 100]))
        docs, vals, _ = search(a, num_docs, terms, weights, k, warmup=warmup, acc_dtype=acc_dtype, skips=skips,
                               lookup_cost=lookup_cost, acc_docs=acc_docs, flat=flat)
        bf = brute_force_scores(a["postings"], a["seg_start"], a["seg_impact"], a["seg_ptr"], terms, weights, num_docs)
        order = np.lexsort((np.arange(num_docs), -bf))
        want = order[bf[order] > 0][:k]
        assert vals == bf[want].tolist()
        assert bf[docs].tolist() == vals  # reported scores are the documents' true scores
        assert docs == want.tolist()  # ties broken by document number, as brute force


@pytest.mark.parametrize(("warmup", "lookup_cost"), [(0, LOOKUP_COST), (0, 1), (300, LOOKUP_COST), (10**9, LOOKUP_COST)])
def test_repeated_ids_add_up_like_summed_weights(warmup, lookup_cost):
    """A list id given twice scores as the id once with the two weights summed, on every path
    (pruning, finish by lookup, warm-up only): callers need not deduplicate."""
    rng = np.random.default_rng(11)
    num_docs, vocab = 3000, 400
    a = random_index(rng, num_docs, vocab, skew=True)
    for q in range(60):
        terms = rng.integers(2, 12 if q % 2 else vocab, rng.integers(2, 8))
        terms[-1] = terms[0]  # at least one repeat
        ids, counts = np.unique(terms, return_counts=True)
        k = int(rng.choice([1, 10, 100]))
        got = search(a, num_docs, terms, np.ones(terms.size, np.int64), k, warmup=warmup, lookup_cost=lookup_cost)
        want = search(a, num_docs, ids, counts, k, warmup=warmup, lookup_cost=lookup_cost)
        assert got[:2] == want[:2]


@pytest.mark.parametrize(("lookup_cost", "k", "warmup"), [(LOOKUP_COST, 10, 8192), (1, 1, 0)])  # the second finishes by lookup
def test_anytime_overlap_grows_with_budget(lookup_cost, k, warmup):
    rng = np.random.default_rng(3)
    num_docs = 3000
    a = random_index(rng, num_docs)
    overlaps = {b: [] for b in (500, 5000, 10**9)}
    for _ in range(40):
        terms = np.unique(rng.integers(2, 15, 4))
        w = np.ones(terms.size, np.int64)
        exact, exact_vals, _ = search(a, num_docs, terms, w, k)
        for b in overlaps:
            docs, vals, _ = search(a, num_docs, terms, w, k, budget=b, lookup_cost=lookup_cost, warmup=warmup)
            overlaps[b].append(len(set(exact) & set(docs)) / max(len(exact), 1))
            if b == 10**9:  # a budget never spent is exact, finished by lookup or not
                assert (docs, vals) == (exact, exact_vals)
    assert np.mean(overlaps[10**9]) == 1.0
    assert np.mean(overlaps[500]) <= np.mean(overlaps[5000]) <= 1.0


@pytest.mark.parametrize("warmup", [0, 300])  # a query under the warm-up is added whole: nothing to prune
def test_slack_misses_only_narrowly(warmup):
    """Below 1, ``slack`` drops a document once its accumulator plus ``slack`` times the
    remaining bound R falls below the k-th best, so a true top-k document it misses scores
    less than the k-th hit returned plus (1 - slack) times the query's largest possible
    score; returned scores never exceed the true ones; full slack is exact."""
    rng = np.random.default_rng(5)
    num_docs = 3000
    a = random_index(rng, num_docs, skew=True)
    overlaps = {s: [] for s in (EXACT_SLACK, EXACT_SLACK * 3 // 4, EXACT_SLACK // 4)}
    for q in range(60):
        k = 1 if q % 2 else 10  # k = 1: most of these queries finish by lookup
        terms = np.unique(rng.integers(2, 15, rng.integers(2, 7)))
        w = rng.integers(1, 3, terms.size)
        bf = brute_force_scores(a["postings"], a["seg_start"], a["seg_impact"], a["seg_ptr"], terms, w, num_docs)
        order = np.lexsort((np.arange(num_docs), -bf))
        want = order[bf[order] > 0][:k]
        top = sum(int(wi) * int(a["seg_impact"][a["seg_ptr"][t]]) for t, wi in zip(terms, w) if a["seg_ptr"][t] < a["seg_ptr"][t + 1])
        for slack in overlaps:
            docs, vals, _ = search(a, num_docs, terms, w, k, warmup=warmup, lookup_cost=1, slack=slack)
            assert all(v <= bf[d] for d, v in zip(docs, vals))
            if len(docs) == k:
                for d in set(want.tolist()) - set(docs):
                    assert bf[d] < vals[-1] + (1 - slack / EXACT_SLACK) * top
            overlaps[slack].append(len(set(docs) & set(want.tolist())) / max(len(want), 1))
    means = [np.mean(overlaps[s]) for s in overlaps]
    assert means[0] == 1.0 and means[2] < 1.0  # the quarter slack does miss documents here
    assert means[0] >= means[1] >= means[2]


def test_kernels_run_without_jit():
    """Hand cases in plain Python (NUMBA_DISABLE_JIT), where an index past an array's end raises
    instead of reading whatever memory follows it (a list id equal to the list count, say)."""
    code = (
        "import numpy as np, tests.retriever.test_kernel_saat as t, tests.retriever.test_kernel_and as a;"
        "t.test_hand_built_exact_results(0); t.test_hand_built_exact_results(8192); t.test_anytime_budget_stops_at_segment_boundary(8192);"
        "[t.test_a_list_id_equal_to_the_list_count_is_empty(w) for w in (0, 8192)];"
        "a.test_ties_with_the_kth_score_are_kept_in_and_mode(0);"
        "a.test_merge_segment_finds_every_posting_through_the_skip_entries();"
        "import retriever.kernel_saat as k; assert not hasattr(k.saat_topk, 'py_func')"
    )
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=root)


@pytest.mark.parametrize("warmup", [0, 1, 8192])
def test_a_list_id_equal_to_the_list_count_is_empty(warmup):
    """A shard written when the vocabulary had 5 lists has ``seg_ptr`` of 6 entries: list id 5
    (the first term added after it was written) has no postings there, and the kernel must
    not read ``seg_ptr[5:7]`` (one past its end) for it."""
    a = build(HAND, 5)
    assert a["seg_ptr"].shape[0] - 1 == 5
    assert search(a, 4, [2, 3, 5], [1, 1, 1], 10, warmup=warmup)[:2] == ([2, 1, 0, 3], [9, 7, 5, 3])
    assert search(a, 4, [5], [1], 10, warmup=warmup)[:2] == ([], [])


def test_no_kernel_compiles_a_callee_again_for_a_literal_argument():
    """Numba compiles a callee once more for each literal argument (``0``, ``True``) it is passed,
    which lengthens the first search's compile (set_bits was compiled for True and for False)."""
    from numba import njit
    from numba.core.registry import CPUDispatcher

    from retriever import kernel_accumulate, kernel_and, kernel_dense, kernel_postings, kernel_saat, kernel_select

    search(build(HAND, 5), 4, [2, 3], [1, 1], 10)  # a signature to compile (and the callees cached)
    njit(nogil=True)(saat_topk.py_func).compile(saat_topk.signatures[0])  # types every callee: a cached kernel's are not
    literal = {name: [str(s) for s in f.signatures if "Literal" in str(s)]
               for module in (kernel_accumulate, kernel_and, kernel_dense, kernel_postings, kernel_saat, kernel_select)
               for name, f in vars(module).items() if isinstance(f, CPUDispatcher)}
    assert {name: sigs for name, sigs in literal.items() if sigs} == {}


def test_the_bound_moved_on_one_segment_is_the_bound_recomputed():
    """:func:`advanced_bound` after a term moves on one segment, whether its list goes on or ends
    there, equals :func:`remaining_bound` recomputed: a bound left too high (a finished term's
    last contribution kept) changes no exact hit, only delays AND mode and the finish."""
    rng = np.random.default_rng(1)
    for _ in range(200):
        m = int(rng.integers(1, 6))
        lengths = rng.integers(0, 4, m)
        end = np.cumsum(lengths).astype(np.int64)
        cur = end - lengths
        seg_impact = rng.integers(1, 256, int(end[-1]) + 1).astype(np.uint8)
        weights = rng.integers(1, 5, m).astype(np.int64)
        live = np.flatnonzero(cur < end)
        if live.size == 0:
            continue
        i = int(rng.choice(live))
        cur += rng.integers(0, lengths + 1) * (np.arange(m) != i)  # other terms part way through
        before = remaining_bound(cur, end, seg_impact, weights)
        c = weights[i] * np.int64(seg_impact[cur[i]])
        cur[i] += 1
        assert advanced_bound(before, c, np.int64(i), cur, end, seg_impact, weights) == remaining_bound(cur, end, seg_impact, weights)


def test_a_query_of_exactly_warmup_postings_is_added_whole():
    """A query of at most ``warmup`` postings is added whole, without pruning, so even a quarter
    slack then returns the exact top k; at exactly ``warmup`` postings too (one posting more than
    the warm-up and the slack's pruning misses documents on some of these queries)."""
    rng = np.random.default_rng(5)
    num_docs = 3000
    a = random_index(rng, num_docs, skew=True)
    lengths = np.diff(a["seg_start"])
    missed = 0
    for q in range(40):
        terms = np.unique(rng.integers(2, 15, rng.integers(2, 7)))
        w = rng.integers(1, 3, terms.size)
        k = 1 if q % 2 else 10
        left = sum(int(lengths[a["seg_ptr"][t]:a["seg_ptr"][t + 1]].sum()) for t in terms)
        exact = search(a, num_docs, terms, w, k)
        whole = search(a, num_docs, terms, w, k, warmup=left, lookup_cost=1, slack=EXACT_SLACK // 4)
        assert whole[:2] == exact[:2] and whole[2] == left
        missed += search(a, num_docs, terms, w, k, warmup=left - 1, lookup_cost=1, slack=EXACT_SLACK // 4)[:2] != exact[:2]
    assert missed > 0
