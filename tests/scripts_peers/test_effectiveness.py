"""The pure helpers behind scripts/effectiveness.py (its registry, stages and report modules): row selection, the ORCAS-style file, runs, t-test rows, targets."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from scripts.effectiveness_registry import (
    CHECKPOINTS,
    GPU_EPOCHS,
    LCE_NEGATIVES,
    NEW_WORD_ROWS,
    RERANK_DEPTH,
    ROWS,
    collections,
    ndrm_config,
    reranker_config,
    select,
)
from scripts.effectiveness_report import (
    README,
    RESULTS,
    SUMMARY_BEGIN,
    SUMMARY_END,
    cited_by_training,
    collection_table,
    compare_to_base,
    fmt_p,
    merge_rows,
    predates_new_word_rows,
    summary_table,
    target_checks,
    targets_table,
    with_summary,
)
from scripts.effectiveness_stages import orcas_file, orcas_pairs, pick_alpha, rank_scored, with_tail
from scripts.train_default import MEASURES

REPO = Path(__file__).resolve().parents[2]


def test_only_selects_rows_by_key_or_pattern_and_collections_by_name():
    everything = select(ROWS, None)
    assert len(everything) == sum(len(r.collections) for r in ROWS)
    picked = select(ROWS, "tk-rerank,cranfield")
    assert [(r.key, c) for r, c in picked] == [("tk-rerank", "cranfield")]
    ndrm3 = {(r.key, c) for r, c in select(ROWS, "ndrm3*,scifact")}
    assert ndrm3 >= {("ndrm3-full", "scifact"), ("ndrm3-orcas-full", "scifact"), ("ndrm3-rerank", "scifact"),
                     ("ndrm3d-full", "scifact"), ("ndrm3b-rerank", "scifact"), ("ndrm3f-full", "scifact")}
    assert all(k.startswith("ndrm3") and c == "scifact" for k, c in ndrm3)  # not ndrm2-*, not other collections
    dense = {(r.key, c) for r, c in select(ROWS, "ndrm3d-*,trecdl")}
    assert dense == {("ndrm3d-full", "trecdl"), ("ndrm3d-rerank", "trecdl")}
    only_vaswani = select(ROWS, "vaswani")
    assert {c for _, c in only_vaswani} == {"vaswani"} and "ndrm3-orcas-full" not in {r.key for r, _ in only_vaswani}
    with pytest.raises(SystemExit, match="no row or collection"):
        select(ROWS, "tkk-rerank")


def test_orcas_pairs_use_training_claims_only(data_dir):
    from indexer.readers import read_qrels, read_queries

    sf = data_dir / "scifact"
    train, test = read_qrels(sf / "qrels" / "train.tsv"), read_qrels(sf / "qrels" / "test.tsv")
    queries = read_queries(sf / "queries.jsonl")
    pairs = orcas_pairs(train, queries, test)
    assert len(pairs) == sum(1 for j in train.values() for g in j.values() if g > 0)
    claims = {queries[q] for q in train}
    test_only = {queries[q] for q in test} - claims  # a test claim whose text no training claim shares
    texts = {t for _, t in pairs}
    assert texts <= claims and not texts & test_only and test_only
    cited = {(d, queries[q]) for q, j in train.items() for d in j}
    assert set(pairs) <= cited
    with pytest.raises(ValueError, match="test claims"):
        orcas_pairs(train, queries, [next(iter(train))])


def test_the_orcas_file_the_row_indexes_holds_training_claims_only_even_if_one_was_left(tmp_path, data_dir):
    """The ORCAS row indexes ``orcas_file(work)``, written from the train qrels with the test qrels
    refused, but a file already in the work folder (an older run's, another split's, edited) was
    indexed as it was, unchecked: a test claim in it reached the index as a click. The file is
    rewritten whenever it is not the training pairs' (and left as it is, times too, when it is)."""
    from indexer.readers import load_orcas, read_qrels, read_queries

    sf = data_dir / "scifact"
    train, test = read_qrels(sf / "qrels" / "train.tsv"), read_qrels(sf / "qrels" / "test.tsv")
    queries = read_queries(sf / "queries.jsonl")
    path = orcas_file(tmp_path)
    want = "".join(f"{d}\t{q}\n" for d, q in orcas_pairs(train, queries, test))
    assert path.read_text(encoding="utf-8") == want
    test_only = {" ".join(queries[q].split()) for q in test} - {" ".join(queries[q].split()) for q in train}
    clicked = {q for qs in load_orcas(path).values() for q in qs}
    assert clicked and not clicked & test_only
    leaked_qid = next(q for q in test if " ".join(queries[q].split()) in test_only)
    path.write_text(want + f"{next(iter(test[leaked_qid]))}\t{queries[leaked_qid]}\n", encoding="utf-8")
    assert orcas_file(tmp_path) == path and path.read_text(encoding="utf-8") == want
    stamp = path.stat().st_mtime_ns
    assert orcas_file(tmp_path).stat().st_mtime_ns == stamp


def test_an_orcas_index_built_before_its_file_was_rewritten_is_built_again(tmp_path, monkeypatch):
    """An ORCAS row's index was kept while its manifest named the model, so an index built from a file
    :func:`orcas_file` has since rewritten (a test claim in it) was searched as it was. An ORCAS
    index older than its file is built again; one newer is kept."""
    import json
    import os

    from ckqti import api
    from scripts.effectiveness_stages import learned_index

    built = []

    def fake_index(corpus, out, model=None, orcas=None, **options):
        built.append(orcas)
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "manifest.json").write_text(json.dumps({"model": {"id": model}}))

    monkeypatch.setattr(api, "index", fake_index)
    spec = collections()["scifact"]
    index_dir = learned_index("ndrm2", spec, tmp_path, orcas=True)
    assert built == [tmp_path / "orcas-scifact-train.tsv"]
    learned_index("ndrm2", spec, tmp_path, orcas=True)
    assert len(built) == 1  # the file unchanged since: the index is kept
    manifest = index_dir / "manifest.json"
    old = manifest.stat().st_mtime_ns - 10**9
    os.utime(manifest, ns=(old, old))
    (tmp_path / "orcas-scifact-train.tsv").write_text("31715818\tleaked test claim\n")
    learned_index("ndrm2", spec, tmp_path, orcas=True)
    assert len(built) == 2


def test_orcas_pairs_skip_unjudged_grades_and_flatten_whitespace():
    pairs = orcas_pairs({"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}, {"q1": "a\tclaim\n here", "q2": ""}, ["q9"])
    assert pairs == [("d1", "a claim here")]


def test_rank_scored_and_tail_keep_their_order_through_trec_order():
    from retriever.runs import trec_order

    ranked = {"q": ["b", "a", "c", "e", "d"]}
    run = rank_scored(ranked, 4)
    assert [d for d, _ in trec_order(run["q"])] == ["b", "a", "c", "e"]
    reranked = {"q": [("c", 0.5), ("a", 0.5)]}  # the model's order of the reranked head, tied scores
    merged = with_tail(reranked, ranked, 4)
    assert [d for d, _ in trec_order(merged["q"])] == ["c", "a", "b", "e"]
    assert with_tail({}, {"q2": ["x", "y"]}, 4)["q2"] == [("x", 4.0), ("y", 3.0)]


def test_compare_to_base_gives_paired_deltas_and_p_values():
    from ckqti.evaluate import evaluate

    qrels = {"1": {"a": 1}, "2": {"b": 1}, "3": {"c": 1}}
    base = {"1": {"a": 2.0, "x": 1.0}, "2": {"y": 2.0, "b": 1.0}, "3": {"z": 2.0, "c": 1.0}}
    better = {"1": {"a": 2.0, "x": 1.0}, "2": {"b": 2.0, "y": 1.0}, "3": {"c": 2.0, "z": 1.0}}
    results = {name: evaluate(run, qrels, MEASURES) for name, run in {"bm25": base, "m": better}.items()}
    rows = compare_to_base(results, "bm25")
    assert "ttest_vs_bm25" not in rows["bm25"] and rows["m"]["queries"] == 3
    rr = rows["m"]["ttest_vs_bm25"]["RR@10"]
    assert rr["delta"] == pytest.approx((0.5 + 0.5) / 3)
    assert rows["m"]["ttest_vs_bm25"]["NCG@100"] == {"delta": 0.0, "p": 1.0}
    table = collection_table({k: {**v, "label": k} for k, v in rows.items()})
    assert "| m " in table and "+0." in table


def test_targets_are_met_not_met_or_not_run():
    def row(delta, p):
        return {"ttest_vs_bm25": {"nDCG@10": {"delta": delta, "p": p}}}

    report = {"scifact": {"bm25": {}, "ndrm3-full": row(0.031, 0.01), "tkl-rerank": row(0.029, 0.001)},
              "vaswani": {"bm25": {}, "ndrm3-full": row(-0.02, 0.3), "ndrm3-rerank": row(-0.009, 0.5)}}
    checks = {c["target"]: c["met"] for c in target_checks(report)}
    assert checks["NDRM3 fullrank >= BM25 + 0.03 nDCG@10 on SciFact test, significant (p < 0.05)"] is True
    assert checks["TKL rerank >= BM25 + 0.03 nDCG@10 on SciFact test"] is False
    assert checks["IDCM rerank >= BM25 + 0.03 nDCG@10 on SciFact test"] is None
    assert checks["ndrm3-full zero-shot on vaswani: nDCG@10 >= BM25 - 0.01"] is False
    assert checks["ndrm3-rerank zero-shot on vaswani: nDCG@10 >= BM25 - 0.01"] is True
    report["scifact"]["ndrm3-full"] = row(0.05, 0.2)  # large but not significant
    assert target_checks(report)[0]["met"] is False
    zero_shot = [c["target"] for c in target_checks(report) if "zero-shot" in c["target"]]
    assert zero_shot and not [t for t in zero_shot if "on scifact" in t]  # SciFact trains the models: no such target


def test_cited_by_training_counts_test_queries_sharing_a_relevant_document():
    train = {"t1": {"a": 1, "b": 0}, "t2": {"c": 2}}
    test = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"d": 1, "c": 1}, "q4": {"c": 0}}
    assert cited_by_training(train, test) == (2, 4)  # b is judged 0 by t1; q4's c is not relevant


@pytest.fixture
def report_without_data(tmp_path, monkeypatch):
    """scripts/effectiveness_report.py writing copies of its JSON, markdown and README in ``tmp_path``,
    with ``../shared/data`` missing (as in a clone outside /work)."""
    import scripts.effectiveness_report as report

    for name in ("RESULTS", "DOC", "README"):
        copy = tmp_path / getattr(report, name).name
        copy.write_text(getattr(report, name).read_text())
        monkeypatch.setattr(report, name, copy)
    monkeypatch.setattr(report, "collections", lambda: collections(tmp_path / "no-data"))
    return report


def test_render_takes_the_cited_counts_from_the_json_and_reads_no_data(tmp_path, report_without_data):
    import json

    hit, total = json.loads(RESULTS.read_text())["scifact_cited"]
    report_without_data.render_from_results(tmp_path)
    assert f"{hit} of the {total} test claims have a relevant abstract" in report_without_data.DOC.read_text()


def test_render_of_a_json_without_the_counts_names_the_missing_qrels_and_writes_nothing(tmp_path, report_without_data):
    import json

    from ckqti.errors import InputError

    old = json.loads(report_without_data.RESULTS.read_text())
    del old["scifact_cited"]
    report_without_data.RESULTS.write_text(json.dumps(old))
    before = {f: f.read_text() for f in (report_without_data.RESULTS, report_without_data.DOC)}
    with pytest.raises(InputError, match="no-data/scifact/qrels/train.tsv: no such file"):
        report_without_data.render_from_results(tmp_path)
    assert {f: f.read_text() for f in before} == before


def test_fresh_rows_replace_committed_ones_and_the_rest_are_kept_in_row_order():
    previous = {"scifact": {"bm25": {"v": 0}, "ndrm3-full": {"v": 1}, "idcm-rerank": {"v": 2}}, "cranfield": {"bm25": {"v": 3}}}
    fresh = {"scifact": {"idcm-rerank": {"v": 9}, "bm25": {"v": 0}}}
    merged = merge_rows(previous, fresh)
    assert merged["scifact"]["idcm-rerank"] == {"v": 9} and merged["scifact"]["ndrm3-full"] == {"v": 1}
    assert merged["cranfield"] == {"bm25": {"v": 3}}
    order = [r.key for r in ROWS]
    keys = list(merged["scifact"])
    assert keys == sorted(keys, key=order.index)


def test_gpu_budget_checkpoints_keep_the_cpu_settings_and_raise_the_budget():
    cpu, gpu, lce = reranker_config("tkl"), reranker_config("tkl-gpu"), reranker_config("tkl-gpu-lce")
    assert (gpu.kind, gpu.embeddings, gpu.lr_encoder, gpu.batch_size) == (cpu.kind, cpu.embeddings, cpu.lr_encoder,
                                                                         cpu.batch_size)
    assert gpu.epochs == GPU_EPOCHS > cpu.epochs and gpu.dev_depth == RERANK_DEPTH
    assert (lce.loss, lce.negatives) == ("lce", LCE_NEGATIVES) and lce.epochs == gpu.epochs
    idcm = reranker_config("idcm-gpu-lce")
    assert (idcm.kind, idcm.loss, idcm.batch_size, idcm.max_dev_queries) == ("idcm", "lce", 8, None)
    assert reranker_config("idcm").loss == reranker_config("idcm-gpu").loss == "margin"
    for row in ROWS:  # every row names a checkpoint the script knows how to make
        assert row.mode == "bm25" or row.model in CHECKPOINTS


def test_gpu_rows_have_their_own_targets():
    def row(delta, p):
        return {"ttest_vs_bm25": {"nDCG@10": {"delta": delta, "p": p}}}

    report = {"scifact": {"bm25": {}, "idcm-rerank": row(-0.05, 0.01), "idcm-gpu-lce-rerank": row(0.06, 0.005)}}
    checks = {c["target"]: c["met"] for c in target_checks(report)}
    assert checks["IDCM rerank >= BM25 + 0.03 nDCG@10 on SciFact test"] is False
    assert checks["IDCM (GPU budget, listwise) rerank >= BM25 + 0.03 nDCG@10 on SciFact test"] is True
    assert checks["TKL (GPU budget) rerank >= BM25 + 0.03 nDCG@10 on SciFact test"] is None


def test_only_the_bundled_ndrm3_is_gated():
    """NDRM1, the trained NDRM2, the dense rows and every experiment's base keep the paper's dense latent channel."""
    assert dict(ndrm_config("ndrm3").model_options) == {"latent_gate": 0.6}
    for key in ("ndrm1", "ndrm2", "ndrm3-dense"):
        config = ndrm_config(key)
        assert dict(config.model_options) == {} and config.model == key.removesuffix("-dense")


def test_zero_shot_rows_made_before_the_new_word_rows_fix_are_marked():
    fixed = {"meta": {"new_word_rows": NEW_WORD_ROWS}}
    old = {"meta": {"checkpoint": "tk-1"}}
    for key in ("tk-rerank", "tkl-idf-rerank", "ndrm3-full", "ndrm1-rerank", "ndrm3d-full"):
        assert predates_new_word_rows(key, old) and not predates_new_word_rows(key, fixed)
    for key in ("bm25", "ndrm2-full", "ndrm2t-rerank", "idcm-rerank", "idcm-gpu-lce-rerank"):  # no term embeddings
        assert not predates_new_word_rows(key, old)
    row = {"label": "TK rerank", "mean": {m: 0.5 for m in MEASURES}}
    assert "TK rerank †" in collection_table({"tk-rerank": {**row, **old}}, zero_shot=True)
    assert "†" not in collection_table({"tk-rerank": {**row, **old}}, zero_shot=False)
    assert "†" not in collection_table({"tk-rerank": {**row, **fixed}}, zero_shot=True)


def _run(label, ndcg, delta=None, p=None, marked=True):
    entry = {"label": label, "mean": {"nDCG@10": ndcg}, "meta": {"new_word_rows": NEW_WORD_ROWS} if marked else {}}
    if delta is not None:
        entry["ttest_vs_bm25"] = {"nDCG@10": {"delta": delta, "p": p}}
    return entry


def test_summary_table_gives_bm25_as_is_and_every_other_run_against_it():
    report = {
        "scifact": {"bm25": _run("BM25", 0.6789), "x": _run("Model X", 0.7116, 0.0327, 0.0009),
                    "y": _run("Model Y", 0.6816, 0.0027, 0.75)},
        "trecdl": {"bm25": _run("BM25", 0.732), "y": _run("Model Y", 0.70, -0.032, 0.01, marked=False)},
    }
    lines = summary_table(report, ("bm25", "x", "y", "never-run")).splitlines()
    assert "SciFact test" in lines[0] and "TREC DL" in lines[0] and len(lines) == 5  # header, rule, three runs
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert cells[0] == ["BM25", "0.679", "0.732"]
    assert cells[1] == ["Model X", "0.712 (+0.033*)", "-"]  # significant; not run zero-shot
    assert cells[2] == ["Model Y", "0.682 (+0.003)", "0.700 (-0.032*) †"]  # a zero-shot run before the new-word fix


def test_with_summary_replaces_only_the_marked_block():
    text = f"intro\n{SUMMARY_BEGIN}\nold table\n{SUMMARY_END}\nrest\n"
    assert with_summary(text, "| new |\n") == f"intro\n{SUMMARY_BEGIN}\n| new |\n{SUMMARY_END}\nrest\n"
    assert with_summary("no block here\n", "| new |") == "no block here\n"


def test_readme_shows_the_summary_of_the_committed_results():
    import json

    readme = README.read_text()
    assert SUMMARY_BEGIN in readme and SUMMARY_END in readme
    table = summary_table(json.loads(RESULTS.read_text())["collections"])
    assert with_summary(readme, table) == readme, "README's table is stale: run scripts/effectiveness.py --only bm25,scifact"


def test_teacher_inputs_take_judged_claims_with_candidates_and_each_titles_top_n(tmp_path):
    """scripts/teacher_scores.py's queries and candidates, from effectiveness.py's BM25 caches (no Java)."""
    import json

    from indexer.readers import read_qrels

    spec = importlib.util.spec_from_file_location("ckqti_teacher_scores_script", REPO / "scripts" / "teacher_scores.py")
    ts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ts)
    claims = sorted(read_qrels(collections()["scifact"].corpus.parent / "qrels" / "train.tsv"))[:3]
    (tmp_path / "bm25").mkdir()
    (tmp_path / "bm25" / "scifact-train-top100.json").write_text(
        json.dumps({claims[0]: ["4983", "5836"], claims[1]: [], "not-judged": ["4983"]}))
    (tmp_path / "bm25" / "scifact-titles-top100.json").write_text(
        json.dumps({"title:4983": ["4983", "5836", "7912", "18670"]}))
    queries, cands = ts.teacher_inputs(tmp_path, 0)
    assert list(queries) == [claims[0]] and cands == {claims[0]: ["4983", "5836"]}  # judged, with candidates
    queries, cands = ts.teacher_inputs(tmp_path, 2)
    assert cands["title:4983"] == ["4983", "5836"] and queries["title:4983"]  # each title's top 2
    assert len([q for q in queries if q.startswith("title:")]) > 5000  # every titled abstract is a pseudo-query


def test_wise_alpha_is_the_smallest_within_tolerance_of_the_bundled_vectors():
    assert pick_alpha({0.0: 0.70, 0.25: 0.795, 0.5: 0.80, 0.75: 0.81, 1.0: 0.803}) == 0.25
    assert pick_alpha({0.0: 0.70, 0.25: 0.79, 0.5: 0.794, 1.0: 0.803}, tolerance=0.01) == 0.5
    assert pick_alpha({0.0: 0.90, 1.0: 0.803}) == 0.0
    assert pick_alpha({0.0: 0.5, 0.5: 0.6, 1.0: 0.803}) == 1.0


def test_targets_and_significance_marks_at_their_bounds():
    """+0.03 exactly meets a +0.03 target, -0.01 exactly a -0.01 floor; p 0.05 is not below 0.05."""
    def row(delta, p):
        return {"ttest_vs_bm25": {"nDCG@10": {"delta": delta, "p": p}}}

    report = {"scifact": {"bm25": {}, "ndrm3-full": row(0.03, 0.01), "tkl-rerank": row(0.03, 0.5)},
              "vaswani": {"bm25": {}, "ndrm3-full": row(-0.01, 0.3)}}
    checks = {c["target"]: c["met"] for c in target_checks(report)}
    assert checks["NDRM3 fullrank >= BM25 + 0.03 nDCG@10 on SciFact test, significant (p < 0.05)"] is True
    assert checks["TKL rerank >= BM25 + 0.03 nDCG@10 on SciFact test"] is True
    assert checks["ndrm3-full zero-shot on vaswani: nDCG@10 >= BM25 - 0.01"] is True
    report["scifact"]["ndrm3-full"] = row(0.04, 0.05)
    assert target_checks(report)[0]["met"] is False
    table = summary_table({"scifact": {"bm25": _run("BM25", 0.6), "x": _run("Model X", 0.64, 0.04, 0.05)}}, ("bm25", "x"))
    assert "0.640 (+0.040)" in table and "*" not in table


def test_p_values_keep_their_magnitude():
    assert fmt_p(3.2e-6) == "3.2e-06" and fmt_p(0.01234) == "0.0123" and fmt_p(None) == "-" and fmt_p(float("nan")) == "-"
    assert fmt_p(1e-4) == "0.0001" and fmt_p(9.9e-5) == "9.9e-05"  # four decimals down to 1e-4, then exponents


def table_cells(table: str) -> list[dict[str, str]]:
    """A markdown table's rows as ``header -> cell``."""
    header, _, *rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table.splitlines()]
    return [dict(zip(header, row)) for row in rows]


def test_collection_table_puts_each_number_under_its_own_header():
    """Each measure's mean, the delta, the p value and the run's whole time (index build included) in their
    columns: the table's cells swapped between two headers still held every number."""
    mean = dict(zip(MEASURES, (0.71, 0.62, 0.53, 0.94)))
    rows = {"bm25": {"label": "BM25", "mean": {m: 0.5 for m in MEASURES}, "meta": {"seconds": 3.0}},
            "m": {"label": "M", "mean": mean, "ttest_vs_bm25": {"nDCG@10": {"delta": 0.0321, "p": 0.0456}},
                  "meta": {"seconds": 7.0, "total_seconds": 20.0}}}
    base, m = table_cells(collection_table(rows))
    assert {k: m[k] for k in MEASURES} == {k: f"{v:.4f}" for k, v in mean.items()}
    assert (m["Δ nDCG@10"], m["p (t-test)"], m["time (s)"]) == ("+0.0321", "0.0456", "20")
    assert (base["Δ nDCG@10"], base["p (t-test)"], base["time (s)"]) == ("", "", "3")


def test_targets_table_puts_the_delta_and_p_under_their_headers():
    checks = [{"target": "t", "issue": 3, "delta": -0.0123, "p": 0.0456, "met": False},
              {"target": "u", "issue": 4, "delta": None, "p": None, "met": None}]
    ran, missing = table_cells(targets_table(checks))
    assert (ran["Δ nDCG@10"], ran["p"], ran["verdict"]) == ("-0.0123", "0.0456", "not met")
    assert (missing["Δ nDCG@10"], missing["p"], missing["verdict"]) == ("-", "-", "not run")


def test_pick_alpha_takes_the_smallest_alpha_within_the_tolerance_inclusive():
    assert pick_alpha({0.0: 0.25, 0.5: 0.5, 1.0: 0.75}, tolerance=0.25) == 0.5


def test_the_qti_check_passes_the_model_and_catches_other_scores():
    """check_qti_rerank (recorded with every NDRM rerank row) passes a rerank whose shortcut (each document
    encoded once for all its queries) scores as the model's forward, and refuses scores the model did not give."""
    import torch

    from ckqti.models.inputs import TermText, collection_vocabulary
    from ckqti.models.ndrm import NDRMConfig, build_ndrm
    from ckqti.models.reranker import Reranker
    from ckqti.text import Analyzer
    from retriever.rerank_scoring import rerank_candidates
    from scripts.effectiveness_stages import check_qti_rerank

    texts = {"a": "protein binding in the cell membrane", "b": "gene expression of a protein", "c": "cell cycle arrest",
             "d": "membrane protein protein folding", "e": "unrelated words only here"}
    analyzer = Analyzer()
    vocab = collection_vocabulary(texts.values(), analyzer)
    torch.manual_seed(0)
    model = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant="ndrm3", dim=16, num_heads=4, conv_window=5, ff_dim=16,
                                  mlp_hidden=16, num_layers=1), vocab).eval()
    rr = Reranker("ndrm3", model, TermText(analyzer, vocab), "ndrm3", 20, 4000, torch.device("cpu"))
    queries = {"q1": "protein membrane", "q2": "cell gene"}
    cands = {"q1": ["e", "a", "b", "d"], "q2": ["c", "a", "b"]}
    run = rerank_candidates(rr, queries, cands, texts, batch_size=2)
    for q, ranked in run.items():
        direct = rr.score_rows(rr.query_ids(queries[q]), [rr.doc_rows([texts[d]])[0][0] for d, _ in ranked])
        np.testing.assert_allclose([s for _, s in ranked], direct, rtol=1e-4, atol=1e-5)
    assert check_qti_rerank(rr, queries, cands, texts, run) <= 1e-3
    off = {q: [(d, s * 1.01 + 0.01) for d, s in ranked] for q, ranked in run.items()}
    with pytest.raises(RuntimeError, match="differs from the model's forward"):
        check_qti_rerank(rr, queries, cands, texts, off)
    last_off = {q: [*ranked[:-1], (ranked[-1][0], ranked[-1][1] * 1.01 + 0.01)] for q, ranked in run.items()}
    with pytest.raises(RuntimeError, match="differs from the model's forward"):  # each query's last is checked too
        check_qti_rerank(rr, queries, cands, texts, last_off)


def test_a_cache_folder_outside_the_repository_is_recorded_relative(tmp_path, data_dir):
    # --work /tmp/...: the report's run paths were Path.relative_to(ROOT), a ValueError traceback
    # after every run was made
    import os

    from scripts.effectiveness_report import evaluate_collection
    from scripts.effectiveness_stages import run_path

    spec = collections()["cranfield"]
    for key in ("bm25", "ndrm2-full"):
        path = run_path(key, "cranfield", tmp_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("1 Q0 184 1 2.0 x\n1 Q0 29 2 1.0 x\n")
    rows = evaluate_collection(spec, tmp_path)
    assert {k: r["run"] for k, r in rows.items()} == {
        k: os.path.relpath(run_path(k, "cranfield", tmp_path), REPO) for k in ("bm25", "ndrm2-full")}
