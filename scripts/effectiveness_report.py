"""How ``scripts/effectiveness.py`` reports: evaluation of the runs against BM25, the issues'
targets, the tables, ``docs/EFFECTIVENESS.md``, ``docs/results/effectiveness.json`` and the
README's summary block."""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from scripts.args import shown
from scripts.effectiveness_registry import (
    ALL,
    CHECKPOINTS,
    EXPERIMENTS,
    FIRST_STAGE_DEPTH,
    IDCM_DEPTH,
    IDCM_STAGES,
    NEW_WORD_ROWS,
    RERANK_DEPTH,
    ROOT,
    ROWS,
    SUMMARY_ROWS,
    WORK,
    CollectionSpec,
    Row,
    collections,
)
from scripts.effectiveness_stages import checkpoint_path, judged_queries, read_meta, run_path
from scripts.train_default import MEASURES

DOC = ROOT / "docs" / "EFFECTIVENESS.md"
RESULTS = ROOT / "docs" / "results" / "effectiveness.json"
COMMAND = "nice -n 10 python3 scripts/effectiveness.py"
README = ROOT / "README.md"
#: The README's copy of :func:`summary_table` sits between these two lines; every report rewrites it.
SUMMARY_BEGIN = "<!-- effectiveness summary: written by scripts/effectiveness.py, do not edit -->"
SUMMARY_END = "<!-- end of effectiveness summary -->"
SUMMARY_COLUMNS = {"scifact": "SciFact test", "trecdl": "TREC DL 2019 subset", "cranfield": "Cranfield",
                   "vaswani": "Vaswani"}
DAGGER_NOTE = (
    "† run before session 16's fix of new words' embedding rows (their checkpoints are no longer at hand to "
    "rerun): words the model never saw got rows predicted from their WordPiece composition without "
    "rescaling, about 10x shorter than trained rows for TK and TKL (0.65x for the bundled NDRM3), so such a "
    "word's exact match was lost to the Transformer's context vector. TKL (title pseudo-queries) rerun after "
    "the fix: TREC DL 0.507 -> 0.677; NDRM3 moved by at most 0.003."
)


def compare_to_base(results: Mapping, base: str, measures: Sequence[str] = MEASURES) -> dict[str, dict]:
    """Per run: means, judged queries and the paired t-test against ``base`` on every measure.

    ``results`` maps run names to :class:`ckqti.evaluate.EvalResult` (the base included).
    """
    from ckqti.significance import paired_ttest

    ref = results[base]
    out = {}
    for name, res in results.items():
        row: dict = {"mean": dict(res.mean), "queries": res.num_queries, "missing": len(res.missing)}
        if name != base:
            tests = {m: paired_ttest(ref.values(m), res.values(m)) for m in measures}
            row["ttest_vs_bm25"] = {m: {"delta": t.mean_delta, "p": t.p_value} for m, t in tests.items()}
        out[name] = row
    return out


def target_checks(report: Mapping[str, Mapping[str, dict]]) -> list[dict]:
    """The issues' targets against a report ``collection -> row key -> compare_to_base row``.

    A target whose run is missing is ``None`` (not run), never met.
    """

    def delta(coll: str, key: str) -> tuple[float | None, float | None]:
        row = report.get(coll, {}).get(key)
        if row is None or "ttest_vs_bm25" not in row:
            return None, None
        t = row["ttest_vs_bm25"]["nDCG@10"]
        return t["delta"], t["p"]

    def display(row: Row) -> str:  # "NDRM3, frozen MiniLM word vectors" -> "NDRM3 (frozen MiniLM word vectors)"
        head, _, rest = CHECKPOINTS[row.model][0].partition(", ")
        rest = ", ".join(x for x in (rest, "latent channel re-weighted for the collection" if row.adapted else "") if x)
        return f"{head} ({rest})" if rest else head

    checks = []
    for row in [r for r in ROWS if r.mode == "fullrank" and r.model.startswith("ndrm3") and not r.orcas]:
        key = row.key
        d, p = delta("scifact", key)
        checks.append({"target": f"{display(row)} fullrank >= BM25 + 0.03 nDCG@10 on SciFact test, significant "
                                 "(p < 0.05)", "issue": 3, "delta": d, "p": p,
                       "met": None if d is None else bool(d >= 0.03 and p < 0.05)})
    for row in [r for r in ROWS if r.mode == "rerank" and r.model.split("-")[0] in ("tkl", "idcm")]:
        d, p = delta("scifact", row.key)  # labelled as its checkpoint is: "TKL (idf term weights, whole windows)"
        checks.append({"target": f"{CHECKPOINTS[row.model][0]} rerank >= BM25 + 0.03 nDCG@10 on SciFact test",
                       "issue": 4, "delta": d, "p": p, "met": None if d is None else bool(d >= 0.03)})
    for coll in ALL[1:]:
        for key in [r.key for r in ROWS if r.model.startswith("ndrm") and r.mode != "bm25" and coll in r.collections]:
            d, p = delta(coll, key)
            checks.append({"target": f"{key} zero-shot on {coll}: nDCG@10 >= BM25 - 0.01", "issue": 3,
                           "delta": d, "p": p, "met": None if d is None else bool(d >= -0.01)})
    return checks


# -- experiments towards the NDRM3 target -------------------------------------------------------


def experiment_records(work: Path, committed: Mapping | None = None) -> dict:
    """``name -> record`` of the experiments finished in ``work``, else as committed in the JSON."""
    out = dict((committed or {}).get("experiments") or {})
    if (committed or {}).get("experiment") and "titles" not in out:  # the JSON's format before named experiments
        out["titles"] = committed["experiment"]
    for name, exp in EXPERIMENTS.items():
        side = checkpoint_path(exp.key, work).with_suffix(".json")
        if side.is_file():
            out[name] = json.loads(side.read_text())
    return {name: out[name] for name in EXPERIMENTS if name in out}


def experiment_section(records: Mapping[str, Mapping]) -> list[str]:
    if not records:
        return []
    lines = ["## Experiments towards the NDRM3 target", "",
             "Each trains NDRM3 once with a few settings changed from the dense NDRM3's (the bundled model's "
             "settings in sessions 4-9, rows `ndrm3d-*`), on the same data; dev nDCG@10 is over the 81 claims carved from SciFact "
             "train (BM25 top-30 reranked). Only a model whose dev beats the base's (the dense model when it ran; before "
             "session 4, the skip-gram model then bundled) reranks SciFact test; the bundled checkpoint is never replaced "
             "here. The `minilm` settings became the bundled model's in session 4, the `gate-0.6` settings in session 10, "
             "chosen by dev claims retrieved through the learned index (`scripts/train_default.py`).",
             ""]
    for name, record in records.items():
        exp = EXPERIMENTS[name]
        dev = ", ".join(f"{h['dev_ndcg10']:.4f}" for h in record["history"])
        base = ", ".join(f"{h['dev_ndcg10']:.4f}" for h in record["bundled_history"])
        lines += [f"### `{name}`: `{json.dumps(record['settings'])}`", "",
                  f"{exp.what[0].upper()}{exp.what[1:]}. Dev nDCG@10 per epoch: {dev} (best {record['dev_ndcg10']:.4f} "
                  f"at epoch {record['best_epoch']}, {record['seconds'] / 60:.0f} min) against the base's {base} "
                  f"(best {record['bundled_dev_ndcg10']:.4f}).", ""]
        test = record.get("test")
        if test is None:
            lines += ["Dev did not improve, so the model was not evaluated on test.", ""]
        else:
            t = test["ttest_vs_bm25"]["nDCG@10"]
            lines += [f"Dev improved, so it reranked SciFact test's BM25 top-100: nDCG@10 {test['mean']['nDCG@10']:.4f} "
                      f"(Δ {t['delta']:+.4f} against BM25, p {fmt_p(t['p'])}; `{checkpoint_path(exp.key, WORK).relative_to(ROOT)}`).",
                      ""]
    return lines


# -- stage 5: evaluation and report --------------------------------------------------------------


def evaluate_runs(spec: CollectionSpec, paths: Mapping[str, Path]) -> dict:
    """``key -> EvalResult`` of run files on the collection's judged queries."""
    from ckqti.evaluate import evaluate
    from retriever.run_reader import read_run

    _, qrels = judged_queries(spec)
    return {k: evaluate(read_run(p), qrels, MEASURES, rel_level=spec.rel_level) for k, p in paths.items()}


def evaluate_collection(spec: CollectionSpec, work: Path) -> dict[str, dict]:
    """Every existing run of the collection against BM25: ``row key -> compare_to_base row`` (+ label, meta)."""
    rows = [r for r in ROWS if spec.name in r.collections and run_path(r.key, spec.name, work).is_file()]
    labels = {r.key: r.label for r in rows}
    if "bm25" not in labels:
        return {}
    results = evaluate_runs(spec, {r.key: run_path(r.key, spec.name, work) for r in rows})
    out = compare_to_base(results, "bm25")
    for key, entry in out.items():
        entry.update(label=labels[key], run=shown(run_path(key, spec.name, work)),
                     meta=read_meta(run_path(key, spec.name, work)))
    return out


def fmt_p(p: float | None) -> str:
    if p is None or p != p:
        return "-"
    return f"{p:.1e}" if p < 1e-4 else f"{p:.4f}"


def predates_new_word_rows(key: str, entry: Mapping) -> bool:
    """Whether a zero-shot run of a model reading term embeddings (TK, TKL, NDRM1/3) was made before
    session 16's fix of new words' embedding rows (:data:`NEW_WORD_ROWS`; its meta lacks the mark)."""
    model = next((r.model for r in ROWS if r.key == key), "")
    reads_embeddings = model != "bm25" and not model.startswith(("ndrm2", "idcm"))
    return reads_embeddings and entry.get("meta", {}).get("new_word_rows") != NEW_WORD_ROWS


def collection_table(rows: Mapping[str, dict], zero_shot: bool = False) -> str:
    """Markdown: one line per run, the four means, nDCG@10's delta and t-test p against BM25, and the
    run's time (fullrank: index build included; rerank: model loading and scoring). On a zero-shot
    collection, runs made before the fix of new words' rows are marked with a dagger."""
    from ckqti.tables import format_table

    header = ["run", *MEASURES, "Δ nDCG@10", "p (t-test)", "time (s)"]
    lines = []
    for key, entry in rows.items():
        test = entry.get("ttest_vs_bm25", {}).get("nDCG@10")
        tail = [f"{test['delta']:+.4f}", fmt_p(test["p"])] if test else ["", ""]
        meta = entry.get("meta", {})
        seconds = meta.get("total_seconds", meta.get("seconds"))
        tail.append("-" if seconds is None else f"{seconds:.0f}")
        label = entry["label"] + (" †" if zero_shot and predates_new_word_rows(key, entry) else "")
        lines.append([label, *(f"{entry['mean'][m]:.4f}" for m in MEASURES), *tail])
    return format_table(header, lines, markdown=True)


def summary_table(report: Mapping[str, Mapping[str, dict]], keys: Sequence[str] = SUMMARY_ROWS) -> str:
    """Markdown: nDCG@10 of the runs ``keys`` on every collection of ``report``, BM25's as it is and
    every other run's with its difference from BM25 (``*``: paired t-test p < 0.05); ``-`` where the
    run was not made; zero-shot runs made before the fix of new words' rows carry a dagger."""
    from ckqti.tables import format_table

    specs = collections()
    lines = []
    for key in keys:
        found = [report[c][key] for c in report if key in report[c]]
        if not found:
            continue
        cells = []
        for c in report:
            entry = report[c].get(key)
            if entry is None:
                cells.append("-")
                continue
            cell = f"{entry['mean']['nDCG@10']:.3f}"
            test = entry.get("ttest_vs_bm25", {}).get("nDCG@10")
            if test:
                star = "*" if test["p"] is not None and test["p"] < 0.05 else ""
                cell += f" ({test['delta']:+.3f}{star})"
            cells.append(cell + (" †" if specs[c].zero_shot and predates_new_word_rows(key, entry) else ""))
        lines.append([found[0]["label"], *cells])
    return format_table(["run (nDCG@10, Δ against BM25)", *(SUMMARY_COLUMNS[c] for c in report)], lines, markdown=True)


def with_summary(text: str, table: str) -> str:
    """``text`` (the README) with the block between :data:`SUMMARY_BEGIN` and :data:`SUMMARY_END`
    replaced by ``table``; unchanged when it has no such block."""
    head, begin, rest = text.partition(SUMMARY_BEGIN + "\n")
    _, end, tail = rest.partition(SUMMARY_END)
    if not begin or not end:
        return text
    return head + begin + table.rstrip("\n") + "\n" + end + tail


def targets_table(checks: Sequence[dict]) -> str:
    from ckqti.tables import format_table

    def verdict(met: bool | None) -> str:
        return "not run" if met is None else ("**met**" if met else "not met")

    lines = [[c["target"], str(c["issue"]), "-" if c["delta"] is None else f"{c['delta']:+.4f}", fmt_p(c["p"]),
              verdict(c["met"])] for c in checks]
    return format_table(["target", "issue", "Δ nDCG@10", "p", "verdict"], lines, markdown=True)


def budgets_table(budgets: Mapping[str, dict]) -> str:
    from ckqti.tables import format_table

    lines = []
    for key, rec in budgets.items():
        cfg = rec.get("config")
        seconds = rec.get("seconds")
        lines.append([CHECKPOINTS[key][0], rec.get("model_id", key), CHECKPOINTS[key][1], budget_text(key, cfg, rec),
                      "-" if seconds is None else f"{seconds / 60:.1f}",
                      "-" if rec.get("dev_ndcg10") is None else f"{rec['dev_ndcg10']:.4f}"])
    return format_table(["model", "checkpoint", "source", "budget", "train min", "dev nDCG@10"], lines, markdown=True)


def budget_text(key: str, cfg, rec: Mapping | None = None) -> str:
    """The budget a checkpoint was trained with, from its own record (not today's constants)."""
    if isinstance(cfg, Mapping) and "weights" in cfg:
        return "none: " + " + ".join(f"{w:g} x {k}" for k, w in zip(cfg["derived_from"], cfg["weights"]))
    if isinstance(cfg, Mapping) and isinstance(cfg.get("derived_from"), list) and "alphas" in cfg:
        grid = ", ".join(f"{a:g}" for a in cfg["alphas"])
        return (f"none: {(rec or {}).get('alpha', '?')} x the bundled model + the rest x ndrm3-frozen "
                f"(dev picked from {grid})")
    if isinstance(cfg, Mapping) and "derived_from" in cfg:
        grid = ", ".join(f"{a:g}" for a in cfg["alphas"])
        return (f"none: the bundled model, word vectors at alpha {(rec or {}).get('alpha', '?')} between their "
                f"start and the trained rows (dev picked from {grid})")
    if not isinstance(cfg, Mapping):
        from ckqti.models.specs import UNTRAINED

        if UNTRAINED.get(key) is None:
            return "none (w = 1, b = 0)"
        k1, b = UNTRAINED[key]
        return f"none (w = {k1 * b:.2f}, b = {k1 * (1 - b):.2f}: BM25 k1 {k1}, b {b})"
    if key.startswith("idcm"):
        rec = rec or {}
        if "stages" in rec:
            plan = {int(s): (v["epochs"], v["max_steps"]) for s, v in rec["stages"].items()}
        else:  # records written before the per-stage epochs: one epoch a stage, steps capped
            plan = {int(s): (1, m) for s, m in rec.get("max_steps", {}).items()} or IDCM_STAGES
        stages = ", ".join(f"stage {s}: {e} epoch{'s' * (e > 1)}{f' of at most {m} steps' if m else ''}"
                           for s, (e, m) in sorted(plan.items()))
        dev = f"{cfg['max_dev_queries']} claims" if cfg.get("max_dev_queries") else "every claim"
        return f"{stages}; batch {cfg['batch_size']}, lr {cfg['lr_encoder']:g}, dev {dev} top-{cfg['dev_depth']}"
    lr = cfg.get("lr", cfg.get("lr_encoder"))
    return f"{cfg['epochs']} epochs max, batch {cfg['batch_size']}, lr {lr:g}, dev top-{cfg['dev_depth']}"


def cited_by_training(train_qrels: Mapping[str, Mapping[str, int]],
                      test_qrels: Mapping[str, Mapping[str, int]]) -> tuple[int, int]:
    """``(test queries with a relevant document that a training query also judges relevant, test queries)``."""
    cited = {d for judged in train_qrels.values() for d, g in judged.items() if g > 0}
    hit = sum(1 for judged in test_qrels.values() if any(g > 0 and d in cited for d, g in judged.items()))
    return hit, len(test_qrels)


def scifact_cited() -> list[int]:
    """:func:`cited_by_training` of SciFact's train and test judgements (read from ``../shared/data``),
    as the report's JSON keeps it (``scifact_cited``), so that ``--render`` needs no data."""
    from indexer.readers import read_qrels

    sf = collections()["scifact"]
    return list(cited_by_training(read_qrels(sf.corpus.parent / "qrels" / "train.tsv"), read_qrels(sf.qrels)))


def notes(report: Mapping, cited: Sequence[int]) -> list[str]:
    """Explanations under the tables (numbers from the runs' records and ``cited``: :func:`scifact_cited`)."""
    hit, total = cited
    idcm = report.get("scifact", {}).get("idcm-rerank", {}).get("meta", {})
    speed = f" (about {idcm['docs_per_second']:.1f} documents a second here)" if idcm.get("docs_per_second") else ""
    return [
        "## Notes", "",
        f"* BM25 is Pyserini's (Lucene analyzer, k1 0.9, b 0.4), top {FIRST_STAGE_DEPTH}. Rerank rows reorder BM25's "
        f"top {RERANK_DEPTH}, so their NCG@100 equals BM25's; fullrank rows retrieve {FIRST_STAGE_DEPTH} documents "
        "from a learned index of the whole collection.",
        "* ORCAS-style field: the file `out/effectiveness/orcas-scifact-train.tsv` holds SciFact "
        f"*training* claims only, each attached to the abstracts it cites. {hit} of the {total} test claims have a "
        "relevant abstract that some training claim also cites (SciFact's claims come in related groups, e.g. a "
        "claim and its negation), so the field carries much of the test signal, as clicked queries did for TREC DL "
        "in the NDRM paper. No test claim is in the file by id, though two (870, 1292) have the exact text of "
        "training claims (871, 1291) that cite the same abstract, as SciFact ships them.",
        (f"* IDCM reranks only BM25's top {IDCM_DEPTH}{speed}; documents {IDCM_DEPTH + 1}-{RERANK_DEPTH} keep "
         "BM25's order below them." if IDCM_DEPTH < RERANK_DEPTH else
         f"* IDCM, the slowest model here, reranks BM25's top {IDCM_DEPTH} like the others{speed}."),
        "* Zero-shot: every learned model was trained on SciFact train and reads the new collection with its own "
        "vocabulary (embedding rows of unseen words predicted from their WordPiece composition, idf from the new "
        "collection); the untrained NDRM2 has no training at all. TREC DL counts grade >= 2 relevant for RR and AP.",
        "* GPU budget rows: IDCM trained listwise (softmax cross-entropy over a relevant abstract and 7 BM25 "
        "negatives) is the dev-chosen IDCM (dev nDCG@10 0.8288 against 0.8097 pairwise). GPU training is not "
        "bit-reproducible: the same settings trained again reached dev 0.8300 and SciFact test 0.7229 (+0.044) "
        "against this row's 0.7389 (see [EFFECTIVENESS_BUDGETS.md](EFFECTIVENESS_BUDGETS.md)).",
        "* TKL (idf term weights): each query term's saturated window values weighted by its idf in the collection "
        "read (`ckqti train --model tkl --term-weights idf`; the reference TKL's term salience passes through a "
        "LayerNorm of two features, which keeps only the sign of their difference, so no term weighs by how rare it "
        "is). Trained on "
        "CPU with patience 5; listwise reached a higher dev nDCG@10 (0.7866 against 0.7716) but a lower test score. "
        "With SciFact's titles as pseudo-queries for their own abstracts (`--weak-supervision titles`, 5,183 beside "
        "the 728 training claims) dev peaked lower (0.7538) and test did not move (0.6357). With whole windows "
        "(`--tail-windows whole`: no saturation window running past a document's end, so no region of one or two "
        "tokens at its end, `scripts/region_positions.py`) test is 0.6003; the same settings as the idf row, "
        "retrained in session 16, gave 0.6086, so TKL's rows move by about 0.03 between runs that differ only "
        "slightly ([EFFECTIVENESS_BUDGETS.md](EFFECTIVENESS_BUDGETS.md)).",
        "* NDRM reranking scores each candidate document once for all the queries ranking it (exact under query "
        "term independence; each run's JSON records the largest difference from the model's forward pass on a "
        "sample, `qti_check_max_rel_diff`).",
        "* NDRM3 is the bundled model, whose latent channel is gated at cosine 0.6 since session 10 "
        "(`NDRMConfig.latent_gate`), which trains on 7 BM25 negatives a claim since session 11 "
        "(`ckqti train --negatives 7`) and for up to 6 epochs since session 12 (session 11's model, 3 epochs: "
        "SciFact test fullrank 0.6934, rerank 0.6937, Vaswani fullrank -0.0109, Cranfield +0.0050; session 10's: "
        "0.6944, 0.6927, Vaswani -0.0183): its learned index stores every pair it scores, so its fullrank rows are the "
        "model's own ranking (top-100 overlap 0.995 with exhaustive scoring, docs/INDEX.md). The dense rows train "
        "the settings bundled in sessions 4-9 again (`ndrm3-dense`; training here gave a checkpoint a little "
        "different from the one then bundled, dev 0.8073 against 0.8066): it reranks better, and retrieves worse "
        "through its index, whose top-100 matched the model's own at 0.817.", ""]


def markdown(report: Mapping, budgets: Mapping, checks: Sequence[dict], experiments: Mapping,
             cited: Sequence[int]) -> str:
    specs = collections()
    parts = ["# Effectiveness", "", f"Command: `{COMMAND}` (stages cached under `out/effectiveness/`).", "",
             "Written by `scripts/effectiveness.py`; every stage and choice is in [EFFECTIVENESS_BUDGETS.md](EFFECTIVENESS_BUDGETS.md); "
             "numbers in `docs/results/effectiveness.json`. Δ and p: paired t-test of nDCG@10 against "
             "BM25 over the judged queries of the same collection. Models were trained on SciFact train only, "
             "on this project's 2 shared CPU cores except the rows marked *GPU budget*, trained and run on a lent "
             "H100 (their time column is the H100's; `scripts/gpu_bundle.py`), and the NDRM3 with frozen MiniLM word "
             "vectors distilled from IDCM (`ndrm3-frozen-distill`), trained on a lent H200 in session 22 (its time is the "
             "H200's; its rows were run on the CPU); budgets below. Every other "
             "collection is zero-shot. A time is of its run's own hour: the NDRM rerank rows of SciFact and Cranfield "
             "were rerun in session 26, when NDRM models began to read every query term at inference as the index "
             "does (the 20-term cap stays for training queries; nDCG@10 moved by at most 0.0013), beside other jobs "
             "on the 2 cores, so their times are up to 9x a quiet run's.", "", "## Summary", "", summary_table(report), "",
             "`*`: p < 0.05. Every run of every collection is in the tables below.", ""]
    for name, rows in report.items():
        n = rows["bm25"]["queries"] if "bm25" in rows else 0
        parts += [f"## {specs[name].label}", "", f"{n} judged queries; binary measures count grade >= "
                  f"{specs[name].rel_level} relevant.", "", collection_table(rows, specs[name].zero_shot), ""]
        if specs[name].zero_shot and any(predates_new_word_rows(k, e) for k, e in rows.items()):
            parts += [DAGGER_NOTE, ""]
    parts += ["## Targets", "", targets_table(checks), "", "## Checkpoints and training budgets", "",
              budgets_table(budgets), "", *experiment_section(experiments), *notes(report, cited)]
    return "\n".join(parts)


def merge_rows(previous: Mapping[str, Mapping[str, dict]], fresh: Mapping[str, Mapping[str, dict]]) -> dict:
    """``collection -> row key -> row``: the freshly evaluated rows over the committed ones, in
    :data:`ROWS` order, so a machine whose cache holds only some runs updates those and keeps
    the rest as committed (each row names its run and carries its own meta)."""
    order = [r.key for r in ROWS]
    out = {}
    for name in collections():
        rows = {**previous.get(name, {}), **fresh.get(name, {})}
        if rows:
            out[name] = {k: rows[k] for k in sorted(rows, key=lambda k: order.index(k) if k in order else len(order))}
    return out


def write_report(work: Path, budgets: Mapping[str, dict]) -> dict:
    fresh = {name: rows for name, spec in collections().items() if (rows := evaluate_collection(spec, work))}
    previous = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    report = merge_rows(previous.get("collections", {}), fresh)
    budgets = {**previous.get("checkpoints", {}), **budgets}
    checks = target_checks(report)
    experiments = experiment_records(work, previous)
    payload = {"command": COMMAND, "generated": time.strftime("%Y-%m-%d %H:%M:%S"),
               "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
               "measures": list(MEASURES), "checkpoints": budgets, "collections": report, "targets": checks,
               "experiments": experiments, "scifact_cited": scifact_cited()}
    doc = markdown(report, budgets, checks, experiments, payload["scifact_cited"])
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(payload, indent=1, default=str) + "\n")
    DOC.write_text(doc)
    write_readme_summary(report)
    return payload


def write_readme_summary(report: Mapping[str, Mapping[str, dict]]) -> None:
    """Rewrite the README's copy of the summary table (see :data:`SUMMARY_BEGIN`)."""
    text = README.read_text()
    updated = with_summary(text, summary_table(report))
    if updated != text:
        README.write_text(updated)


def render_from_results(work: Path) -> dict:
    """Rewrite :data:`DOC` from :data:`RESULTS` without measuring anything; finished experiments'
    records in ``work`` replace the JSON's, and the targets are judged again from its rows (their
    labels follow the code's). Reads no data but a JSON written before ``scifact_cited`` was kept."""
    payload = json.loads(RESULTS.read_text())
    payload["experiments"] = experiment_records(work, payload)
    payload["targets"] = target_checks(payload["collections"])
    payload.pop("experiment", None)
    payload["scifact_cited"] = payload.get("scifact_cited") or scifact_cited()
    doc = markdown(payload["collections"], payload["checkpoints"], payload["targets"], payload["experiments"],
                   payload["scifact_cited"])
    RESULTS.write_text(json.dumps(payload, indent=1, default=str) + "\n")
    DOC.write_text(doc)
    write_readme_summary(payload["collections"])
    return payload
