"""The numpy scan of one query (retriever.scan) against brute force and the kernels; a search by it loads no Numba."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from retriever import scan as scan_module
from retriever.kernel_saat import brute_force_scores
from retriever.scan import ScanBudget, list_postings, query_postings, scan_seconds, scan_topk, with_ties
from retriever.search import KERNEL_LOAD_S, Searcher
from tests.retriever.kernel_cases import build, random_index

ROOT = Path(__file__).resolve().parents[2]


def brute_topk(a, num_docs, terms, weights, k, ties=False):
    bf = brute_force_scores(a["postings"], a["seg_start"], a["seg_impact"], a["seg_ptr"], terms, weights, num_docs)
    order = np.lexsort((np.arange(num_docs), -bf))
    order = order[bf[order] > 0]
    want = order[:k] if not ties or order.size <= k else order[bf[order] >= bf[order[k - 1]]]
    return bf[want].tolist(), want.tolist()


def scan(a, num_docs, terms, weights, k, ties=False):
    return scan_topk(a["postings"], a["seg_start"], a["seg_impact"], a["seg_ptr"], np.asarray(terms, np.int64),
                     np.asarray(weights, np.int64), k, num_docs, ties=ties)


@pytest.mark.parametrize("sparse_ratio", [0, scan_module.SPARSE_RATIO, 10**9])
@pytest.mark.parametrize("skew", [True, False])
def test_scan_equals_brute_force_on_random_indexes(skew, sparse_ratio, monkeypatch):
    """Top k by score, ties by document ascending, only documents above 0; k beyond the hits
    gives them all; with ``ties``, every document tied with the k-th too; every posting of the
    query's lists counted as read. Summed by sorting the postings (ratio 0), in an array a document
    (ratio 10**9), and each as the query's postings choose."""
    monkeypatch.setattr(scan_module, "SPARSE_RATIO", sparse_ratio)
    rng = np.random.default_rng(3 + skew)
    num_docs, vocab = 3000, 400
    a = random_index(rng, num_docs, vocab, skew=skew)
    for q in range(120):
        terms = np.unique(rng.integers(2, 12 if q % 2 else vocab, rng.integers(1, 9)))
        weights = rng.integers(1, 300 if q % 3 == 0 else 3, terms.size)
        k = int(rng.choice([1, 10, 100, 5000]))
        vals, docs, read = scan(a, num_docs, terms, weights, k)
        assert (vals.tolist(), docs.tolist()) == brute_topk(a, num_docs, terms, weights, k)
        assert vals.dtype == docs.dtype == np.int64
        assert read == sum(int(a["seg_start"][a["seg_ptr"][t + 1]] - a["seg_start"][a["seg_ptr"][t]]) for t in terms)
        tv, td, _ = scan(a, num_docs, terms, weights, k, ties=True)
        assert (tv.tolist(), td.tolist()) == brute_topk(a, num_docs, terms, weights, k, ties=True)
        assert with_ties(tv, k) == tv.size


def test_ties_keep_every_document_of_the_kth_score():
    """Five documents tied at the k-th score: all five follow the one above, lowest first; ``with_ties``
    counts how many of a descending list rank k with the k-th's ties."""
    a = build([(2, d, 5) for d in (9, 4, 7, 1, 8)] + [(3, 6, 9), (3, 3, 1)], 5)
    vals, docs, _ = scan(a, 10, [2, 3], [1, 1], 3, ties=True)
    assert vals.tolist() == [9, 5, 5, 5, 5, 5] and docs.tolist() == [6, 1, 4, 7, 8, 9]
    assert with_ties(np.array([9, 5, 5, 5, 1]), 2) == 4 and with_ties(np.array([9, 5, 4]), 2) == 2
    assert with_ties(np.array([9, 5]), 5) == 2


def test_scan_seconds_counts_postings_hits_and_documents():
    """The estimate adds up over queries, grows with postings and with k up to the postings, counts a
    dense query's documents, and reads lists past the shard as empty."""
    a = build([(2, d, 5) for d in range(40)] + [(3, d, 2) for d in range(0, 40, 2)], 5)

    class Shard:
        seg_start, seg_ptr, num_docs = a["seg_start"], a["seg_ptr"], 1000

    sh = Shard()
    assert list_postings(sh.seg_start, sh.seg_ptr, np.array([2, 3, 4, 99, -1])).tolist() == [40, 20, 0, 0, 0]
    one = scan_seconds([sh], np.array([2]), np.array([0, 1]), 10)
    both = scan_seconds([sh], np.array([2, 3]), np.array([0, 1, 2]), 10)
    assert both == pytest.approx(one + scan_seconds([sh], np.array([3]), np.array([0, 1]), 10))
    assert scan_seconds([sh], np.array([2]), np.array([0, 1]), 30) > one  # more hits ranked
    assert scan_seconds([sh], np.array([2]), np.array([0, 1]), 10**6) == scan_seconds([sh], np.array([2]), np.array([0, 1]), 40)
    assert scan_seconds([sh], np.array([2, 99]), np.array([0, 2]), 10) == pytest.approx(one + scan_module.SCAN_LIST_S)
    sh.num_docs = 100  # 40 postings x SPARSE_RATIO (3) >= 100: summed in an array of 100 documents
    dense = one - 40 * scan_module.SCAN_SORTED_POSTING_S + 40 * scan_module.SCAN_POSTING_S + 100 * scan_module.SCAN_DOC_S
    assert scan_seconds([sh], np.array([2]), np.array([0, 1]), 10) == pytest.approx(dense)
    assert scan_seconds([sh, sh], np.array([2]), np.array([0, 1]), 10) == pytest.approx(2 * dense)


def test_scan_keeps_the_lowest_documents_of_a_tie_at_the_cut():
    """Five documents tied at the k-th score: the two lowest numbers make the top 3, after the one above."""
    a = build([(2, d, 5) for d in (9, 4, 7, 1, 8)] + [(3, 6, 9)], 5)
    vals, docs, _ = scan(a, 10, [2, 3], [1, 1], 3)
    assert vals.tolist() == [9, 5, 5] and docs.tolist() == [6, 1, 4]


def test_repeated_ids_and_lists_past_the_shard_add_as_the_kernels_do():
    """A list id given twice adds up as once with the summed weight; ids at or past the shard's
    list count (lists written after it) and empty lists are empty."""
    a = build([(2, 0, 3), (2, 1, 1), (3, 1, 4)], 5)
    once = scan(a, 2, [2, 3], [2, 1], 5)
    twice = scan(a, 2, [2, 3, 2], [1, 1, 1], 5)
    assert once[0].tolist() == twice[0].tolist() == [6, 6] and once[1].tolist() == twice[1].tolist() == [0, 1]
    num_lists = a["seg_ptr"].shape[0] - 1
    vals, docs, read = scan(a, 2, [num_lists, num_lists + 7, 4], [1, 1, 1], 5)
    assert vals.size == docs.size == read == 0
    docs, gains = query_postings(a["postings"], a["seg_start"], a["seg_impact"], a["seg_ptr"], np.array([3, 2]),
                                 np.array([2, 1]))
    assert sorted(zip(docs.tolist(), gains.tolist())) == [(0, 3), (1, 1), (1, 8)]


def test_numpy_engine_searches_as_the_kernels_across_shards_with_ties(scifact_index):
    """Through Searcher: the same hits, scores and postings read as the kernels' exact mode (which
    prunes: it reads fewer), ties at the cut included, over 3 shards; anytime mode is refused."""
    kernels, numpy_ = Searcher(scifact_index), Searcher(scifact_index, engine="numpy")
    assert len(kernels.index.shards) == 3
    queries = ["cell growth cancer treatment", "vitamin d deficiency", "the protein", "diffusion tensor imaging mri",
               "bacteria", "gene expression gene"]
    for q in queries:
        for k in (1, 10, 200):
            a, b = kernels.search(q, k), numpy_.search(q, k)
            assert [(h.docid, h.score, h.shard, h.doc) for h in a.hits] == [(h.docid, h.score, h.shard, h.doc) for h in b.hits]
            assert b.postings >= a.postings
    rng = np.random.default_rng(5)
    pool = np.flatnonzero(np.asarray(kernels.index.df) > 0)
    for _ in range(40):  # coarse weights tie often
        terms = np.unique(rng.choice(pool, size=rng.integers(1, 6)))
        weights = rng.integers(1, 3, terms.size)
        got = [x.tolist() for x in numpy_.topk_arrays(terms, weights, 25)[:3]]
        assert got == [x.tolist() for x in kernels.topk_arrays(terms, weights, 25)[:3]]
        ones = [x.tolist() for x in kernels.topk_arrays(terms, np.ones(terms.size, np.int64), 25)[:3]]
        assert [x.tolist() for x in numpy_.topk_arrays(terms, None, 25)[:3]] == ones  # None: 1 each (it raised IndexError)
    with pytest.raises(ValueError, match="exact mode only"):
        Searcher(scifact_index, mode="anytime", engine="numpy")
    with pytest.raises(ValueError, match="engine must be"):
        Searcher(scifact_index, engine="jit")


def pylist(docids) -> list[str]:
    return docids if isinstance(docids, list) else docids.to_pylist()


def test_numpy_engine_batches_as_the_kernels(scifact_index):
    """A batch (what ``ckqti run`` writes) scanned with numpy ranks as the kernels' batch: the same
    docids, scores, shards and documents, ties at the cut by docid, over 3 shards; empty and
    all-stopword queries give the same errors."""
    kernels, numpy_ = Searcher(scifact_index), Searcher(scifact_index, engine="numpy")
    queries = ["cell growth cancer treatment", "vitamin d deficiency", "the", "", "protein", "gene expression gene",
               "bacteria infection", "brain"]
    for k in (1, 10, 200, 5000):
        a, b = kernels.topk_columns(queries, k), numpy_.topk_columns(queries, k)
        for x, y in zip(a, b):
            if isinstance(x, Exception):
                assert type(x) is type(y) and str(x) == str(y)
                continue
            assert pylist(x.docids) == pylist(y.docids)
            assert x.scores.tolist() == y.scores.tolist()
            assert (x.shards.tolist(), x.docs.tolist()) == (y.shards.tolist(), y.docs.tolist())


def test_auto_engine_scans_until_loading_the_kernels_would_have_paid(scifact_index, monkeypatch):
    """``engine="auto"``: exact searches are scanned while no kernel is loaded in the process and the
    process's scans' estimated time stays within KERNEL_LOAD_S, whichever searcher scans; a search
    past it goes to the kernels, and so does every later one; anytime mode and a process with the
    kernels loaded never scan."""
    from retriever import search as search_module

    monkeypatch.delitem(sys.modules, "retriever.kernel_saat")  # as in a process that has not loaded them
    budget = ScanBudget(KERNEL_LOAD_S)
    monkeypatch.setattr(search_module, "SCAN_BUDGET", budget)
    auto, other = Searcher(scifact_index, engine="auto"), Searcher(scifact_index, engine="auto")
    lists = [auto.plan(auto.parse("cell growth cancer")).lists]
    cost = scan_seconds(auto.index.shards, lists[0], np.array([0, lists[0].size]), 10)
    assert 0 < cost < KERNEL_LOAD_S
    assert auto._scans(lists, 10) and budget.left == pytest.approx(KERNEL_LOAD_S - cost)
    budget.left = cost * 1.5
    assert other._scans(lists, 10)
    assert not auto._scans(lists, 10) and budget.left == 0
    assert not other._scans([np.zeros(0, np.int64)], 10)  # even a free search: the kernels from now on
    assert not Searcher(scifact_index, mode="anytime", engine="auto")._scans(lists, 10)
    assert Searcher(scifact_index, engine="numpy")._scans(lists * 10**4, 10)
    monkeypatch.undo()
    assert not Searcher(scifact_index, engine="auto")._scans(lists, 10)  # the kernels are loaded here


ONE_SEARCH = """
import sys
from ckqti import api
index, run = sys.argv[1:3]
res = api.search("cell growth", index, k=3)
print(len(res.hits), "numba" in sys.modules, "retriever.kernel_saat" in sys.modules)
from ckqti.cli import main
sys.argv = ["ckqti", "search", "cell growth", "--index", sys.argv[1], "-k", "3"]
try:
    main()
except SystemExit as e:
    assert not e.code, e.code
print("numba" in sys.modules)
api.run(index, {"q1": "cell growth", "q2": "protein", "q3": "the"}, run, k=100)
print("numba" in sys.modules)
"""


def test_one_search_and_a_small_run_load_no_numba(scifact_index, tmp_path):
    """``api.search``, ``ckqti search`` and a small ``api.run`` (exact mode) open the index and search
    without importing Numba (its start-up was 0.45 s of a 0.7 s ``ckqti search``); the run is the one
    the kernels write."""
    from ckqti import api

    out = subprocess.run([sys.executable, "-c", ONE_SEARCH, str(scifact_index), str(tmp_path / "scan.trec")], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "3 False False" and lines[-2:] == ["False", "False"], out.stdout
    assert [line.split()[0] for line in lines[1:-2] if line.split()[0].isdigit()] == ["1", "2", "3"], out.stdout
    import retriever.kernel_saat  # noqa: F401  (loaded here: api.run searches with them)

    api.run(scifact_index, {"q1": "cell growth", "q2": "protein", "q3": "the"}, tmp_path / "kernels.trec", k=100)
    assert (tmp_path / "scan.trec").read_bytes() == (tmp_path / "kernels.trec").read_bytes()
