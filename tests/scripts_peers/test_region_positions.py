"""scripts/region_positions.py: regions mapped to analyzed terms, hits on a planted text, plots.

The model is a small TKL started from exact matching (``match_init``: only the ``mu = 1`` kernel
weighted), so its best windows are the ones holding the query's words: planted inside 4,500
terms of unrelated abstracts, a relevant abstract that shares words with the claim must be
where its best region is, and nothing past the model's 4,000-term cap can be.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ckqti.explain import Region, explain_text
from ckqti.models.inputs import TermText, WordPieceText, analyzed_spans
from ckqti.models.reranker import Reranker, build_model
from ckqti.text import Analyzer
from ckqti.train.reranker_tk import match_init
from scripts.long_documents import BM25, LongDocConfig, QuerySetup, TermCutter, plant_span, query_setups
from scripts.region_positions import (
    hit_rates,
    natural_regions,
    natural_summary,
    overlaps,
    planted_regions,
    plot,
    region_terms,
)


def region(c0: int, c1: int) -> Region:
    return Region(1, 0, 1, c0, c1, 0.0)


def test_region_terms_and_overlap():
    text = "alpha the beta, gamma of delta"
    spans = analyzed_spans(Analyzer(), text)
    assert [s.start for s in spans] == [0, 10, 16, 25]
    # TKL's regions start and end on terms; IDCM's may start on a stopword or a comma (the next term
    # is their first, not the one before) or hold no term at all (last = first - 1)
    assert region_terms([region(0, 14), region(6, 14), region(14, 21), region(22, 24), region(10, 30)], spans) == \
        [(0, 1), (1, 1), (2, 2), (3, 2), (1, 3)]
    assert overlaps(region(3, 8), (7, 20)) and overlaps(region(10, 12), (0, 11))
    assert not overlaps(region(3, 7), (7, 20)) and not overlaps(region(20, 25), (7, 20))


def test_idcm_regions_map_to_the_terms_they_hold():
    """IDCM's 50-WordPiece windows start anywhere (on "the", on a comma): each maps to exactly the
    analyzed terms in its characters."""
    from ckqti.models.minilm import WordPieceTokenizer

    torch.manual_seed(0)
    bert = dict(vocab_size=30522, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
                max_position_embeddings=128, dropout=0.0)
    idcm = build_model("idcm", dict(bert=bert, max_doc_length=600))
    model = Reranker("idcm", idcm.eval(), WordPieceText(WordPieceTokenizer.minilm()), "idcm", 30, 600, torch.device("cpu"))
    text = " ".join(["the cell, of a protein"] * 60)
    analyzer = Analyzer()
    spans = analyzed_spans(analyzer, text)
    regions = explain_text(model, "cell protein", "d", text).regions
    assert any(r.char_start not in {s.start for s in spans} for r in regions)  # some start on "the", "," ...
    for r, (first, last) in zip(regions, region_terms(regions, spans)):
        assert [s.token for s in spans[first:last + 1]] == analyzer(text[r.char_start:r.char_end])


def test_hit_rates_count_best_and_any_region():
    recs = [[{"hits": [True, False]}, {"hits": [False, True]}], [{"hits": [False, False]}, {"hits": []}]]
    assert hit_rates(recs, (0, 1)) == {"hit@1": [0.5, 0.0], "hit@any": [0.5, 0.5]}
    summary = natural_summary([{"relative_starts": [0.05, 0.5]}, {"relative_starts": [0.95]},
                               {"relative_starts": [0.5]}, {"relative_starts": []}])
    assert summary == pytest.approx({"first_tenth": 1 / 3, "last_tenth": 1 / 3, "mean": 0.5, "documents": 3})


@pytest.fixture(scope="module")
def world(scifact_source):
    source, analyzer, vocab = scifact_source
    torch.manual_seed(0)
    tkl = build_model("tkl", dict(vocab_size=len(vocab), embedding_dim=32, num_heads=2, ff_dim=16, num_layers=1,
                                  max_doc_length=4000))
    match_init(tkl)
    model = Reranker("tkl", tkl.eval(), TermText(analyzer, vocab), "tkl", 30, 4000, torch.device("cpu"))
    return source, analyzer, {"TKL": model}


def test_plant_span_marks_the_planted_characters(world):
    source, analyzer, _ = world
    cutter = TermCutter(analyzer, source.docs)
    ids = sorted(source.docs)
    for depth in (0, 700):
        text, _, (c0, c1) = plant_span(cutter, ids[0], depth, 1500, ids[1:200], 0)
        assert text[c0:c1] == source.docs[ids[0]]
        assert len(analyzer(text[:c0])) == depth
        assert len(analyzer(text)) == 1500


def test_best_region_lies_on_the_planted_text_and_never_past_the_cap(world):
    source, analyzer, models = world
    config = LongDocConfig(depths=(0, 2000, 3500, 4100), total_terms=4500, queries=40)
    cutter = TermCutter(analyzer, source.docs)
    setups = query_setups(source, BM25(source.docs, analyzer), config, 0)
    checked = 0
    for setup in setups:
        shared = set(analyzer(source.queries[setup.qid])) & set(analyzer(source.docs[setup.relevant]))
        if len(shared) < 5:  # a claim that shares few words with its abstract: exact matching may look elsewhere
            continue
        recs = planted_regions(setup, source, cutter, models, config)["TKL"]
        for rec in recs[:3]:
            first, last = rec["regions"][0]
            lo, hi = rec["planted"]
            assert rec["hits"][0], (setup.qid, rec["depth"])
            assert first <= hi and last >= lo
        beyond = recs[3]  # planted at 4,100: the model reads 4,000 terms
        assert not any(beyond["hits"]) and all(last < 4000 for _, last in beyond["regions"])
        checked += 1
        if checked == 3:
            break
    assert checked == 3


def test_natural_regions_and_plot(world, tmp_path):
    source, analyzer, models = world
    qids = sorted(source.queries)[:5]
    natural = natural_regions(source, models, analyzer, qids)["TKL"]
    assert [r["qid"] for r in natural] == qids
    for r in natural:
        assert r["length"] == len(analyzer(source.docs[r["docid"]]))
        assert 1 <= len(r["relative_starts"]) <= 3
        assert all(0 <= x < 1 for x in r["relative_starts"])
    config = LongDocConfig(depths=(0, 100), total_terms=400, queries=1)
    planted = {"TKL": [[{"depth": 0, "planted": [0, 99], "regions": [(3, 32)], "hits": [True]},
                        {"depth": 100, "planted": [100, 199], "regions": [(250, 279)], "hits": [False]}]]}
    results = {"scifact": {"planted": planted, "hit_rates": {"TKL": hit_rates(planted["TKL"], config.depths)},
                           "natural": {"TKL": natural}}}
    png = plot(results, config, {"TKL": 4000}, tmp_path)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert np.isclose(results["scifact"]["hit_rates"]["TKL"]["hit@1"], [1.0, 0.0]).all()


def test_first_and_last_tenth_are_half_open():
    """A best region starting at 0.1 of the document is in its second tenth; one at 0.9 in its last."""
    summary = natural_summary([{"relative_starts": [0.1]}, {"relative_starts": [0.9]}])
    assert summary == pytest.approx({"first_tenth": 0.0, "last_tenth": 0.5, "mean": 0.5, "documents": 2})


def test_planted_terms_and_natural_starts_are_the_texts_own(world):
    """``planted`` is the planted text's first and last term (inclusive); a natural region's relative
    start is its first term's position over the document's length."""
    source, analyzer, models = world
    qid = sorted(source.queries)[0]
    rel = source.relevant[qid][0]
    filler = [d for d in sorted(source.docs) if d not in source.judged[qid]][:200]
    setup = QuerySetup(qid, rel, [], filler)
    cutter = TermCutter(analyzer, source.docs)
    config = LongDocConfig(depths=(0, 700), total_terms=1500, queries=1)
    for rec in planted_regions(setup, source, cutter, models, config)["TKL"]:
        text, _, _ = plant_span(cutter, rel, rec["depth"], config.total_terms, filler, 0)
        lo, hi = rec["planted"]
        assert analyzer(text)[lo:hi + 1] == analyzer(source.docs[rel]) and lo == rec["depth"]
    (nat,) = natural_regions(source, models, analyzer, [qid])["TKL"]
    text = source.docs[nat["docid"]]
    spans = analyzed_spans(analyzer, text)
    regions = explain_text(models["TKL"], source.queries[qid], nat["docid"], text).regions
    assert len(regions) > 1 and nat["length"] == len(spans)
    assert [spans[round(x * len(spans))].start for x in nat["relative_starts"]] == [r.char_start for r in regions]
