"""The benchmark's peer engines (scripts/peers.py) return the exact top-k of the same impacts."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from ckqti.errors import IndexFormatError, InputError, QueryError

REPO = Path(__file__).resolve().parents[2]


def _load_peers():
    """scripts/ is not an installed package: load peers.py by path, whatever the import mode."""
    name = "ckqti_bench_peers"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / "peers.py")
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


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
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("peers")


_BUILT: dict = {}


def built_peer(name: str, impacts, workdir: Path):
    """Each peer is built once per session, on first use (so deselected tests cost nothing)."""
    if name not in _BUILT:
        if name == "bm25s":
            _BUILT[name] = peers.Bm25sPeer().build(impacts)
        elif name == "pyserini-impact":
            _BUILT[name] = peers.LucenePeer(workdir).build(impacts)
        elif name == "pisa-block-max-wand":
            _BUILT[name] = peers.PisaPeer(workdir, "block_max_wand").build(impacts)
        else:
            _BUILT[name] = built_peer("pisa-block-max-wand", impacts, workdir).with_algorithm("maxscore")
    return _BUILT[name]


PEERS = ["bm25s", "pyserini-impact", "pisa-block-max-wand", "pisa-maxscore"]
# bm25s compiles a second, parallel Numba function for threads > 1 (about 12 s on 2 busy cores).
BATCH_PEERS = [pytest.param("bm25s", marks=pytest.mark.slow), *PEERS[1:]]


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


@pytest.mark.parametrize("name", PEERS)
def test_peer_top10_equals_brute_force(impacts, workdir, name):
    peer = built_peer(name, impacts, workdir)
    for query in random_queries(seed=11):
        assert_exact_topk(peer.search(query, 10), impacts, query, 10)


@pytest.mark.parametrize("name", BATCH_PEERS)
def test_peer_batch_on_two_threads_equals_single_queries(impacts, workdir, name):
    peer = built_peer(name, impacts, workdir)
    peer.warmup()
    queries = random_queries(seed=13, count=30) + [[EMPTY]]
    batch = peer.search_batch(queries, 25, threads=2)
    assert len(batch) == len(queries)
    for query, result in zip(queries, batch):
        assert_exact_topk(result, impacts, query, 25)
    assert batch[-1][0].size == 0  # a term with no postings matches nothing
    assert peer.index_bytes() > 0


def test_bm25s_score_matrix_is_the_impacts_as_csc(impacts, workdir):
    peer = built_peer("bm25s", impacts, workdir)
    scores, csc = peer._model.scores, impacts.tocsc()
    np.testing.assert_array_equal(scores["indptr"][:-1], csc.indptr)  # plus one empty column for empty queries
    np.testing.assert_array_equal(scores["indices"], csc.indices)
    np.testing.assert_array_equal(scores["data"], csc.data.astype(np.float32))
    assert peer.index_bytes() == scores["data"].nbytes + scores["indices"].nbytes + scores["indptr"].nbytes


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


@pytest.mark.parametrize("name", PEERS)
def test_peer_on_a_hand_built_index(tmp_path, name):
    """Four documents, one of them empty; exact expected rankings (ties included)."""
    m = sp.csr_matrix(np.array([[0, 2, 5, 0], [3, 0, 1, 0], [0, 0, 0, 0], [3, 2, 0, 0]], dtype=np.int32))
    make = {
        "bm25s": lambda: peers.Bm25sPeer(),
        "pyserini-impact": lambda: peers.LucenePeer(tmp_path),
        "pisa-block-max-wand": lambda: peers.PisaPeer(tmp_path, "block_max_wand"),
        "pisa-maxscore": lambda: peers.PisaPeer(tmp_path, "maxscore"),
    }
    peer = make[name]().build(m)
    docs, scores = peer.search([0, 1], 10)
    assert docs.tolist() == [3, 1, 0] and scores.tolist() == [5.0, 3.0, 2.0]
    docs, scores = peer.search([2, 2, 1], 2)
    assert docs.tolist() == [0, 1] and scores.tolist() == [12.0, 2.0]
    docs, scores = peer.search([0], 10)  # a tie: both documents, in either order
    assert sorted(docs.tolist()) == [1, 3] and scores.tolist() == [3.0, 3.0]
    assert peer.search([3], 10)[0].size == 0  # a term without postings
    assert peer.search([], 10)[0].size == 0
    with pytest.raises(QueryError):
        peer.search([4], 10)


def test_a_cached_pisa_index_is_reused_only_for_the_same_impacts(tmp_path):
    """``--peer-cache``: the same impacts reuse the index (and its measured build time); other impacts
    in the same places rebuild it."""
    m = random_impacts(300, 200, per_doc=5, seed=5)
    first = peers.PisaPeer(tmp_path, "maxscore").build(m, reuse=True)
    again = peers.PisaPeer(tmp_path, "maxscore").build(m, reuse=True)
    assert again.build_s == first.build_s  # read back from the stamp, not measured again
    other = m.copy()
    other.data = other.data % 7 + 1  # the same postings, other impacts
    rebuilt = peers.PisaPeer(tmp_path, "maxscore").build(other, reuse=True)
    assert_exact_topk(rebuilt.search([1, 2, 3], 10), other, [1, 2, 3], 10)


def test_pisa_verification_names_a_wrong_impact_or_term_list(tmp_path):
    m = random_impacts(300, 200, per_doc=5, seed=5)
    peers.PisaPeer(tmp_path, "maxscore").build(m)
    index = tmp_path / "pisa"
    freqs = np.fromfile(index / "inv.freqs", dtype=np.uint32)
    freqs[-1] += 1  # the last posting's impact
    freqs.tofile(index / "inv.freqs")
    with pytest.raises(IndexFormatError, match="impacts differ"):
        peers.verify_pisa_postings(index, m)
    terms = (index / "fwd.terms").read_text().split()
    (index / "fwd.terms").write_text("\n".join(terms[:-1] + [str(m.shape[1] - 1)]) + "\n")  # a term without postings
    with pytest.raises(IndexFormatError, match="term list differs"):
        peers.verify_pisa_postings(index, m)


def test_brute_force_breaks_ties_by_document_index():
    m = sp.csr_matrix(np.array([[0, 2], [3, 0], [0, 0], [3, 2]], dtype=np.int32))
    assert peers.brute_force_topk(m, [0], k=1)[0].tolist() == [1]  # 1 and 3 tie at 3: the lower index
    assert peers.brute_force_topk(m, [0, 1], k=3)[0].tolist() == [3, 1, 0]  # 5, 3, 2


def test_a_stored_zero_is_no_posting():
    """0 means "not stored": an explicit zero in the matrix must not become a posting of impact 0."""
    m = sp.csr_matrix((np.array([0, 3, 4]), np.array([0, 1, 0]), np.array([0, 2, 3])), shape=(2, 2))
    assert m.nnz == 3
    canonical = peers.as_impacts(m)
    assert canonical.nnz == 2 and canonical.data.min() > 0 and canonical.toarray().tolist() == [[0, 3], [4, 0]]


@pytest.mark.parametrize("name", PEERS)
def test_peer_returns_every_document_when_k_exceeds_the_collection(impacts, workdir, name):
    """A term in every document and k past the collection's size: all of them, exactly ranked."""
    k = NUM_DOCS + 5
    result = built_peer(name, impacts, workdir).search([EVERYWHERE], k)
    assert result[0].size == NUM_DOCS
    assert_exact_topk(result, impacts, [EVERYWHERE], k)
