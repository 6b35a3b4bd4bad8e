"""The index's cost in effectiveness on SciFact test, against exhaustive float scoring.

Thresholds are the targets (docs/INDEX.md): mean overlap@100 >= 0.95 and |delta nDCG@10| <=
0.005, for the explicit model and for the bundled NDRM3, whose latent channel is gated
(``NDRMConfig.latent_gate``) since session 10: measured overlap@100 0.9953, delta +0.0008
(session 12's model; session 11's: 0.9955, -0.0002; session 10's: 0.9950, +0.0021).
The dense NDRM3 bundled before reached 0.817 and -0.0055 (its latent channel scores every
term against every document; ``scripts/latent_storage.py``).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from ckqti import api
from ckqti.models.specs import DEFAULT_CHECKPOINT
from indexer.fidelity import (
    ExhaustiveReference,
    FidelityReport,
    index_report,
    mean_overlap_at_k,
    measure_fidelity,
    overlap_at_k,
    top_k_run,
)


def run(tmp_path, data_dir, model):
    sf = data_dir / "scifact"
    idx = tmp_path / "idx"
    api.index(sf / "corpus.jsonl", idx, model=model, progress=False)
    return measure_fidelity(idx, sf / "corpus.jsonl", model, sf / "queries.jsonl", sf / "qrels" / "test.tsv")


def test_the_report_measures_the_index_run_against_the_reference():
    """The tests below assert lower bounds only, which a report overstating the overlap (a union for
    an intersection) or scoring the reference's run as the index's would pass: here both runs
    and the numbers are known. Overlap@2: q1 2 of 2, q2 1 of 2; the index's nDCG@10: q1's relevant
    document at rank 2, q2's missed."""
    ref = ExhaustiveReference(queries={"q1": "text one", "q2": "text two"}, qrels={"q1": {"d1": 1}, "q2": {"d3": 1}},
                              run={"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d3": 2.0, "d4": 1.0}}, ndcg10=1.0, k=2)
    index_runs = {"text one": [("d2", 3.0), ("d1", 1.0), ("d9", 0.5)], "text two": [("d4", 2.0), ("d5", 1.0)]}
    searcher = SimpleNamespace(resolution=7, search=lambda text, k: SimpleNamespace(
        hits=[SimpleNamespace(docid=d, score=s) for d, s in index_runs[text][:k]]))
    rep = index_report(searcher, ref)
    assert rep == FidelityReport(2, 0.75, 2, pytest.approx(0.5 / math.log2(3)), 1.0, 7)
    assert rep.delta_ndcg10 == pytest.approx(0.5 / math.log2(3) - 1.0)


def test_overlap_is_of_the_reference_top_k_or_all_of_it_when_shorter():
    """Overlap@k divided by k: a collection of 3 documents, found in full, scored 3/100."""
    assert overlap_at_k(["a", "b", "c"], ["c", "a", "b"], 100) == 1.0
    assert overlap_at_k(["a", "x"], ["c", "a", "b"], 100) == pytest.approx(1 / 3)
    assert overlap_at_k(["b", "c", "a"], ["a", "b", "c", "d"], 2) == 0.5  # both cut at k
    assert overlap_at_k([], [], 100) is None
    assert mean_overlap_at_k({"q1": ["a"], "q2": [], "q3": ["x"]}, {"q1": ["a", "b"], "q2": [], "q3": ["y"]}, 10) == 0.25
    ref = ExhaustiveReference(queries={"q": "text"}, qrels={"q": {"d1": 1}}, run={"q": {"d1": 2.0, "d2": 1.0}},
                              ndcg10=1.0, k=100)  # a two-document collection
    searcher = SimpleNamespace(resolution=7, search=lambda text, k: SimpleNamespace(
        hits=[SimpleNamespace(docid=d, score=s) for d, s in [("d2", 3.0), ("d1", 1.0)][:k]]))
    assert index_report(searcher, ref).overlap_at_k == 1.0


def test_top_k_run_weighs_each_term_column_by_its_query_weight():
    matrix = np.array([[1.0, 0.0], [0.0, 1.0], [3.0, 0.0], [1.0, 1.0]], np.float32)  # [N=4, T=2]: terms 5 and 9
    run = top_k_run(matrix, {5: 0, 9: 1}, {"q": (np.array([9, 5]), np.array([2, 1]))}, ["a", "b", "c", "d"], 3)
    assert list(run["q"].items()) == [("c", 3.0), ("d", 3.0), ("b", 2.0)]  # 3, 2 and 3 = 2 + 1; ties in corpus order


def test_explicit_model_index_matches_exhaustive_scoring(tmp_path, data_dir):
    rep = run(tmp_path, data_dir, "ndrm2")
    assert rep.queries == 300
    assert rep.overlap_at_k >= 0.95
    assert abs(rep.delta_ndcg10) <= 0.005


@pytest.mark.slow
@pytest.mark.skipif(not DEFAULT_CHECKPOINT.is_file(), reason="no bundled NDRM3 checkpoint")
def test_latent_model_index_matches_exhaustive_scoring(tmp_path, data_dir):
    rep = run(tmp_path, data_dir, str(DEFAULT_CHECKPOINT))
    assert rep.overlap_at_k >= 0.95
    assert abs(rep.delta_ndcg10) <= 0.005


def test_gated_latent_model_index_matches_exhaustive_scoring(tmp_path, data_dir):
    """A gated latent NDRM3 (``NDRMConfig.latent_gate``) scores every unstored pair the same
    constant, so its index ranks as exhaustive scoring does, up to quantization (Cranfield, a
    small random model with embedding neighbours open)."""
    import torch

    from ckqti.models.checkpoint import save_checkpoint
    from ckqti.models.ndrm import NDRMConfig, build_ndrm
    from ckqti.text import Analyzer
    from indexer.analyze import analyze_corpus

    cran = data_dir / "cranfield"
    analyzer = Analyzer()
    vocab = analyze_corpus(cran / "cran.all.1400", analyzer, fmt="smart").vocab
    torch.manual_seed(0)
    config = NDRMConfig(vocab_size=len(vocab), variant="ndrm3", dim=16, num_heads=4, conv_window=5, ff_dim=16,
                        mlp_hidden=16, pool_window=20, pool_stride=10, num_layers=1, latent_gate=0.7)
    model = build_ndrm(config, vocab).eval()
    with torch.no_grad():
        model.combine.linear.weight.copy_(torch.tensor([[0.5, 1.0]]))  # both channels count, neither negatively
    ckpt = tmp_path / "gated.pt"
    save_checkpoint(ckpt, model, "ndrm3", config.to_dict(), vocab, analyzer)
    idx = tmp_path / "idx"
    manifest = api.index(cran / "cran.all.1400", idx, model=str(ckpt), fmt="smart", progress=False)
    assert manifest.num_postings > 2 * len(vocab)
    rep = measure_fidelity(idx, cran / "cran.all.1400", str(ckpt), cran / "cran.qry", cran / "cranqrel", fmt="smart")
    assert rep.queries == 225
    assert rep.overlap_at_k >= 0.99
    assert abs(rep.delta_ndcg10) <= 0.002


def test_the_index_run_is_cut_at_the_reference_depth_not_at_ten():
    """Overlap@100 needs the index's top 100: a run cut at 10 would hold a tenth of it at most."""
    docs = [f"d{i}" for i in range(20)]
    ref = ExhaustiveReference(queries={"q": "text"}, qrels={"q": {"d0": 1}}, run={"q": {d: 20.0 - i for i, d in enumerate(docs)}},
                              ndcg10=1.0, k=20)
    searcher = SimpleNamespace(resolution=7, search=lambda text, k: SimpleNamespace(
        hits=[SimpleNamespace(docid=d, score=20.0 - i) for i, d in enumerate(docs[:k])]))
    assert index_report(searcher, ref).overlap_at_k == 1.0


def test_mean_overlap_is_nan_when_the_reference_ranks_nothing():
    assert math.isnan(mean_overlap_at_k({"q1": ["a"], "q2": []}, {"q1": [], "q2": []}, 10))


def test_a_resolution_sweep_scores_exhaustively_once_and_searches_at_each_resolution(monkeypatch):
    """Each report is of a searcher at its own resolution (None: the default), against one reference."""
    import indexer.fidelity as fidelity
    import retriever.index
    import retriever.query
    import retriever.search

    ref = ExhaustiveReference(queries={"q": "text"}, qrels={"q": {"d1": 1}}, run={"q": {"d1": 2.0, "d2": 1.0}},
                              ndcg10=1.0, k=2)
    calls = []
    monkeypatch.setattr(fidelity, "exhaustive_reference", lambda *a, **kw: calls.append(a) or ref)
    monkeypatch.setattr(retriever.index, "Index", lambda path: SimpleNamespace(path=path))

    class Searcher:  # finds d1 alone at a resolution of at least 5
        def __init__(self, index, resolution):
            self.resolution = resolution

        def search(self, text, k):
            hits = [("d1", 2.0)] if self.resolution >= 5 else [("d2", 2.0)]
            return SimpleNamespace(hits=[SimpleNamespace(docid=d, score=s) for d, s in hits])

    monkeypatch.setattr(retriever.search, "Searcher", Searcher)
    reps = fidelity.resolution_sweep("idx", "c", "m", "q", "r", [3, 7, None])
    assert len(calls) == 1
    assert [r.resolution for r in reps] == [3, 7, retriever.query.RESOLUTION]
    assert [r.overlap_at_k for r in reps] == [0.5, 0.5, 0.5] and reps[0].ndcg10_index == 0.0 < reps[1].ndcg10_index
    assert fidelity.measure_fidelity("idx", "c", "m", "q", "r", resolution=4).resolution == 4
