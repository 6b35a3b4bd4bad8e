"""The measures on hand-computed examples and their agreement with trec_eval; measure names and cutoffs."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys

import pytest
import pytrec_eval

from ckqti.errors import InputError
from ckqti.evaluate import evaluate
from ckqti.measures import DEFAULT_MEASURES, Measure, ncg_at_k, parse_measure
from indexer.readers import read_corpus, read_qrels
from retriever.runs import trec_order
from tests.ckqti.eval_data import DATA, QRELS, ROOT, RUN


def scifact_run(seed: int) -> tuple[dict, dict]:
    """A random run over SciFact's test queries: the relevant docs plus 150 random ones, scores on a coarse grid (ties)."""
    qrels = read_qrels(DATA / "scifact" / "qrels" / "test.tsv")
    docids = [d.docid for d in read_corpus(DATA / "scifact" / "corpus.jsonl")]
    rng = random.Random(seed)
    run = {}
    for qid, judged in qrels.items():
        candidates = set(judged) | set(rng.sample(docids, 150))
        run[qid] = {d: rng.randint(0, 20) / 10 for d in sorted(candidates)}
    return run, qrels


def test_hand_computed_three_document_example():
    result = evaluate(RUN, QRELS, ["nDCG@10", "nDCG@1", "RR@10", "AP@100", "P@10", "R@100", "NCG@100", "NCG@1"])
    dcg = 1 / math.log2(2) + 2 / math.log2(3)  # d3 (gain 1) at rank 1, d1 (gain 2) at rank 2
    ideal = 2 / math.log2(2) + 1 / math.log2(3)
    expected = {
        "nDCG@10": dcg / ideal,  # 0.8597
        "nDCG@1": 1 / 2,
        "RR@10": 1.0,
        "AP@100": (1 / 1 + 2 / 2) / 2,
        "P@10": 2 / 10,
        "R@100": 1.0,
        "NCG@100": (1 + 2) / (2 + 1),
        "NCG@1": 1 / 2,
    }
    assert result.mean == pytest.approx(expected)
    assert result.by_query == {"q1": pytest.approx(expected)}
    assert round(result.mean["nDCG@10"], 4) == 0.8597


def test_rel_level_changes_binary_measures_only():
    result = evaluate(RUN, QRELS, ["nDCG@10", "RR@10", "AP@100", "P@10", "R@100", "NCG@100"], rel_level=2)
    assert result.mean == pytest.approx(
        {
            "nDCG@10": evaluate(RUN, QRELS, ["nDCG@10"]).mean["nDCG@10"],
            "RR@10": 1 / 2,  # only d1 counts, at rank 2
            "AP@100": (1 / 2) / 1,
            "P@10": 1 / 10,
            "R@100": 1.0,
            "NCG@100": 1.0,
        }
    )


def test_rel_level_reaches_recall():
    only_d3 = {"q1": {"d3": 1.0}}  # grade 1 retrieved, grade 2 missed
    assert evaluate(only_d3, QRELS, ["R@100"]).mean["R@100"] == pytest.approx(1 / 2)
    assert evaluate(only_d3, QRELS, ["R@100"], rel_level=2).mean["R@100"] == 0.0


def test_ncg_at_k():
    gains = {"a": 3, "b": 1, "c": 2, "n": 0, "neg": -1}
    assert ncg_at_k(["b", "x", "a"], gains, 2) == pytest.approx(1 / (3 + 2))
    assert ncg_at_k(["b", "x", "a"], gains, 3) == pytest.approx((1 + 3) / (3 + 2 + 1))
    assert ncg_at_k(["c", "a", "b"], gains, 3) == 1.0  # order inside the cutoff does not matter
    assert ncg_at_k(["neg", "n"], gains, 10) == 0.0
    assert ncg_at_k(["a"], gains, None) == pytest.approx(3 / 6)
    assert ncg_at_k(["a"], {"a": 0}, 10) == 0.0  # no positive gain: 0, not a division by zero


def test_query_without_relevant_document_counts_as_zero():
    result = evaluate({"q": {"a": 1.0}}, {"q": {"a": 0}}, ["nDCG@10", "RR@10", "NCG@100"])
    assert result.mean == {"nDCG@10": 0.0, "RR@10": 0.0, "NCG@100": 0.0} and result.num_queries == 1


def test_ties_are_broken_alike_by_every_measure():
    """ir_measures' default provider mix would give RR 1.0 here but nDCG as if 'a' were second."""
    result = evaluate({"q": {"a": 1.0, "b": 1.0}}, {"q": {"a": 1}}, ["RR@10", "nDCG@10", "NCG@1"])
    assert result.mean == pytest.approx({"RR@10": 0.5, "nDCG@10": 1 / math.log2(3), "NCG@1": 0.0})


def test_scores_equal_in_single_precision_tie_for_every_measure():
    """trec_eval (and pytrec_eval) hold a score as a C float: 1.0000000001 and 1.0 tie there, and 'b' ranks
    before 'a'. NCG@1 and RR@1 counted 'a' first (1.0 each, beside nDCG@1's 0.0)."""
    run = {"q": {"a": 1.0000000001, "b": 1.0, "c": 0.5}}
    result = evaluate(run, {"q": {"a": 1}}, ["nDCG@1", "NCG@1", "RR", "RR@1"])
    direct = pytrec_eval.RelevanceEvaluator({"q": {"a": 1}}, {"ndcg_cut.1", "recip_rank"}).evaluate(run)["q"]
    assert (direct["ndcg_cut_1"], direct["recip_rank"]) == (0.0, 0.5)
    assert result.mean == pytest.approx({"nDCG@1": 0.0, "NCG@1": 0.0, "RR": 0.5, "RR@1": 0.0})


def test_rr_cutoff_counts_only_the_top_k():
    run = {"q": {f"d{i:02d}": 100.0 - i for i in range(1, 31)}}  # d01 ranked first ... d30 last
    at_11 = evaluate(run, {"q": {"d11": 1}}, ["RR@10", "RR@11", "RR"]).mean
    assert at_11 == pytest.approx({"RR@10": 0.0, "RR@11": 1 / 11, "RR": 1 / 11})


def test_measure_names_and_bad_arguments():
    assert parse_measure("MRR@10").family == "RR" and parse_measure("MAP@100").family == "AP"
    assert parse_measure("nDCG").cutoff is None
    # any case, as trec_eval users write them, and MRR, MAP: each named one way in every column and key
    # (the table's header read "ndcg@10" as typed, beside the notes' "RR, AP, P, R")
    assert evaluate(RUN, QRELS, ["MRR@10"]).mean == {"RR@10": 1.0}
    assert parse_measure("ndcg@10") == Measure("nDCG", 10, "nDCG@10") and parse_measure("map") == Measure("AP", None, "AP")
    assert parse_measure(" nDCG@010 ").name == "nDCG@10" and parse_measure("mrr").name == "RR"
    assert evaluate(RUN, QRELS, ["ndcg@10", "p@1"]).mean == {"nDCG@10": evaluate(RUN, QRELS).mean["nDCG@10"],
                                                              "P@1": evaluate(RUN, QRELS, ["P@1"]).mean["P@1"]}
    for bad in ("BLEU@4", "nDCG@0", "nDCG@x", "nDCG@\u0661\u0660", "P@\uff11"):  # Arabic-Indic and full-width digits
        with pytest.raises(InputError):
            parse_measure(bad)
    with pytest.raises(InputError):
        evaluate(RUN, QRELS, rel_level=0)
    with pytest.raises(InputError, match="no judgement reaches grade 3 \\(the highest is 2\\)"):
        evaluate(RUN, QRELS, rel_level=3)  # TREC DL's grades stop at 3: --rel-level 5 scored every query 0
    assert evaluate(RUN, QRELS, rel_level=2).mean["P@10"] == pytest.approx(0.1)
    with pytest.raises(InputError):
        evaluate(RUN, {"q": {}})
    for twice in (["P@10", "P@10"], ["AP@100", "MAP@100"]):
        with pytest.raises(InputError):
            evaluate(RUN, QRELS, twice)


def test_a_cutoff_beyond_trec_evals_reach_is_refused():
    """trec_eval reads a cutoff as a C long: nDCG@99999999999999999999 came back named ndcg_cut_9223372036854775807
    and ended ``ckqti eval`` in a KeyError traceback (found by fuzzing). Up to 2**31 - 1 is read whole."""
    assert evaluate(RUN, QRELS, ["nDCG@2147483647", "P@2147483647"]).mean == pytest.approx(
        {"nDCG@2147483647": evaluate(RUN, QRELS, ["nDCG"]).mean["nDCG"], "P@2147483647": 2 / 2147483647})
    for measure in ("AP@99999999999999999999", "R@18446744073709551617", "nDCG@2147483648"):
        with pytest.raises(InputError, match="the cutoff must be at most 2,147,483,647"):
            evaluate(RUN, QRELS, [measure])


def test_precision_and_recall_without_a_cutoff_take_every_retrieved_document():
    # --measures P crashed with ir_measures' AssertionError: its P and R need a cutoff (trec_eval's set_P, set_recall do not)
    assert evaluate(RUN, QRELS, ["P", "R"]).mean == pytest.approx({"P": 2 / 3, "R": 1.0})  # d3, d1 of the 3 retrieved
    assert evaluate(RUN, QRELS, ["P", "R"], rel_level=2).mean == pytest.approx({"P": 1 / 3, "R": 1.0})  # d1 alone
    run, qrels = scifact_run(seed=5)
    result = evaluate(run, qrels, ["P", "R"])
    direct = pytrec_eval.RelevanceEvaluator(qrels, {"set_P", "set_recall"}).evaluate(run)
    for qid, scores in result.by_query.items():
        assert scores == pytest.approx({"P": direct[qid]["set_P"], "R": direct[qid]["set_recall"]}, abs=1e-12)


def test_agrees_with_trec_eval_on_real_qrels():
    run, qrels = scifact_run(seed=7)
    result = evaluate(run, qrels, ["nDCG@10", "P@10", "AP@100", "R@100", "RR@10", "NCG@100"])
    direct = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "P.10", "map_cut.100", "recall.100"}).evaluate(run)
    names = {"nDCG@10": "ndcg_cut_10", "P@10": "P_10", "AP@100": "map_cut_100", "R@100": "recall_100"}
    for qid, scores in result.by_query.items():
        for ours, theirs in names.items():
            assert scores[ours] == pytest.approx(direct[qid][theirs], abs=1e-12)
        ranked = [d for d, _ in trec_order(run[qid])][:10]
        first = next((i for i, d in enumerate(ranked, 1) if qrels[qid].get(d, 0) >= 1), None)
        assert scores["RR@10"] == pytest.approx(1 / first if first else 0.0)
        # Binary judgements, at most 100 relevant per query: NCG@100 is recall@100.
        assert scores["NCG@100"] == pytest.approx(scores["R@100"])
    assert 0.0 < result.mean["nDCG@10"] < 1.0


def test_a_query_judged_only_below_minus_one_scores_0_and_crashes_nothing():
    """trec_eval sized an array by the largest grade: a query whose grades were all -2 or lower beside
    another query killed ``ckqti eval`` with a segmentation fault (found by fuzzing). Negative grades
    are no gain and not relevant (as 0 in trec_eval), so that query scores 0. In a child process: the
    fault would end the test run."""
    code = (
        "import json; from ckqti.evaluate import evaluate; from ckqti.measures import DEFAULT_MEASURES; "
        "r = evaluate({'a': {'d1': 1.0, 'd2': 2.0}, 'b': {'d1': 1.0, 'd2': 2.0}}, "
        "{'a': {'d1': 2, 'd2': 1}, 'b': {'d1': -2, 'd2': -5}}, DEFAULT_MEASURES); print(json.dumps(r.by_query))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-500:]
    by_query = json.loads(out.stdout)
    assert by_query["b"] == dict.fromkeys(DEFAULT_MEASURES, 0.0)
    assert by_query["a"]["AP@100"] == 1.0 and by_query["a"]["RR@10"] == 1.0
    assert by_query["a"]["nDCG@10"] == pytest.approx((1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)))
