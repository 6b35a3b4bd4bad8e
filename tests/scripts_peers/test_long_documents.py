"""Long documents: TKL and NDRM3 find a relevant abstract buried beyond term 2,000; TK (200-term cap) cannot.

What this measures: *reach*, not ranking quality. The three models get the same kind of
evidence, exact matches of the query's terms: TK and TKL are match-initialised with one shared
embedding matrix (``alpha = 1``, only the ``mu = 1`` kernel weighted; see
``ckqti.train.reranker_tk.match_init``) and NDRM3 uses its explicit (BM25-like) channel only
(combination weights latent 0, explicit 1). Queries are SciFact test claims whose relevant
abstract, *on its own*, every one of the three models scores above a hard non-relevant
abstract (the 10th best BM25 non-relevant one), picked in a fixed order. The relevant
abstract is then buried at depth 2,000 and 3,000 (analyzed terms) of a 4,500-term document of
other abstracts, and competes with a 4,500-term document that begins with the hard negative
and with two of filler. A model that reads the whole document keeps its preference (rank 1);
TK reads the first 200 terms only, so its score of the buried document is exactly its score
with the relevant abstract replaced by more filler, and the document with the hard negative up
front beats it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ckqti.models.inputs import TermText
from ckqti.models.ndrm import NDRMConfig, build_ndrm
from ckqti.models.reranker import Reranker, build_model
from ckqti.text import Analyzer
from ckqti.train.reranker_tk import match_init
from scripts.long_documents import (
    BM25,
    LongDocConfig,
    Source,
    TermCutter,
    depth_ranks,
    hard_negatives,
    plant,
    query_setups,
    rank_of_first,
    run_source,
)

TOTAL = 4500


@pytest.fixture(scope="module")
def world(scifact_source):
    source, analyzer, vocab = scifact_source
    text = TermText(analyzer, vocab)
    torch.manual_seed(0)
    tiny = dict(vocab_size=len(vocab), embedding_dim=32, num_heads=2, ff_dim=16, num_layers=1)
    tk, tkl = build_model("tk", tiny), build_model("tkl", {**tiny, "max_doc_length": 4000})
    tkl.embedding.load_state_dict(tk.embedding.state_dict())
    for m in (tk, tkl):
        match_init(m)
    ndrm3 = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant="ndrm3", dim=16, num_heads=4, conv_window=5,
                                  ff_dim=16, mlp_hidden=16, num_layers=1, max_doc_terms=4000), vocab)
    with torch.no_grad():
        ndrm3.combine.linear.weight.copy_(torch.tensor([[0.0, 1.0]]))
        ndrm3.combine.linear.bias.zero_()
    cpu = torch.device("cpu")
    models = {"TK": Reranker("tk", tk.eval(), text, "tk", 30, 200, cpu),
              "TKL": Reranker("tkl", tkl.eval(), text, "tkl", 30, 4000, cpu),
              "NDRM3": Reranker("ndrm3", ndrm3.eval(), text, "ndrm3", 20, 4000, cpu)}
    return source, analyzer, models


def picked_queries(source, bm25, models, count=3):
    """Queries whose relevant abstract every model, reading it alone, scores above the hard negative."""
    out = []
    for qid in sorted(source.queries):
        rel = source.relevant[qid][0]
        hard = hard_negatives(source, bm25, qid, 10)[-1]
        pair = [source.docs[rel], source.docs[hard]]
        if all(m.score(source.queries[qid], pair)[0] > m.score(source.queries[qid], pair)[1] for m in models.values()):
            out.append((qid, rel, hard))
        if len(out) == count:
            break
    return out


def test_tkl_and_ndrm3_find_a_passage_beyond_term_2000_that_tk_misses(world):
    source, analyzer, models = world
    bm25 = BM25(source.docs, analyzer)
    queries = picked_queries(source, bm25, models)
    assert len(queries) == 3
    cutter = TermCutter(analyzer, source.docs)
    ids = sorted(source.docs)
    for qid, rel, hard in queries:
        rng = np.random.default_rng(len(qid))
        banned = source.judged[qid] | {hard}
        filler = [ids[i] for i in rng.permutation(len(ids)) if ids[i] not in banned][:300]
        front, pos = plant(cutter, hard, 0, TOTAL, filler, 0)
        plain, pos = cutter.fill(filler, pos, TOTAL)
        plain2, pos = cutter.fill(filler, pos, TOTAL)
        query = source.queries[qid]
        for depth in (2000, 3000):
            buried, _ = plant(cutter, rel, depth, TOTAL, filler, pos)
            without, _ = cutter.fill(filler, pos, TOTAL)  # the same filler, no relevant abstract
            assert analyzer(buried)[:200] == analyzer(without)[:200]
            docs = [buried, front, plain, plain2]
            for name in ("TKL", "NDRM3"):
                assert rank_of_first(models[name].score(query, docs)) == 1, (qid, depth, name)
            tk = models["TK"]
            assert rank_of_first(tk.score(query, docs)) > 1, (qid, depth)
            assert tk.score(query, [buried])[0] == tk.score(query, [without])[0]  # TK cannot see it


def test_tk_finds_the_same_abstract_inside_its_cap(world):
    """The miss above is the cap: planted at depth 0, TK ranks it first as well."""
    source, analyzer, models = world
    bm25 = BM25(source.docs, analyzer)
    cutter = TermCutter(analyzer, source.docs)
    ids = sorted(source.docs)
    for qid, rel, hard in picked_queries(source, bm25, models):
        filler = [d for d in ids if d not in source.judged[qid] | {hard}][:300]
        front, pos = plant(cutter, hard, 50, TOTAL, filler, 0)
        planted, _ = plant(cutter, rel, 0, TOTAL, filler, pos)
        assert rank_of_first(models["TK"].score(source.queries[qid], [planted, front])) == 1, qid


def test_script_experiments_report_every_model_depth_and_length(world):
    source, analyzer, models = world
    config = LongDocConfig(depths=(0, 2500), total_terms=3000, distractors=2, lengths=(250, 2500), top_k=1, queries=2)
    res = run_source(source, {k: m.score for k, m in models.items()}, config, analyzer)
    assert set(res["mean_rank"]) == {"BM25", "TK", "TKL", "NDRM3"}
    for model, ranks in res["ranks"].items():
        assert np.asarray(ranks).shape == (2, 2) and np.isin(ranks, [1, 2, 3]).all()
        p = res["p_retrieved"][model]
        # top 1 of the 4 documents: exactly one hit per query over both lengths and both kinds
        assert np.sum(p["relevant"]) + np.sum(p["non_relevant"]) == pytest.approx(1.0)


def test_merge_adds_a_run_of_other_models_to_an_earlier_one(world):
    """``--merge``: an earlier run's models keep their rows, this run's are added (a model run again is
    replaced), and a run over other queries or documents (BM25's ranks differ) or settings is refused."""
    import json
    from dataclasses import asdict, replace

    from scripts.long_documents import merge_results

    source, analyzer, models = world
    config = LongDocConfig(depths=(0, 2500), total_terms=3000, distractors=2, lengths=(250, 2500), top_k=1, queries=2)
    first = run_source(source, {"TK": models["TK"].score}, config, analyzer)
    second = run_source(source, {"TKL": models["TKL"].score, "NDRM3": models["NDRM3"].score}, config, analyzer)
    earlier = json.loads(json.dumps({"config": asdict(config), "results": {"scifact": first}}))
    merged_all = merge_results(earlier, {"scifact": second}, config)
    merged = merged_all["scifact"]
    assert list(merged["mean_rank"]) == ["BM25", "TK", "TKL", "NDRM3"]
    assert merged["ranks"]["TK"] == first["ranks"]["TK"] and merged["ranks"]["TKL"] == second["ranks"]["TKL"]
    assert merged["p_retrieved"]["NDRM3"] == second["p_retrieved"]["NDRM3"]
    other = {**second, "ranks": {**second["ranks"], "BM25": [[3, 3]] * 2}}
    with pytest.raises(ValueError, match="BM25"):
        merge_results(earlier, {"scifact": other}, config)
    with pytest.raises(ValueError, match="settings"):
        merge_results(earlier, {"scifact": second}, replace(config, top_k=2))
    with pytest.raises(ValueError, match="settings"):  # rows of models that read other lengths: not one table
        merge_results(earlier, {"scifact": second}, replace(config, long_cap=2000))
    before = {**earlier, "config": {k: v for k, v in earlier["config"].items() if k != "long_cap"}}
    assert merge_results(before, {"scifact": second}, config) == merged_all  # a JSON written before the field
    with pytest.raises(ValueError, match="collection"):
        merge_results(earlier, {}, config)


def test_rank_of_first_counts_ties_against_the_planted_document():
    assert rank_of_first(np.array([2.0, 1.0, 0.5])) == 1
    assert rank_of_first(np.array([1.0, 1.0, 0.5])) == 2
    assert rank_of_first(np.array([0.0, 0.0, 0.0])) == 3


def test_bm25_is_lucenes_over_the_texts_ranked_together():
    """k1 0.9, b 0.4, idf ``ln(1 + (N - df + 0.5) / (df + 0.5))`` from the collection, average length
    over the two texts ranked (3 and 1 terms: 2)."""
    docs = {"a": "cell protein cell", "b": "protein", "c": "gene expression"}
    bm25 = BM25(docs, Analyzer())
    idf_cell, idf_protein = math.log(1 + 2.5 / 1.5), math.log(1 + 1.5 / 2.5)
    norm_a, norm_b = 0.9 * (0.6 + 0.4 * 3 / 2), 0.9 * (0.6 + 0.4 * 1 / 2)
    a = idf_cell * 2 * 1.9 / (2 + norm_a) + idf_protein * 1.9 / (1 + norm_a)
    b = idf_protein * 1.9 / (1 + norm_b)
    assert bm25.score("cell protein", [docs["a"], docs["b"]]) == pytest.approx([a, b])


def toy_source() -> Source:
    docs = {"a": "cell protein cell", "b": "protein", "c": "gene expression", "d": "cell membrane protein binding"}
    docs |= {f"f{i}": f"filler text number {i}" for i in range(30)}
    return Source("toy", docs, {"q": "cell protein"}, {"q": ["a"]}, {"q": {"a", "f3", "f7"}})


def test_hard_negatives_are_the_best_bm25_documents_not_judged_relevant():
    source = toy_source()
    bm25 = BM25(source.docs, Analyzer())
    assert bm25.rank_collection("cell protein") == ["a", "d", "b"]  # only documents sharing a term, best first
    assert hard_negatives(source, bm25, "q", 5) == ["d", "b"]
    assert hard_negatives(source, bm25, "q", 1) == ["d"]


def test_filler_holds_no_judged_document_and_no_hard_negative():
    source = toy_source()
    (setup,) = query_setups(source, BM25(source.docs, Analyzer()), LongDocConfig(queries=1), 2)
    assert setup.relevant == "a" and setup.hard == ["d", "b"]
    assert len(setup.filler) == len(source.docs) - 5
    assert not set(setup.filler) & {"a", "b", "d", "f3", "f7"}


def relevant_texts(source):
    return {source.queries[q]: source.docs[source.relevant[q][0]] for q in source.queries}


def test_mean_rank_and_found_by_depth(scifact_source):
    """A scorer that sees the relevant text only in the first 2,000 characters (and, for queries whose id
    ends in 7, never): planted at depth 0 it ranks first (where it sees), at depth 2,500 it ties with
    the distractor, which counts against it."""
    source, analyzer, _ = scifact_source
    rel = relevant_texts(source)
    blind = {source.queries[q] for q in source.queries if q.endswith("7")}

    def capped(query, docs):
        return np.array([float(query not in blind and 0 <= d.find(rel[query]) < 2000) for d in docs])

    config = LongDocConfig(depths=(0, 2500), total_terms=3000, distractors=1, lengths=(250,), top_k=1, queries=3)
    res = run_source(source, {"capped": capped}, config, analyzer)
    expected = [[2, 2] if source.queries[q] in blind else [1, 2] for q in res["queries"]]
    assert 0 < sum(e == [2, 2] for e in expected) < 3  # both kinds of query among the three
    assert res["ranks"]["capped"] == expected
    assert res["mean_rank"]["capped"] == pytest.approx(np.mean(expected, axis=0))
    assert res["found"]["capped"] == pytest.approx([sum(e[0] == 1 for e in expected) / 3, 0.0])


def test_retrieval_by_length_tells_relevant_from_non_relevant_documents(scifact_source):
    """A scorer that finds the relevant text anywhere: the top 2 of the 4 documents (2 lengths x
    relevant or not) are the two relevant ones."""
    source, analyzer, _ = scifact_source
    rel = relevant_texts(source)

    def finder(query, docs):
        return np.array([1.0 / (1 + d.find(rel[query])) if rel[query] in d else 0.0 for d in docs])

    config = LongDocConfig(depths=(0,), total_terms=3000, distractors=1, lengths=(250, 2500), top_k=2, queries=2)
    res = run_source(source, {"finder": finder}, config, analyzer)
    assert res["p_retrieved"]["finder"] == {"relevant": [1.0, 1.0], "non_relevant": [0.0, 0.0]}


def test_fill_joins_whole_texts_and_cuts_only_the_last():
    """``fill``: texts taken whole, in pool order (wrapping round), until the count; only the last is cut.
    A one-term text counts its term."""
    docs = {"a": "cell protein binding", "b": "gene", "c": "membrane folding of proteins"}
    cutter = TermCutter(Analyzer(), docs)
    text, nxt = cutter.fill(["a", "b", "c"], 0, 6)
    assert text == "cell protein binding\ngene\nmembrane folding" and nxt == 3
    text, nxt = cutter.fill(["a", "b", "c"], 1, 8)  # "of" is a stopword: 1 + 3 + 3 + 1 terms
    assert text == "gene\nmembrane folding of proteins\ncell protein binding\ngene" and nxt == 5
    assert len(Analyzer()(text)) == 8


def test_probability_of_retrieval_is_the_share_of_queries(scifact_source):
    """``p_retrieved`` is a mean over the queries: a scorer preferring the relevant text for some queries
    (ids not ending in 7) and the non-relevant one for the others, top 2 of the 4 documents."""
    source, analyzer, _ = scifact_source
    rel = relevant_texts(source)
    contrary = {source.queries[q] for q in source.queries if q.endswith("7")}

    def scorer(query, docs):
        return np.array([float((rel[query] in d) != (query in contrary)) for d in docs])

    config = LongDocConfig(depths=(0,), total_terms=3000, distractors=1, lengths=(250, 2500), top_k=2, queries=3)
    res = run_source(source, {"s": scorer}, config, analyzer)
    share = sum(source.queries[q] in contrary for q in res["queries"]) / 3
    assert 0 < share < 1
    p = res["p_retrieved"]["s"]
    assert p["relevant"] == pytest.approx([1 - share] * 2) and p["non_relevant"] == pytest.approx([share] * 2)


def test_planted_documents_take_fresh_filler_after_the_distractors(scifact_source):
    """The planted documents' filler continues the pool after the distractors' (none of its texts
    is in a distractor, which would give the planted document and one distractor the same context)."""
    source, analyzer, _ = scifact_source
    config = LongDocConfig(depths=(0, 1000), total_terms=1500, distractors=2, lengths=(250,), queries=1)
    (setup,) = query_setups(source, BM25(source.docs, analyzer), config, config.distractors)
    seen = []

    def record(query, docs):
        seen.append(list(docs))
        return np.zeros(len(docs))

    depth_ranks(setup, source, TermCutter(analyzer, source.docs), {"r": record}, config)
    distractors, planted = seen
    assert len(distractors) == 2 and len(planted) == 2

    def lines(docs):
        return {line for d in docs for line in d.split("\n") if line.strip()}

    assert lines(planted) - lines([source.docs[setup.relevant]])
    assert not (lines(planted) - lines([source.docs[setup.relevant]])) & lines(distractors)
