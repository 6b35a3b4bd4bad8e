"""Measures on hand-computed examples, agreement with trec_eval, query handling, significance, tables."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval
from scipy import stats

from ckqti.errors import InputError
from ckqti.evaluate import EvalReport, EvalResult, evaluate, evaluate_files
from ckqti.measures import DEFAULT_MEASURES, Measure, ncg_at_k, parse_measure
from ckqti.significance import compare_results, paired_ttest, wilcoxon
from ckqti.tables import format_table
from indexer.readers import read_corpus, read_qrels
from retriever.runs import trec_order, write_run

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / ".." / "shared" / "data"

# One query, three documents, graded: d1 grade 2, d2 judged non-relevant, d3 grade 1.
QRELS = {"q1": {"d1": 2, "d2": 0, "d3": 1}}
RUN = {"q1": {"d3": 3.0, "d1": 2.0, "d2": 1.0}}


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


def test_missing_unjudged_and_empty_queries():
    qrels = {**QRELS, "q2": {"x": 1}, "q4": {}}
    run = {**RUN, "q3": {"y": 1.0}, "q2": {}}
    result = evaluate(run, qrels)
    assert list(result.by_query) == ["q1", "q2"]  # q4 has no judgements: excluded
    assert result.num_queries == 2
    assert result.by_query["q2"] == dict.fromkeys(DEFAULT_MEASURES, 0.0)  # judged, no results: 0 (trec_eval -c)
    assert result.missing == ("q2",) and result.unjudged == ("q3",)
    single = evaluate(RUN, QRELS)
    assert result.mean == pytest.approx({m: v / 2 for m, v in single.mean.items()})


def test_only_judged_queries_are_sorted(monkeypatch):
    """A run's unjudged queries are reported, not ranked: sorting SciFact's 809 unjudged claims at
    k = 1,000 was a fifth of `ckqti eval`'s time. Integer query ids match the qrels' strings."""
    import ckqti.evaluate as module

    sorted_sizes: list[int] = []
    monkeypatch.setattr(module, "trec_order", lambda docs: sorted_sizes.append(len(docs)) or trec_order(docs))
    run = {**RUN, "q3": {f"y{i}": float(i) for i in range(50)}, 7: {"d1": 1.0}}
    result = evaluate(run, {**QRELS, "7": {"d1": 1}})
    assert sorted(sorted_sizes) == [1, 3]  # q1 and 7, not q3
    assert result.unjudged == ("q3",) and result.by_query["7"]["RR@10"] == 1.0
    assert result.by_query["q1"] == evaluate(RUN, QRELS).by_query["q1"]


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


def test_a_score_in_memory_is_a_number_not_text_or_a_bool():
    """Text that reads as a number ("1.0") and bools (numpy's too) were ranked as scores in a run given in memory,
    where rerank's candidates in memory refuse them; numpy numbers are numbers."""
    import numpy as np

    for bad, shown in (("1.0", "str '1.0'"), (True, "bool True"), (np.bool_(True), "bool np.True_")):
        for run in ({"q1": {"d1": bad, "d3": 1.0}}, {"q1": [("d1", 2.0), ("d3", bad)]}):
            with pytest.raises(InputError, match=f"run\\['q1'\\]: a score is a number, found {shown}"):
                evaluate(run, QRELS, ["nDCG@10"])
    good = evaluate({"q1": {"d3": np.float32(3.0), "d1": np.int64(2), "d2": 1}}, QRELS, ["nDCG@10"])
    assert good.mean["nDCG@10"] == evaluate(RUN, QRELS, ["nDCG@10"]).mean["nDCG@10"]


def test_a_nan_score_is_refused_not_ranked_anywhere():
    """A run file's 'nan' is refused as it is read, but a run given as a mapping (ckqti train's dev runs, from a
    model's scores) reached the sort, where NaN compares false with everything: 'a' (0.7) ranked third behind
    NaN's 'z' here, RR 1/3 where the scores say 1/2, without a word."""
    with pytest.raises(InputError, match="query 'q': document 'z' has score nan"):
        evaluate({"q": {"z": math.nan, "a": 0.7, "b": 1.0}}, {"q": {"a": 1}}, ["RR"])
    unjudged = evaluate({"q": {"a": 0.7, "b": 1.0}, "u": {"x": math.nan}}, {"q": {"a": 1}}, ["RR"])  # not ranked
    assert unjudged.mean == {"RR": 0.5} and unjudged.unjudged == ("u",)
    infinite = evaluate({"q": {"z": -math.inf, "a": 0.7, "b": math.inf}}, {"q": {"a": 1}}, ["RR"])  # these order
    assert infinite.mean == {"RR": 0.5}


def test_rr_cutoff_counts_only_the_top_k():
    run = {"q": {f"d{i:02d}": 100.0 - i for i in range(1, 31)}}  # d01 ranked first ... d30 last
    at_11 = evaluate(run, {"q": {"d11": 1}}, ["RR@10", "RR@11", "RR"]).mean
    assert at_11 == pytest.approx({"RR@10": 0.0, "RR@11": 1 / 11, "RR": 1 / 11})


def test_run_as_ranked_lists():
    as_lists = {q: sorted(docs.items()) for q, docs in RUN.items()}
    assert evaluate(as_lists, QRELS).mean == evaluate(RUN, QRELS).mean


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


def test_paired_ttest_on_known_vectors():
    a, b = [1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 5.0, 9.0]  # differences 1, 2, 2, 5: mean 2.5, sd sqrt(3)
    result = paired_ttest(a, b)
    t = 2.5 / (math.sqrt(3) / math.sqrt(4))
    assert result.statistic == pytest.approx(t)
    assert result.p_value == pytest.approx(2 * stats.t.sf(t, df=3))
    assert (result.mean_delta, result.n, result.test) == (2.5, 4, "t-test")
    assert paired_ttest(b, a).statistic == pytest.approx(-t)
    reference = stats.ttest_rel(b, a)
    assert (result.statistic, result.p_value) == pytest.approx((reference.statistic, reference.pvalue))


def test_wilcoxon_on_known_vectors():
    a, b = [0.0] * 5, [1.0, 2.0, 3.0, 4.0, 5.0]  # all differences positive: W = 0, exact p = 2 / 2**5
    result = wilcoxon(a, b)
    assert (result.statistic, result.p_value, result.mean_delta, result.n) == (0.0, pytest.approx(0.0625), 3.0, 5)
    rng = random.Random(3)
    x = [rng.random() for _ in range(30)]
    y = [v + rng.gauss(0.05, 0.1) for v in x]
    reference = stats.wilcoxon(y, x)
    assert (wilcoxon(x, y).statistic, wilcoxon(x, y).p_value) == pytest.approx((reference.statistic, reference.pvalue))


def test_significance_on_mappings_and_degenerate_input():
    a, b = {"q1": 0.1, "q2": 0.5, "q3": 0.2}, {"q3": 0.3, "q1": 0.4, "q2": 0.5}  # aligned by qid, not by order
    assert paired_ttest(a, b).mean_delta == pytest.approx((0.3 + 0.0 + 0.1) / 3)
    same = paired_ttest(a, dict(a))
    assert (same.statistic, same.p_value, same.mean_delta) == (0.0, 1.0, 0.0)
    assert wilcoxon(a, dict(a)).p_value == 1.0
    with pytest.raises(ValueError):
        paired_ttest(a, {"q1": 0.1, "q2": 0.5})
    with pytest.raises(ValueError):
        wilcoxon([1.0, 2.0], [1.0])
    one = paired_ttest([1.0], [2.0])
    assert math.isnan(one.statistic) and math.isnan(one.p_value) and (one.mean_delta, one.n) == (1.0, 1)
    constant = paired_ttest([0.0, 0.1, 0.2], [0.5, 0.6, 0.7])  # zero variance of the differences
    assert constant.mean_delta == pytest.approx(0.5) and constant.p_value < 0.05


def test_format_table_plain_and_markdown():
    rows = [["bm25", "0.5000"], ["a-longer-name", "1.0000"]]
    assert format_table(["run", "nDCG@10"], rows) == (
        "run            nDCG@10\nbm25            0.5000\na-longer-name   1.0000"
    )
    assert format_table(["run", "nDCG@10"], rows, markdown=True).splitlines() == [
        "| run           | nDCG@10 |",
        "|---------------|--------:|",
        "| bm25          |  0.5000 |",
        "| a-longer-name |  1.0000 |",
    ]


def test_evaluate_files_with_comparison(tmp_path):
    qrels_path = DATA / "vaswani" / "qrels"
    qrels = read_qrels(qrels_path)
    rng = random.Random(5)
    good = {q: [(d, 1.0 + rng.random()) for d in docs] + [("1", 0.5)] for q, docs in list(qrels.items())[:60]}
    poor = {q: [("1", 2.0)] + [(d, rng.random()) for d in docs][:2] for q, docs in qrels.items()}
    write_run(tmp_path / "good.run", good, "good")
    write_run(tmp_path / "poor.run", poor, "poor")
    report = evaluate_files(tmp_path / "good.run", qrels_path, per_query=True, compare=tmp_path / "poor.run")
    assert report.names == ("good.run", "poor.run")
    first, second = report.results
    assert first.num_queries == second.num_queries == 93 and len(first.missing) == 33
    assert first.mean["R@100"] == pytest.approx(60 / 93)  # every relevant doc of 60 queries retrieved
    nd = next(c for c in report.comparisons if c.measure == "nDCG@10")
    assert nd.ttest.mean_delta == pytest.approx(second.mean["nDCG@10"] - first.mean["nDCG@10"])
    assert nd.ttest.p_value == pytest.approx(
        stats.ttest_rel(list(second.values("nDCG@10").values()), list(first.values("nDCG@10").values())).pvalue
    )
    text = report.table()
    assert "delta (poor.run - good.run)" in text and "paired t-test p" in text and "Wilcoxon p" in text
    assert sum(line.startswith("good.run ") for line in text.splitlines()) == 93 + 1  # per query, then the mean
    assert f"{first.mean['nDCG@10']:.4f}" in text
    assert sum(line.startswith("|---") for line in report.table(markdown=True).splitlines()) == 2
    assert json.loads(json.dumps(report.to_dict()))["runs"]["good.run"]["queries"] == 93


def test_several_runs_are_each_tested_against_the_first(tmp_path):
    """--compare took one run: comparing three systems took two commands and two tables. Each compared run's
    tests equal those of a comparison of it alone; the table and JSON say which run each test is of, and note
    that the p-values are not corrected for the number of comparisons; a run given twice is refused."""
    qrels_path = DATA / "vaswani" / "qrels"
    qrels = read_qrels(qrels_path)
    rng = random.Random(7)
    runs = {}
    for name, keep in (("base", 0.5), ("better", 0.9), ("worse", 0.2)):
        runs[name] = {q: [(d, rng.random() + (1.0 if rng.random() < keep else 0.0)) for d in docs] +
                      [(f"x{i}", rng.random()) for i in range(5)] for q, docs in qrels.items()}
        write_run(tmp_path / f"{name}.run", runs[name], name)
    base, better, worse = (tmp_path / f"{n}.run" for n in runs)
    report = evaluate_files(base, qrels_path, compare=[better, worse])
    assert report.names == ("base.run", "better.run", "worse.run")
    for i, other in ((1, better), (2, worse)):
        alone = evaluate_files(base, qrels_path, compare=other)
        assert [c for c in report.comparisons if c.run == i] == [replace(c, run=i) for c in alone.comparisons]
    text = report.table()
    assert text.index("delta (better.run - base.run)") < text.index("delta (worse.run - base.run)")
    assert text.count("paired t-test p") == text.count("Wilcoxon p") == 2
    assert "2 runs tested against base.run: p-values are not corrected" in text
    assert "not corrected" not in evaluate_files(base, qrels_path, compare=[worse]).table()
    out = report.to_dict()
    assert [(c["run"], c["against"]) for c in out["comparisons"]][::len(report.results[0].measures)] == [
        ("better.run", "base.run"), ("worse.run", "base.run")]
    nd = [c for c in out["comparisons"] if c["measure"] == "nDCG@10"]
    assert nd[0]["t-test"]["mean_delta"] > 0 > nd[1]["t-test"]["mean_delta"]
    for twice in ([better, better], [base], [tmp_path / "." / "worse.run", worse]):
        with pytest.raises(InputError, match="is given twice: a run compared with itself"):
            evaluate_files(base, qrels_path, compare=twice)


def test_evaluate_files_names_bad_input(tmp_path):
    run = tmp_path / "r.run"
    run.write_text("1 Q0 d 1 1.0 t\n1 Q0 e x 0.5 t\n")
    with pytest.raises(InputError, match=r"r\.run:2: "):
        evaluate_files(run, DATA / "vaswani" / "qrels")


def test_evaluate_files_names_the_qrels_a_rel_level_is_above(tmp_path):
    """A --rel-level above every grade was refused without naming the qrels file (the one-line error
    of every other bad input names its file)."""
    run, qrels = tmp_path / "r.run", tmp_path / "q.qrels"
    run.write_text("q1 Q0 d1 1 1.0 t\n")
    qrels.write_text("q1 0 d1 1\nq1 0 d2 3\n")
    with pytest.raises(InputError, match=r"q\.qrels: no judgement reaches grade 5 \(the highest is 3\)"):
        evaluate_files(run, qrels, rel_level=5)
    assert evaluate_files(run, qrels, rel_level=3).results[0].mean["P@10"] == 0.0


def test_evaluate_files_refuses_a_run_of_other_queries(tmp_path):
    """Qrels that judge none of a run's queries are the wrong qrels: an error, not zeros; a
    run judged for some of its queries is scored (missing ones count 0)."""
    run, other = tmp_path / "r.run", tmp_path / "other.run"
    run.write_text("q1 Q0 1 1 1.0 t\nq2 Q0 2 1 1.0 t\n")
    other.write_text("1 Q0 1 1 1.0 t\n")
    with pytest.raises(InputError, match=r"r\.run: none of its 2 queries is judged in .*qrels \(query ids such as 'q1'"):
        evaluate_files(run, DATA / "vaswani" / "qrels")
    with pytest.raises(InputError, match=r"r\.run: none of its 2 queries"):
        evaluate_files(other, DATA / "vaswani" / "qrels", compare=run)
    run.write_text("q1 Q0 1 1 1.0 t\n")
    with pytest.raises(InputError, match=r"r\.run: none of its 1 query is judged"):
        evaluate_files(run, DATA / "vaswani" / "qrels")
    assert evaluate_files(other, DATA / "vaswani" / "qrels").results[0].num_queries == 93



def test_evaluate_files_holds_only_the_judged_queries(tmp_path, monkeypatch):
    """A run of many queries of which few are judged (MS MARCO's dev runs: 6,980 of 101,093) is held, when
    it is evaluated, only for the judged ones: read whole, a run at k = 1,000 took ~120 bytes a line (30,000
    queries: 3.6 GB, session 44). Here 100 queries at k = 1,000, 2 of them judged, compared with a second run:
    the Python objects held when the measures are computed stay far below one run's 100,000 lines, and the
    report is the one of the whole runs."""
    import ckqti.evaluate as ev
    from retriever.runs import read_run
    from tests.memory import held_when_called

    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("q0 0 d3 1\nq0 0 d7 2\nq50 0 d11 1\n")
    runs = []
    for name, shift in (("a.run", 0), ("b.run", 5)):
        path = tmp_path / name
        path.write_text("".join(f"q{q} Q0 d{(d + shift) % 1000} {d + 1} {1000 - d}.5 t\n"
                                for q in range(100) for d in range(1000)))
        runs.append(path)
    held, report = held_when_called(monkeypatch, ev, "evaluate",
                                    lambda: ev.evaluate_files(runs[0], qrels, compare=runs[1]))
    assert held["python"] < 2_000_000, held  # read whole: ~12 MB a run
    whole = [evaluate(read_run(p), read_qrels(qrels)) for p in runs]
    assert [r.mean for r in report.results] == [r.mean for r in whole]
    assert [r.unjudged for r in report.results] == [r.unjudged for r in whole]
    assert len(report.results[0].unjudged) == 98 and report.results[0].num_queries == 2

def test_result_table_for_one_run():
    text = EvalResult(("P@10",), {"P@10": 0.25}, {"q": {"P@10": 0.25}}).table(name="mine")
    assert text.splitlines()[:2] == ["run   queries    P@10", "mine        1  0.2500"]


def test_import_starts_no_java_and_no_torch():
    code = (
        "import sys; import ckqti.evaluate as e; "
        "e.evaluate({'q': {'a': 1.0}}, {'q': {'a': 1}}); "
        "print([m for m in ('torch', 'jnius', 'jpype', 'pyserini') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_report_dict_is_strict_json_with_per_query_values(tmp_path):
    """A test on one query has no statistic (NaN), which JSON cannot hold: None there; per-query
    values come with the report when asked."""
    qrels = {"q1": {"d1": 1}}
    a, b = evaluate({"q1": [("d1", 1.0)]}, qrels, ["P@1"], per_query=True), evaluate({"q1": [("d2", 1.0)]}, qrels, ["P@1"])
    report = EvalReport(("a", "b"), (a, b), compare_results(a, b))
    out = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert out["comparisons"][0]["t-test"] == {"statistic": None, "p": None, "mean_delta": -1.0, "n": 1}
    assert out["per_query"] == {"a": {"q1": {"P@1": 1.0}}, "b": {"q1": {"P@1": 0.0}}} and out["measures"] == ["P@1"]
    assert "per_query" not in EvalReport(("b",), (b,)).to_dict()


def test_report_dict_names_missing_and_unjudged_queries_as_the_table_counts_them():
    """``eval --json`` dropped what the table's notes say: a judged query the run lacks is scored 0
    (trec_eval -c), which a program reading the means could not tell from a poor ranking."""
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    a = evaluate({"q1": [("d1", 1.0)], "q9": [("d1", 1.0)]}, qrels, ["P@1"])
    b = evaluate({"q1": [("d1", 1.0)], "q2": [("d2", 1.0)]}, qrels, ["P@1"])
    report = EvalReport(("a", "b"), (a, b), compare_results(a, b))
    out = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert out["missing"] == {"a": ["q2"], "b": []} and out["unjudged"] == {"a": ["q9"], "b": []}
    assert out["runs"]["a"] == {"queries": 2, "P@1": 0.5}  # q2 counted, at 0
    assert "judged queries without results (scored 0): 1" in report.table()


def test_query_ids_apart_only_in_leading_zeros_are_named():
    """Queries numbered '001' in the run and '1' in the qrels never match (as in trec_eval) and are scored 0;
    the notes only counted them among the missing and the unjudged, where they looked like other queries."""
    qrels = {"1": {"d1": 1}, "2": {"d2": 1}, "10": {"d3": 1}, "030": {"d4": 1}}
    result = evaluate({"001": [("d1", 1.0)], "002": [("d2", 1.0)], "10": [("d3", 1.0)], "30": [("d4", 1.0)],
                       "0": [("d9", 1.0)], "x1": [("d1", 1.0)]}, qrels, ["P@1"])
    assert result.missing == ("1", "2", "030") and result.mean["P@1"] == 0.25
    notes = result.table().splitlines()
    assert "run: query ids that differ from judged ones only in leading zeros (scored 0; write them alike): 3, " \
           "e.g. '001' in the run, '1' in the qrels" in notes
    assert not any("leading zeros" in n for n in evaluate({"1": [("d1", 1.0)], "7": [("d9", 1.0)]}, qrels,
                                                          ["P@1"]).table().splitlines())


def test_grades_beyond_a_million_are_refused_not_passed_to_trec_eval():
    """pytrec_eval holds grades in a C int and allocates memory for every level up to the largest:
    2**40 failed there with a SystemError, 2**31 - 1 took a minute and gigabytes; the file reader
    refuses such grades, and so does evaluate() given a dict."""
    run = {"q": {"d": 1.0}}
    assert evaluate(run, {"q": {"d": 10**6}}).mean["nDCG@10"] == 1.0
    for grade in (10**6 + 1, -(10**6) - 1, 2**31 - 1, 2**40):
        with pytest.raises(InputError, match="out of range"):
            evaluate(run, {"q": {"d": grade}})


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


def test_paired_tests_pair_mappings_by_query_and_need_two_queries():
    """Mappings listed in other orders are paired by qid (not by position), and a test on one query
    has no p-value (NaN; scipy's Wilcoxon would say 1.0)."""
    a = {"q1": 0.1, "q2": 0.5, "q3": 0.2, "q4": 0.9}
    b = {"q4": 0.7, "q3": 0.6, "q1": 0.3, "q2": 0.55}
    x, y = [a[q] for q in a], [b[q] for q in a]
    for test, reference in ((paired_ttest, stats.ttest_rel), (wilcoxon, stats.wilcoxon)):
        assert test(a, b).p_value == pytest.approx(reference(y, x).pvalue)
        one = test({"q1": 0.1}, {"q1": 0.3})
        assert math.isnan(one.statistic) and math.isnan(one.p_value) and one.mean_delta == pytest.approx(0.2)


def test_per_query_rows_put_each_querys_runs_together():
    """With runs compared, --per-query listed one run's queries, then the next run's: a query's two
    values were a run's length apart. Now by query (qrels order), then run, as trec_eval -q groups."""
    qrels = {"q2": {"d1": 1}, "q1": {"d2": 1}, "q3": {"d3": 1}}
    a = evaluate({"q1": [("d2", 1.0)], "q2": [("d1", 1.0)], "q3": [("d9", 1.0)]}, qrels, ["P@1"], per_query=True)
    b = evaluate({"q1": [("d9", 1.0)], "q2": [("d1", 1.0)], "q3": [("d3", 1.0)]}, qrels, ["P@1"], per_query=True)
    rows = [line.split() for line in EvalReport(("a", "b"), (a, b)).table().split("\n\n")[0].splitlines()[1:]]
    assert rows == [["a", "q2", "1.0000"], ["b", "q2", "1.0000"], ["a", "q1", "1.0000"], ["b", "q1", "0.0000"],
                    ["a", "q3", "0.0000"], ["b", "q3", "1.0000"]]


@pytest.mark.parametrize("run, qrels, options, message", [
    ({"q1": ["d1", "d3"]}, QRELS, {}, "run['q1']: a ranking is {docid: score} or [(docid, score), ...], found list"),
    ({"q1": 3.0}, QRELS, {}, "run['q1']: a ranking is {docid: score} or [(docid, score), ...], found float"),
    (["q1"], QRELS, {}, "run: expected a dict qid -> {docid: score}, found list"),
    (RUN, {"q1": ["d1"]}, {}, "qrels['q1']: expected a dict docid -> grade, found list"),
    (RUN, {"q1": {"d1": "2"}}, {}, "qrels['q1']['d1']: a grade is an integer, found str"),
    (RUN, ["q1"], {}, "qrels: expected a dict qid -> {docid: grade}, found list"),
    (RUN, QRELS, {"rel_level": "2"}, "rel_level must be an integer >= 1, got '2'"),
    (RUN, QRELS, {"measures": "nDCG@10"}, "measures must be a list of names, e.g. ['nDCG@10'], got a string"),
    # a numpy array's truth is ambiguous: a bare ValueError from numpy
    ({"q1": np.array(["d1", "d3"])}, QRELS, {}, "run['q1']: a ranking is {docid: score} or [(docid, score), ...], "
                                                "found ndarray"),
    # a run file with a docid twice in a query, or a query's lines in two places, is refused; in memory they merged
    ({"q1": [("d1", 2.0), ("d3", 1.0), ("d1", 0.5)]}, QRELS, {}, "run['q1']: query 'q1' retrieves doc 'd1' twice"),
    ({"q1": {7: 2.0, "7": 1.0}}, QRELS, {}, "run['q1']: query 'q1' retrieves doc '7' twice"),
    ({1: {"d1": 1.0}, "1": {"d3": 1.0}}, {"1": {"d1": 1}}, {}, "run['1']: duplicate query id '1' (first at run[1])"),
    (RUN, {1: {"d1": 1}, "1": {"d3": 1}}, {}, "qrels['1']: duplicate query id '1' (first at qrels[1])"),
    (RUN, {"q1": {7: 1, "7": 0}}, {}, "qrels['q1']: repeated judgement of query 'q1', doc '7'"),
    ({"q1": {"d1": 10 ** 400}}, QRELS, {}, "run['q1']: a score is a number (int too large to convert to float)"),
])
def test_a_run_or_qrels_of_the_wrong_shape_is_one_input_error(run, qrels, options, message):
    """Docids without scores met a ValueError from unpacking deep inside, qrels as lists an AttributeError,
    a rel_level string a TypeError; a measures string was read a letter at a time ("unknown measure 'n'").
    Docids as a numpy array met numpy's "truth value of an array ... is ambiguous"; a docid twice in a query, or a
    query id twice (1 and "1"), was merged where a run file's is refused; a score beyond a float an OverflowError."""
    with pytest.raises(InputError) as info:
        evaluate(run, qrels, **options)
    assert str(info.value) == message


def test_a_result_prints_in_a_few_lines_and_names_a_measure_it_lacks():
    """An EvalResult's repr printed every query's values (37,812 characters for SciFact's 300 test claims);
    values() of a measure not evaluated was a bare KeyError; hash() failed inside on a dict field."""
    qrels = {f"q{i}": {"d1": 1} for i in range(300)}
    run = {q: {"d1": 1.0, "d2": 0.5} for q in [*qrels, *(f"u{i}" for i in range(809))]}
    result = evaluate(run, qrels, ["nDCG@10", "RR@10"], per_query=True)
    assert repr(result) == ("EvalResult(measures=('nDCG@10', 'RR@10'), mean={'nDCG@10': 1.0, 'RR@10': 1.0}, "
                            "by_query=<300 queries>, missing=(), unjudged=('u0', 'u1', 'u2', 'u3', 'u4', ... 804 more), "
                            "rel_level=1, per_query=True, depth=2)")
    report = EvalReport(("a",), (result,))
    assert len(repr(report)) < 400
    with pytest.raises(InputError, match=r"no measure 'AP@100' in this result \(nDCG@10, RR@10\)"):
        result.values("AP@100")
    with pytest.raises(TypeError, match="unhashable type: 'EvalResult'"):
        hash(result)
