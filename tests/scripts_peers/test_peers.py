"""The benchmark's peer engines (scripts/peers.py) return the exact top-k of the same impacts."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from ckqti.errors import IndexFormatError, InputError, QueryError

REPO = Path(__file__).resolve().parents[2]


def _load_peers():
    spec = importlib.util.spec_from_file_location("ckqti_bench_peers", REPO / "scripts" / "peers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


peers = _load_peers()

NUM_DOCS, VOCAB = 2000, 500
EVERYWHERE, EMPTY = 0, VOCAB - 1  # term 0 is in every document, the last term in none


def random_impacts(num_docs: int, vocab: int, per_doc: int, seed: int) -> sp.csr_matrix:
    """Zipf-like term choice, impacts 1..255; term 0 in every document, the last term in none."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocab - 1) ** 0.8
    p /= p.sum()
    rows, cols = [], []
    for doc in range(num_docs):
        terms = 1 + rng.choice(vocab - 2, size=per_doc, replace=False, p=p)
        cols.extend([EVERYWHERE, *terms.tolist()])
        rows.extend([doc] * (per_doc + 1))
    data = rng.integers(1, 256, size=len(rows))
    return sp.csr_matrix((data, (rows, cols)), shape=(num_docs, vocab), dtype=np.int32)


def random_queries(seed: int, count: int = 40) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    queries = [rng.integers(1, VOCAB - 1, size=rng.integers(1, 7)).tolist() for _ in range(count)]
    queries += [[3, 3, 17], [EVERYWHERE], [EVERYWHERE, 5], [1, EMPTY], [VOCAB - 2]]
    return queries


def assert_exact_topk(result, impacts, term_ids, k) -> None:
    """Same scores, best first, as brute force; every returned doc carries its true score (so: same top-k up to ties)."""
    docs, scores = result
    _, ref_scores = peers.brute_force_topk(impacts, term_ids, k)
    exact = peers.brute_force_scores(impacts, term_ids)
    assert docs.dtype == np.int64 and scores.dtype == np.float64
    assert len(set(docs.tolist())) == len(docs)
    np.testing.assert_array_equal(scores, ref_scores)
    np.testing.assert_array_equal(exact[docs], scores)


@pytest.fixture(scope="module")
def impacts() -> sp.csr_matrix:
    return random_impacts(NUM_DOCS, VOCAB, per_doc=30, seed=7)


@pytest.fixture(scope="module")
def built(impacts, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("peers")
    bm25s_peer = peers.Bm25sPeer().build(impacts)
    lucene = peers.LucenePeer(workdir).build(impacts)
    bmw = peers.PisaPeer(workdir, "block_max_wand").build(impacts)
    maxscore = bmw.with_algorithm("maxscore")
    return {p.name: p for p in (bm25s_peer, lucene, bmw, maxscore)}


def test_brute_force_on_a_hand_built_index():
    m = sp.csr_matrix(np.array([[0, 2, 5], [3, 0, 1], [0, 0, 0], [3, 2, 0]], dtype=np.int32))
    docs, scores = peers.brute_force_topk(m, [0, 1], k=10)
    assert docs.tolist() == [3, 1, 0] and scores.tolist() == [5, 3, 2]  # doc 2 scores 0: left out
    docs, scores = peers.brute_force_topk(m, [1, 1, 2], k=2)  # a repeated term counts twice
    assert docs.tolist() == [0, 3] and scores.tolist() == [9, 4]
    assert peers.brute_force_topk(m, [], k=3)[0].size == 0


def test_impacts_and_queries_are_validated():
    with pytest.raises(InputError, match="non-negative integers"):
        peers.as_impacts(sp.csr_matrix(np.array([[1, -2]])))
    with pytest.raises(InputError, match="non-negative integers"):
        peers.as_impacts(sp.csr_matrix(np.array([[1.5, 2.0]])))
    canonical = peers.as_impacts(sp.csr_matrix(np.array([[0, 3], [4, 0]], dtype=np.int64)))
    assert canonical.dtype == np.int32 and canonical.nnz == 2
    with pytest.raises(QueryError, match="outside the vocabulary"):
        peers.query_weights([1, 5], vocab=5)


@pytest.mark.parametrize("name", ["bm25s", "pyserini-impact", "pisa-block-max-wand", "pisa-maxscore"])
def test_peer_top10_equals_brute_force(built, impacts, name):
    peer = built[name]
    peer.warmup()
    for query in random_queries(seed=11):
        assert_exact_topk(peer.search(query, 10), impacts, query, 10)


@pytest.mark.parametrize("name", ["bm25s", "pyserini-impact", "pisa-block-max-wand", "pisa-maxscore"])
def test_peer_batch_on_two_threads_equals_single_queries(built, impacts, name):
    peer = built[name]
    queries = random_queries(seed=13, count=30) + [[EMPTY]]
    batch = peer.search_batch(queries, 25, threads=2)
    assert len(batch) == len(queries)
    for query, result in zip(queries, batch):
        assert_exact_topk(result, impacts, query, 25)
    assert batch[-1][0].size == 0  # a term with no postings matches nothing
    assert peer.index_bytes() > 0


def test_bm25s_index_is_the_impacts_as_csc(built, impacts):
    scores = built["bm25s"]._model.scores
    csc = impacts.tocsc()
    np.testing.assert_array_equal(scores["indptr"][:-1], csc.indptr)
    assert built["bm25s"].index_bytes() == scores["data"].nbytes + scores["indices"].nbytes + scores["indptr"].nbytes


def test_pisa_verification_catches_the_batching_corruption(tmp_path):
    """pyterrier-pisa's dict indexer with batch_size < num_docs corrupts terms first seen in a later batch."""
    from pyterrier_pisa import PisaIndex

    m = random_impacts(600, 5000, per_doc=4, seed=3)
    index = PisaIndex(str(tmp_path / "bad"), stemmer="none", stops="none", batch_size=200)
    index.toks_indexer(scale=1.0).index(peers._toks_records(m))
    with pytest.raises(IndexFormatError, match="differ"):
        peers.verify_pisa_postings(tmp_path / "bad", m)
    good = peers.PisaPeer(tmp_path, "maxscore").build(m)  # batch_size = num_docs, verified inside build
    assert_exact_topk(good.search([7, 4001], 10), m, [7, 4001], 10)


def test_pisa_rejects_an_unknown_algorithm(tmp_path):
    with pytest.raises(ValueError, match="unknown PISA algorithm"):
        peers.PisaPeer(tmp_path, "ranked_or")
