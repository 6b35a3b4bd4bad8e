"""Effectiveness of every model on SciFact test and zero-shot collections: one table, one JSON.

Command (every stage cached under ``out/effectiveness/``; a rerun skips finished work)::

    nice -n 10 python3 scripts/effectiveness.py [--only ROWS,COLLECTIONS] [--force] [--retrain]

``--only`` takes row keys (``bm25``, ``ndrm3-full``, ``tk-rerank``, ... or patterns such as
``'ndrm*'``) and collection names (``scifact``, ``trecdl``, ``cranfield``, ``vaswani``),
comma-separated; the report is always rewritten from every run that exists. ``--force`` redoes
the selected runs and learned indexes, ``--retrain`` also their checkpoints (never the bundled one).
``--experiment NAME`` (alone, it runs no table row) trains NDRM3 once with the settings of
``EXPERIMENTS[NAME]`` (``scripts/effectiveness_registry.py``) changed from the dense NDRM3's
(bundled until session 9), reports its dev nDCG@10 per epoch next to that model's, and only if dev
improves reranks SciFact test with it; the bundled checkpoint is never replaced.

Every stage and every training budget and choice, with the dev numbers behind it, and the GPU
commands: ``docs/EFFECTIVENESS_BUDGETS.md``. What is measured is declared in
``scripts/effectiveness_registry.py``, how each run and checkpoint is made and cached in
``scripts/effectiveness_stages.py``, the evaluation, targets and tables in
``scripts/effectiveness_report.py``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.args import output_dir, run  # noqa: E402  (needs ROOT on the path)
from scripts.effectiveness_registry import (  # noqa: E402
    CHECKPOINTS,
    EXPERIMENTS,
    ROWS,
    WORK,
    collections,
    ndrm_config,
    select,
)
from scripts.effectiveness_report import (  # noqa: E402
    DOC,
    RESULTS,
    collection_table,
    compare_to_base,
    evaluate_runs,
    render_from_results,
    targets_table,
    write_report,
)
from scripts.effectiveness_stages import (  # noqa: E402
    checkpoint_path,
    ensure_checkpoint,
    produce,
    run_path,
    scifact_train_inputs,
)


def run_experiment(name: str, work: Path) -> dict:
    """NDRM3 trained with an experiment's settings (dev selects the epoch); only if its dev nDCG@10 beats
    the dense NDRM3's does it rerank SciFact test. The bundled checkpoint is never touched."""
    from ckqti.train import train

    exp = EXPERIMENTS[name]
    side = checkpoint_path(exp.key, work).with_suffix(".json")
    if side.is_file():
        return json.loads(side.read_text())
    sf = collections()["scifact"]
    queries, qrels, _ = scifact_train_inputs(work)
    config = replace(ndrm_config("ndrm3-dense"), **exp.settings)  # recorded as named: paths relative to the checkout
    trained = replace(config, teacher=str(ROOT / config.teacher)) if config.teacher else config
    started = time.perf_counter()
    res = train(sf.corpus, queries, qrels, checkpoint_path(exp.key, work), trained,
                work_dir=work / "train" / exp.key)  # BM25 candidates for claims (and title pseudo-queries)
    bundled = ensure_checkpoint("ndrm3-dense", work)  # the settings every experiment changes
    record = {"settings": exp.settings, "config": config.to_dict(), "seconds": time.perf_counter() - started,
              "model_id": res.model_id, "dev_ndcg10": res.best_dev_ndcg10, "best_epoch": res.best_epoch,
              "history": list(res.history), "bundled_dev_ndcg10": bundled["dev_ndcg10"],
              "bundled_history": bundled["history"]}
    side.write_text(json.dumps(record, indent=1, default=str) + "\n")  # also the checkpoint record produce() reads
    if res.best_dev_ndcg10 > bundled["dev_ndcg10"]:
        spec = collections()["scifact"]
        produce(exp.row, "scifact", work, force=True)
        results = evaluate_runs(spec, {k: run_path(k, "scifact", work) for k in ("bm25", exp.row.key)})
        record["test"] = compare_to_base(results, "bm25")[exp.row.key]
    side.write_text(json.dumps(record, indent=1, default=str) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="comma-separated row keys/patterns and collection names")
    parser.add_argument("--force", action="store_true", help="redo the selected runs and learned indexes")
    parser.add_argument("--retrain", action="store_true", help="also retrain the selected rows' checkpoints")
    parser.add_argument("--work", type=output_dir, default=WORK, help="cache folder")
    parser.add_argument("--experiment", choices=sorted(EXPERIMENTS), default=None,
                        help="also train NDRM3 with that experiment's settings (EXPERIMENTS; see the docstring)")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite the markdown from the committed JSON (plus a finished experiment's record in "
                             "the cache folder); computes nothing, so it works without the cache")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    if args.render:
        render_from_results(args.work)
        print(f"wrote {DOC.relative_to(ROOT)} from {RESULTS.relative_to(ROOT)}")
        return 0
    if args.experiment:
        run_experiment(args.experiment, args.work)
        if not args.only:  # the experiment alone: keep the committed table, add the experiment's section
            render_from_results(args.work)
            print(f"\n{(time.perf_counter() - started) / 60:.1f} min; wrote {DOC.relative_to(ROOT)}, "
                  f"{RESULTS.relative_to(ROOT)}")
            return 0
    picked = select(ROWS, args.only) if args.only or not args.experiment else []
    if args.retrain:
        for key in dict.fromkeys(row.model for row, _ in picked if row.model in CHECKPOINTS and row.model != "ndrm3"):
            shutil.rmtree(args.work / "train" / key, ignore_errors=True)  # IDCM resumes from stage files there
            ensure_checkpoint(key, args.work, retrain=True)
    for row, coll in picked:
        produce(row, coll, args.work, args.force or args.retrain)
    budgets = {}
    for key in CHECKPOINTS:  # training records (a checkpoint trained elsewhere, e.g. on a GPU, may be absent here)
        side = checkpoint_path(key, args.work).with_suffix(".json")
        if key == "ndrm3":
            budgets[key] = ensure_checkpoint(key, args.work)
        elif side.is_file():
            budgets[key] = json.loads(side.read_text())
    payload = write_report(args.work, budgets)
    for name, rows in payload["collections"].items():
        print(f"\n{collections()[name].label}\n{collection_table(rows)}")
    print("\n" + targets_table(payload["targets"]))
    print(f"\n{(time.perf_counter() - started) / 60:.1f} min; wrote {DOC.relative_to(ROOT)}, {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
