"""scripts/bench_search.py: a --workdir that does not exist yet is made; the numbers it reports (agreement
with short references, QPS and percentiles from the timings, medians over interleaved rounds) and the
synthetic collection and query sets."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

import scripts.bench_search as bench


class Reached(Exception):
    """Raised by the stand-in for the first step that works in the work folder."""


def test_a_missing_workdir_is_made_with_its_parents(tmp_path, monkeypatch):
    """--workdir took existing folders only: a new one was refused at parsing ('no such directory')."""
    bench = importlib.import_module("scripts.bench_search")
    seen: list[Path] = []

    def first_step(work: Path):
        seen.append(work.parent)
        raise Reached

    monkeypatch.setattr(bench, "scifact", first_step)
    workdir = tmp_path / "new" / "work"
    with pytest.raises(Reached):
        bench.main(["--workdir", str(workdir), "--peers", "", "--out", str(tmp_path / "bench.json")])
    assert seen == [workdir] and workdir.is_dir()
    assert list(workdir.iterdir()) == []  # the temporary folder inside it is gone


def test_agreement_with_a_reference_of_fewer_than_ten_documents():
    """A query matching 4 documents: an engine returning all 4 agrees in full, one returning 2 of them half."""
    reference = [(np.array([7, 3, 9, 1]), np.array([9.0, 5.0, 2.0, 1.0]))]
    assert bench.agreement(reference, reference) == 1.0
    assert bench.agreement([(np.array([3, 7]), np.array([9.0, 5.0]))], reference) == 0.5
    assert bench.agreement([(np.arange(20), np.zeros(20))], [(np.arange(5, 25), np.zeros(20))]) == 0.5  # top 10s


class Clock:
    """A stand-in for ``time.perf_counter`` that the fake engine below advances."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


class TimedEngine:
    """Query ``[i]`` takes ``i`` ms; batch passes take the listed seconds, pass after pass."""

    def __init__(self, clock, passes):
        self.clock, self.passes, self.calls = clock, {t: list(p) for t, p in passes.items()}, 0

    def search(self, q, k):
        self.clock.now += q[0] / 1e3
        return np.array(q), np.array([1.0])

    def search_batch(self, queries, k, threads=1):
        self.clock.now += self.passes[threads].pop(0)


def test_qps_and_percentiles_come_from_the_timed_pass(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(bench, "time", SimpleNamespace(perf_counter=clock.perf_counter))
    engine = TimedEngine(clock, {1: [5, 1, 9, 2, 7], 2: [4, 4, 1, 8, 3]})
    queries = [[i] for i in range(1, 100)] + [[1000]]  # 1 .. 99 ms and one of 1 s: 5.95 s in all
    results, timing = bench.time_queries(engine, queries)
    assert [d.tolist() for d, _ in results] == queries
    assert timing["qps_1t"] == pytest.approx(100 / 5.95)
    assert timing["p50_ms"] == pytest.approx(50.5)  # not the mean, 59.5
    assert timing["p99_ms"] == pytest.approx(99 + 0.01 * 901)  # between the 99th and the 100th
    assert timing["qps_batch_1t"] == pytest.approx(100 / 5) and timing["qps_2t"] == pytest.approx(100 / 4)  # medians


class FakeEngine:
    name = ""

    def __init__(self, name, answer):
        self.name, self.answer = name, answer

    def warmup(self):
        pass

    def search(self, q, k):
        return self.answer(q)

    def index_bytes(self):
        return 2**20


def test_rows_take_the_median_of_interleaved_rounds_and_agree_with_ckqti_exact(monkeypatch):
    """Three rounds, engine after engine: every timing column is the median of its rounds, and the
    peer's agreement is measured against the first engine (ckqti exact), up to ties too."""
    rng = np.random.default_rng(0)
    dense = rng.integers(0, 3, size=(200, 5)) * (rng.random((200, 5)) < 0.6)  # small impacts: ties
    csr = sp.csr_matrix(dense)
    terms, docs = np.nonzero(dense.T)
    postings = SimpleNamespace(terms=terms.astype(np.int32), docs=docs.astype(np.uint32),
                               impacts=dense.T[terms, docs].astype(np.uint8))
    queries = [[0, 2], [1, 3, 4]]

    def exact(q):
        return bench.peer_mod.brute_force_topk(csr, q, 10)

    def other_ties(q):  # the same scores, the 10th document swapped for another of its score
        d, s = exact(q)
        full = bench.peer_mod.brute_force_scores(csr, q)
        tied = np.setdiff1d(np.flatnonzero(full == s[-1]), d)
        assert tied.size
        return np.r_[d[:-1], tied[0]], s

    engines = [FakeEngine("ckqti-exact", exact), FakeEngine("peer", other_ties)]
    monkeypatch.setattr(bench, "engine_factories", lambda *a: ((e, 1.0, 0.5) for e in engines))
    order, qps = [], {"ckqti-exact": [2.0, 9.0, 1.0], "peer": [30.0, 10.0, 20.0]}  # by round

    def time_queries(engine, qs):
        order.append(engine.name)
        return [engine.search(q, 10) for q in qs], {"qps_1t": qps[engine.name][order.count(engine.name) - 1]}

    monkeypatch.setattr(bench, "time_queries", time_queries)
    monkeypatch.setattr(bench, "print_row", lambda row: None)
    rows = bench.bench_collection("toy", SimpleNamespace(rounds=3), None, postings, 200, 5, lambda m: {"set": queries})
    assert order == ["ckqti-exact", "peer"] * 3  # interleaved, not engine by engine
    by = {r["engine"]: r for r in rows}
    assert by["ckqti-exact"]["qps_1t"] == 2.0 and by["peer"]["qps_1t"] == 20.0
    assert by["ckqti-exact"]["top10_agreement"] == 1.0
    assert by["peer"]["top10_agreement"] == pytest.approx(0.9)
    assert by["peer"]["top10_agreement_ties"] == 1.0


def test_synthetic_documents_hold_distinct_zipf_terms_in_document_order():
    terms, docs = bench.zipf_triples(3000, 30, 400, 1.0, np.random.default_rng(0), chunk=1000)
    assert np.all(np.diff(docs.astype(np.int64)) >= 0) and docs.max() == 2999
    pairs = docs.astype(np.int64) * 400 + terms
    assert np.unique(pairs).size == pairs.size  # distinct terms within a document
    cf = np.bincount(terms, minlength=400)
    assert cf[0] == cf.max() and cf[:10].sum() > 10 * cf[200:210].sum()  # Zipf: the head dominates


def synthetic_args(impacts):
    return SimpleNamespace(docs=3000, per_doc=30, vocab=400, zipf=1.0, impacts=impacts)


def test_synthetic_idf_impacts_are_small_on_frequent_terms_and_all_stored():
    post = bench.synthetic(synthetic_args("idf"), None, np.random.default_rng(0))
    cf = np.bincount(post.terms, minlength=400)
    mean = np.bincount(post.terms, weights=post.impacts, minlength=400) / np.maximum(cf, 1)
    head, rare = np.argsort(-cf)[:5], np.flatnonzero((cf > 0) & (cf <= np.percentile(cf[cf > 0], 25)))
    assert mean[head].max() < mean[rare].min()
    uniform = bench.synthetic(synthetic_args("uniform"), None, np.random.default_rng(0))
    assert uniform.impacts.min() >= 1 and uniform.impacts.max() == 255  # 0 would be "not stored"


def test_head_heavy_queries_draw_frequent_terms_and_tail_queries_any_term():
    rng = np.random.default_rng(0)
    vocab = 5000
    cf = np.maximum(1, (20000 / np.arange(1, vocab + 1)).astype(int))
    cf[-100:] = 0  # terms in no document are never drawn
    rows = np.concatenate([np.arange(c) % 20000 for c in cf])
    cols = np.repeat(np.arange(vocab), cf)
    csr = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(20000, vocab))
    head = bench.draw_queries(csr, 300, rng, True)
    tail = bench.draw_queries(csr, 300, rng, False)
    for qs in (head, tail):
        assert all(1 <= len(q) <= 8 and len(set(q)) == len(q) and max(q) < vocab - 100 for q in qs)
    assert {len(q) for q in tail} == set(range(3, 9))  # 3-8 distinct terms (the tail hardly repeats one)
    assert np.median([cf[t] for q in head for t in q]) > 10 * np.median([cf[t] for q in tail for t in q])


def test_printed_row_puts_each_number_under_its_header(capsys):
    """The markdown row (pasted into the README) in :data:`HEADER`'s column order."""
    row = {"collection": "c", "queries": "q", "engine": "e", "qps_1t": 1.0, "qps_batch_1t": 2.0, "qps_2t": 3.0,
           "p50_ms": 4.0, "p99_ms": 5.0, "top10_agreement": 0.6, "top10_agreement_ties": 0.7, "index_mb": 8.0,
           "build_s": 9.0, "load_s": 10.0}
    bench.print_row(row)
    header, line = ([c.strip() for c in text.strip().strip("|").split("|")] for text in (bench.HEADER, capsys.readouterr().out))
    assert dict(zip(header, line)) == {
        "collection": "c", "queries": "q", "engine": "e", "QPS 1t": "1", "QPS batch 1t": "2", "QPS batch 2t": "3",
        "p50 ms": "4.000", "p99 ms": "5.000", "top-10 agr.": "0.600", "agr. up to ties": "0.700", "index MB": "8.0",
        "build s": "9.0", "load s": "10.00"}


def test_agreement_up_to_ties_counts_missing_documents_against_a_short_answer():
    """An engine returning only the reference's top 5 of 10 agrees on half, up to ties too."""
    dense = np.zeros((12, 2), dtype=np.int64)
    dense[:, 0] = np.arange(12, 0, -1)  # distinct scores 12 .. 1 on term 0
    csr = sp.csr_matrix(dense)
    csc = csr.tocsc()
    csc.sort_indices()
    reference = [bench.peer_mod.brute_force_topk(csr, [0], 10)]
    short = [(reference[0][0][:5], reference[0][1][:5])]
    assert bench.agreement(short, reference) == 0.5
    assert bench.agreement_up_to_ties(short, reference, [[0]], csc) == 0.5


def test_a_ckqti_exact_that_differs_from_brute_force_stops_the_benchmark(monkeypatch):
    """The first engine (ckqti exact) becomes every peer's reference only after its answers are checked
    against brute force."""
    dense = np.array([[3, 0], [1, 2], [0, 5]])
    csr = sp.csr_matrix(dense)
    terms, docs = np.nonzero(dense.T)
    postings = SimpleNamespace(terms=terms.astype(np.int32), docs=docs.astype(np.uint32),
                               impacts=dense.T[terms, docs].astype(np.uint8))

    def off_by_one(q):
        d, s = bench.peer_mod.brute_force_topk(csr, q, 10)
        return d, s + 1

    monkeypatch.setattr(bench, "engine_factories", lambda *a: iter([(FakeEngine("ckqti-exact", off_by_one), 1.0, 0.5)]))
    monkeypatch.setattr(bench, "time_queries", lambda engine, qs: ([engine.search(q, 10) for q in qs], {"qps_1t": 1.0}))
    monkeypatch.setattr(bench, "print_row", lambda row: None)
    with pytest.raises(AssertionError, match="ckqti exact differs"):
        bench.bench_collection("toy", SimpleNamespace(rounds=1), None, postings, 3, 2, lambda m: {"set": [[0, 1]]})
