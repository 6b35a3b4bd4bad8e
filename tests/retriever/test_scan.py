"""The numpy scan of one query (retriever.scan) against brute force and the kernels; a search by it loads no Numba."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from retriever.kernels import brute_force_scores
from retriever.scan import query_postings, scan_topk
from retriever.search import Searcher
from tests.retriever.test_kernels import build, random_index

ROOT = Path(__file__).resolve().parents[2]


def brute_topk(a, num_docs, terms, weights, k):
    bf = brute_force_scores(a["postings"], a["seg_start"], a["seg_impact"], a["seg_ptr"], terms, weights, num_docs)
    order = np.lexsort((np.arange(num_docs), -bf))
    want = order[bf[order] > 0][:k]
    return bf[want].tolist(), want.tolist()


def scan(a, num_docs, terms, weights, k):
    return scan_topk(a["postings"], a["seg_start"], a["seg_impact"], a["seg_ptr"], np.asarray(terms, np.int64),
                     np.asarray(weights, np.int64), k, num_docs)


@pytest.mark.parametrize("skew", [True, False])
def test_scan_equals_brute_force_on_random_indexes(skew):
    """Top k by score, ties by document ascending, only documents above 0; k beyond the hits
    gives them all; every posting of the query's lists counted as read."""
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
    with pytest.raises(ValueError, match="exact mode only"):
        Searcher(scifact_index, mode="anytime", engine="numpy")
    with pytest.raises(ValueError, match="engine must be"):
        Searcher(scifact_index, engine="jit")


ONE_SEARCH = """
import sys
from ckqti import api
res = api.search("cell growth", sys.argv[1], k=3)
print(len(res.hits), "numba" in sys.modules, "retriever.kernels" in sys.modules)
from ckqti.cli import main
sys.argv = ["ckqti", "search", "cell growth", "--index", sys.argv[1], "-k", "3"]
try:
    main()
except SystemExit as e:
    assert not e.code, e.code
print("numba" in sys.modules)
"""


def test_one_search_loads_no_numba(scifact_index):
    """``api.search`` and ``ckqti search`` (exact mode) open the index and search without importing
    Numba: its start-up was 0.45 s of a 0.7 s ``ckqti search``."""
    out = subprocess.run([sys.executable, "-c", ONE_SEARCH, str(scifact_index)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "3 False False" and lines[-1] == "False", out.stdout
    assert [line.split()[0] for line in lines[1:-1] if line.split()[0].isdigit()] == ["1", "2", "3"], out.stdout
