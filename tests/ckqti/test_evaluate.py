"""evaluate() and reports: query handling, input checks, evaluate_files, EvalResult and EvalReport tables and JSON."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from ckqti.errors import InputError
from ckqti.evaluate import EvalReport, EvalResult, evaluate, evaluate_files
from ckqti.measures import DEFAULT_MEASURES
from ckqti.significance import compare_results
from indexer.readers import read_qrels
from retriever.run_writer import write_run
from retriever.runs import trec_order
from tests.ckqti.eval_data import DATA, QRELS, ROOT, RUN


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


def test_run_as_ranked_lists():
    as_lists = {q: sorted(docs.items()) for q, docs in RUN.items()}
    assert evaluate(as_lists, QRELS).mean == evaluate(RUN, QRELS).mean


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
    from retriever.run_reader import read_run
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
    # ids are strings or integers, as rerank's candidates and corpus in memory take them: 1.0 was read as '1.0' (never
    # the qrels' '1'), None as 'None', True as 'True'
    ({"q1": {1.0: 2.0}}, QRELS, {}, "run['q1']: a docid must be a string or an integer, found float 1.0"),
    ({"q1": [("d1", 2.0), (True, 1.0)]}, QRELS, {}, "run['q1']: a docid must be a string or an integer, found bool True"),
    ({None: {"d1": 2.0}}, QRELS, {}, "run[None]: a query id must be a string or an integer, found NoneType None"),
    (RUN, {"q1": {1.0: 1}}, {}, "qrels['q1']: a docid must be a string or an integer, found float 1.0"),
    (RUN, {1.0: {"d1": 1}}, {}, "qrels[1.0]: a query id must be a string or an integer, found float 1.0"),
])
def test_a_run_or_qrels_of_the_wrong_shape_is_one_input_error(run, qrels, options, message):
    """Docids without scores met a ValueError from unpacking deep inside, qrels as lists an AttributeError,
    a rel_level string a TypeError; a measures string was read a letter at a time ("unknown measure 'n'").
    Docids as a numpy array met numpy's "truth value of an array ... is ambiguous"; a docid twice in a query, or a
    query id twice (1 and "1"), was merged where a run file's is refused; a score beyond a float an OverflowError."""
    with pytest.raises(InputError) as info:
        evaluate(run, qrels, **options)
    assert str(info.value) == message


def test_integer_ids_in_memory_are_their_digits():
    """Integer query ids and docids, Python's or numpy's, evaluate as the same ids written as strings."""
    as_text = evaluate({"1": {"7": 2.0, "8": 1.0}, "2": [("9", 1.0)]}, {"1": {"8": 1}, "2": {"9": 2}})
    as_ints = evaluate({1: {7: 2.0, np.int64(8): 1.0}, np.int64(2): [(9, 1.0)]}, {np.int64(1): {8: 1}, 2: {np.int32(9): 2}})
    assert as_ints.by_query == as_text.by_query and as_text.mean["RR@10"] == 0.75


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
