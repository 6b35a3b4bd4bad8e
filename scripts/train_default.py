"""Train the default model: NDRM3 on SciFact train, written to ``ckqti/data/models/ndrm3-scifact.pt``.

Command (about 30 minutes on 2 shared CPU cores; a GPU is used when present)::

    nice -n 10 python3 scripts/train_default.py --fullrank --dev-fullrank

It trains with :func:`ckqti.train.train`, then evaluates the saved checkpoint exactly as
``ckqti index`` would load it (:func:`ckqti.models.checkpoint.load_for_indexing` on the
corpus vocabulary), reranking the Pyserini BM25 top-100 of every SciFact test claim, and
prints and writes (next to the checkpoint, ``.json``) nDCG@10, RR@10, AP@100 and NCG@100 of
BM25 and of the reranking, with a paired t-test against BM25. ``--fullrank`` also builds a
learned index of SciFact with the checkpoint (``ckqti.api.index``) and evaluates full
retrieval through it. Test claims are only used here, after training: every choice below
was made on the dev split (10% of the training claims, carved with seed 0).

Choices, and why (dev = 81 claims carved from SciFact train with seed 0; nDCG@10 reranking
their BM25 top-30; for reference BM25 itself scores 0.794 there and untrained NDRM2 0.781; with
81 queries a difference below about 0.02 is noise):

* **Data.** SciFact train claims (809 judged, 728 used, 81 dev) with the published sampling
  (1 relevant + 1 BM25 top-100 candidate + 2 random documents, RankNet, 5 pairs) until
  session 10; 7 BM25 candidates since (below).
  Weak supervision (titles as pseudo-queries, 728 a epoch next to the 728 claims) is *off*:
  on dev it reached 0.787 / 0.795 / 0.797 after 1 / 2 / 3 epochs against 0.795 / 0.802 without,
  at twice the cost per epoch.
* **Vocabulary and size.** The training vocabulary is the SciFact corpus's own (all 28,329
  analyzed terms, Krovetz); embedding matrices are stored in float16, which keeps the
  checkpoint under 25 MB (256 x 28,331 x 2 bytes = 14.5 MB, plus 1.1M float32 weights).
  The test numbers below are measured on the saved (float16) file.
* **Embeddings.** ``embeddings="minilm"``: every word starts from its all-MiniLM-L6-v2
  WordPiece composition, reduced to 256 dimensions (:func:`ckqti.embeddings.minilm_embeddings`).
  Until session 4 the model started from gensim skip-gram vectors (128 IN + 128 OUT, window 10,
  5 epochs, min count 2) trained on SciFact's 5,183 abstracts: dev 0.795 / 0.802 / 0.794 after
  1 / 2 / 3 epochs against 0.789 / 0.799 / 0.807 with MiniLM's (with up to 6 epochs: 0.802,
  0.798 after epochs 4 and 5, so 3 stays). The switch was decided on dev, by the rule that an
  experiment of ``scripts/effectiveness.py`` reranks test only when its dev beats the bundled
  model's; its test rerank (0.696) was seen before the switch.
* **Gated latent channel** ``model_options={"latent_gate": 0.6}`` (since session 10): a query
  term's latent score counts only where the term occurs in the abstract or its cosine with
  one of the abstract's vectors reaches 0.6 (:class:`ckqti.models.ndrm1.LatentGate`), so the
  learned index holds every pair the model scores and ranks as the model does (overlap@100
  0.995 against exhaustive scoring on SciFact test, against 0.817 for the dense model bundled
  before). Chosen on the dev claims retrieved through the learned index, the job this model
  does (``--fullrank --dev-fullrank``): nDCG@10 0.7878 at 0.6 (3.4M postings), 0.7896 at 0.5
  (7.1M postings), against 0.7791 for the dense model (1.3M postings). Reranking dev's BM25
  top-30, the dense model was better: 0.8066 against 0.7879 (0.6) and 0.7896 (0.5), so the
  dense model stays the better reranker (``scripts/effectiveness.py``'s ``minilm`` experiment
  retrains it). 0.6 over 0.5: equal within dev's noise at half the index.
* **Seven BM25 negatives** ``negatives=7`` (since session 11): each training claim's example holds
  its relevant abstract, 7 non-relevant abstracts of its BM25 top-100 and 2 random ones (RankNet
  over its 23 ordered pairs) instead of the published 1 + 1 + 2 (5 pairs). With the other
  settings unchanged: dev claims through the learned index 0.7933 against 0.7878, dev reranking
  0.7930 against 0.7879 (per epoch 0.779 / 0.773 / 0.793 against 0.786 / 0.788 / 0.780), 2.3M
  postings against 3.4M; an epoch costs 2.5x as much. Both dev measures rose, by less than dev's
  noise; chosen by the rule above (dev through the index), before test was read. SciFact test
  then: fullrank 0.6934 against 0.6944 (p against BM25 0.068 against 0.030), reranking 0.6937
  against 0.6927, NCG@100 0.934 against 0.922: the same model within test's noise, with a
  third fewer postings. Tried after, on dev only: the same 7 negatives trained listwise
  (``loss="lce"``: the relevant abstract's softmax cross-entropy against the other 9), dev
  0.776 / 0.749 / 0.745 per epoch, through the index 0.776: worse, the loss falling fast
  (0.58 -> 0.22) while dev falls, so RankNet stays.
* **Six epochs** ``epochs=6, patience=2`` (since session 12): with the 7 negatives dev kept
  rising after the third epoch: per epoch 0.779 / 0.773 / 0.793 / 0.798 / 0.802 / 0.798, best
  epoch 5 (kept; ``patience`` 2 would stop after two epochs without a gain). Tried at the end of
  session 11 on dev only, bundled in session 12 by the rule above: dev claims through the
  learned index 0.8032 against 0.7933, dev reranking 0.8019 against 0.7930, 1.56M postings
  against 2.3M. Twice the training time (about 23 minutes for the 6 epochs on 2 cores). The
  bundling run reproduced the experiment's checkpoint id, ndrm3-611caa3582ac. SciFact test then
  (read after the choice): fullrank through the learned index 0.7116 (BM25 0.6789: +0.0327,
  p 0.0009), reranking BM25's top 100 0.7104 (+0.0315, p 0.0015), against 0.6934 and 0.6937
  for the 3-epoch model.
* **Initialisation** ``init="match"`` (:func:`ckqti.train.ndrm_start.match_init`): the model starts
  ranking as NDRM2, with an embedding-cosine matcher as its latent part. A few hundred Adam
  steps barely move NDRM3's randomly initialised ``Linear(2, 1)`` (whose sign may rank
  against the explicit score), and 2 CPU cores allow no more: with the model's own
  initialisation and otherwise the same settings, dev reached 0.253 / 0.530 after 1 / 2 epochs.
* **Optimisation.** Adam, 16 queries a step, lr 1e-3 for embeddings, encoder and query
  projection, 1e-2 for the scoring head (window MLP, NDRM2's two parameters, NDRM3's
  combination; as TK's 1e-4 / 1e-3 split). On dev after 2 epochs: the paper's lr 1e-4 is too
  slow for this budget; lr 1e-3 alone gave 0.787 (32 a step, 3 epochs: 0.778 / 0.787 / 0.787;
  8 a step, 2 epochs: 0.783 / 0.787); with the head at 1e-2: 0.795 / 0.802 / 0.794 / 0.795
  (early stop). Documents are cut to 256 terms in training batches (92% of SciFact abstracts
  are shorter) and to 4,000 when scoring; dev after every epoch selects the epoch (top-30 and
  top-100 reranking gave the same dev nDCG@10 for NDRM2).
* **Since session 38** a training step on the CPU encodes its documents 16 at a time in order of
  length (``scoring.encode_by_length``: 1.2x padding instead of 3x, 2-5x faster steps; a GPU
  still encodes a batch in one call).
  The loss and gradients are those of the padded batch, but dropout's masks are drawn group
  by group: this script now trains a checkpoint from the same distribution but with another
  id than the bundled ``ndrm3-611caa3582ac``, which the code before that change trained.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.args import HelpFormatter, output_dir, output_file, run, torch_device  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "scifact"
OUT = ROOT / "ckqti" / "data" / "models" / "ndrm3-scifact.pt"
WORK = ROOT / "runs" / "train-default"  # git-ignored
MEASURES = ("nDCG@10", "RR@10", "AP@100", "NCG@100")
CONFIG = dict(
    model="ndrm3",
    epochs=6,
    patience=2,
    batch_size=16,
    lr=1e-3,
    head_lr=1e-2,
    seed=0,
    dev_fraction=0.1,
    dev_depth=30,
    weak_supervision=None,
    embeddings="minilm",
    init="match",
    train_doc_terms=256,
    embedding_dtype="float16",
    negatives=7,
    model_options={"latent_gate": 0.6},
)


def test_runs(checkpoint: Path, work: Path, depth: int = 100, device: str | None = None) -> dict[str, dict]:
    """SciFact test runs: Pyserini BM25, and the checkpoint reranking BM25's top ``depth`` on ``device``
    (None: CUDA when present)."""
    from ckqti.bm25 import bm25_candidates
    from ckqti.models.checkpoint import load_for_indexing
    from ckqti.models.loading import pick_device
    from ckqti.train.data import analyze_queries, candidate_indices, load_collection
    from ckqti.train.scoring import as_run, score_pairs
    from indexer.readers import read_qrels, read_queries

    qrels = read_qrels(DATA / "qrels" / "test.tsv")
    queries = {q: t for q, t in read_queries(DATA / "queries.jsonl").items() if q in qrels}
    ranked = bm25_candidates(DATA / "corpus.jsonl", queries, work, depth)
    device = pick_device(device)
    factory, info = load_for_indexing(checkpoint, device)
    collection = load_collection(DATA / "corpus.jsonl")  # the corpus vocabulary, as `ckqti index` builds it
    model = factory(collection.vocab)
    query_ids = analyze_queries(queries, collection.analyzer, collection.vocab, model.config.max_query_terms)
    cands = candidate_indices(ranked, collection.index(), depth)
    scores = score_pairs(model, query_ids, collection, cands, 64, model.config.max_doc_terms, device, progress=True)
    return {
        "BM25 (Pyserini)": {q: {d: float(depth - i) for i, d in enumerate(docs)} for q, docs in ranked.items()},
        f"{info['id']} rerank BM25 top-{depth}": as_run(scores, collection.docids),
    }


def fullrank_run(checkpoint: Path, work: Path, device: str | None = None) -> dict[str, dict]:
    """Full retrieval of every SciFact claim through a learned index built with the checkpoint on ``device``."""
    from ckqti import api
    from retriever.run_reader import read_run

    index_dir, run_path = work / "index", work / "fullrank.trec"
    api.index(DATA / "corpus.jsonl", index_dir, model=str(checkpoint), force=True, device=device)
    api.run(index_dir, DATA / "queries.jsonl", run_path, k=1000)
    return read_run(run_path)


def dev_fullrank(checkpoint: Path, work: Path) -> dict:
    """nDCG@10 (and the other measures) of the dev claims (carved from train, listed in the checkpoint)
    retrieved through the learned index :func:`fullrank_run` built: how the bundled model is chosen."""
    from ckqti import api
    from ckqti.evaluate import evaluate
    from ckqti.models.checkpoint import load_checkpoint
    from indexer.readers import read_qrels, read_queries
    from retriever.run_reader import read_run

    dev = list(load_checkpoint(checkpoint).meta["dev_qids"])
    qrels = {q: judged for q, judged in read_qrels(DATA / "qrels" / "train.tsv").items() if q in set(dev)}
    texts = read_queries(DATA / "queries.jsonl")
    queries, run_path = work / "dev-queries.jsonl", work / "dev-fullrank.trec"
    queries.write_text("".join(json.dumps({"_id": q, "text": texts[q]}) + "\n" for q in dev))
    api.run(work / "index", queries, run_path, k=1000)
    res = evaluate(read_run(run_path), qrels, MEASURES)
    return {"queries": res.num_queries, "mean": res.mean}


def report(runs: dict[str, dict]) -> dict:
    """Measures of every run on SciFact test; a paired t-test of each against the first (BM25) on nDCG@10."""
    from ckqti.evaluate import evaluate
    from ckqti.significance import paired_ttest
    from indexer.readers import read_qrels

    qrels = read_qrels(DATA / "qrels" / "test.tsv")
    results = {name: evaluate(run, qrels, MEASURES) for name, run in runs.items()}
    base_name, base = next(iter(results.items()))
    out = {}
    for name, res in results.items():
        out[name] = {"mean": res.mean, "queries": res.num_queries}
        if name != base_name:
            test = paired_ttest(base.values("nDCG@10"), res.values("nDCG@10"))
            out[name]["ttest_ndcg10_vs_bm25"] = {"delta": test.mean_delta, "p": test.p_value}
    return out


def print_table(report: dict) -> None:
    print(f"{'SciFact test':<48}" + "".join(f"{m:>10}" for m in MEASURES) + f"{'p (t-test)':>12}")
    for name, row in report.items():
        p = row.get("ttest_ndcg10_vs_bm25", {}).get("p")
        tail = f"{p:>12.4f}" if p is not None else ""
        print(f"{name:<48}" + "".join(f"{row['mean'][m]:>10.4f}" for m in MEASURES) + tail)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    parser.add_argument("--out", type=output_file, default=str(OUT), help="checkpoint to write")
    parser.add_argument("--work", type=output_dir, default=str(WORK), help="work folder (BM25 index, training state)")
    parser.add_argument("--device", type=torch_device, default=None, help="torch device (default: cuda if available)")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run")
    parser.add_argument("--eval-only", action="store_true", help="evaluate an existing checkpoint")
    parser.add_argument("--fullrank", action="store_true", help="also evaluate full retrieval through a learned index")
    parser.add_argument("--dev-fullrank", action="store_true",
                        help="with --fullrank: also retrieve the dev claims through the learned index")
    args = parser.parse_args(argv)
    if args.eval_only and not args.out.is_file():
        parser.error(f"--eval-only evaluates an existing checkpoint: {args.out}: no such file")
    if args.dev_fullrank and not args.fullrank:
        parser.error("--dev-fullrank needs --fullrank (it reads the learned index --fullrank builds)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from ckqti.models.checkpoint import load_checkpoint
    from ckqti.train import TrainConfig, train

    started = time.perf_counter()
    work = args.work
    config = TrainConfig(**CONFIG, device=args.device)
    metrics_path = args.out.with_suffix(".json")
    flags = "".join(f" {a}" for a in (sys.argv[1:] if argv is None else argv))
    metrics: dict = {"command": f"nice -n 10 python3 scripts/train_default.py{flags}", "config": config.to_dict()}
    if args.eval_only and metrics_path.is_file():  # keep the training record of the run that wrote the checkpoint
        kept = ("command", "config", "training", "seconds")
        metrics = {k: v for k, v in json.loads(metrics_path.read_text()).items() if k in kept}
    if not args.eval_only:
        result = train(DATA / "corpus.jsonl", DATA / "queries.jsonl", DATA / "qrels" / "train.tsv", args.out, config,
                       resume=args.resume, work_dir=work)
        metrics["training"] = {"model_id": result.model_id, "best_epoch": result.best_epoch,
                               "dev_ndcg10": result.best_dev_ndcg10, "history": list(result.history)}
    runs = test_runs(args.out, work, device=args.device)
    if args.fullrank:
        runs[f"{load_checkpoint(args.out).id} fullrank (learned index)"] = fullrank_run(args.out, work, args.device)
    metrics["test"] = report(runs)
    if args.fullrank and args.dev_fullrank:
        metrics["dev_fullrank"] = dev_fullrank(args.out, work)
        print(f"dev claims through the learned index: nDCG@10 {metrics['dev_fullrank']['mean']['nDCG@10']:.4f}")
    metrics["eval_only_seconds" if args.eval_only else "seconds"] = time.perf_counter() - started
    metrics["checkpoint_bytes"] = args.out.stat().st_size
    metrics_path.write_text(json.dumps(metrics, indent=2) + "\n")
    print_table(metrics["test"])
    if "training" in metrics:
        print(f"dev nDCG@10 {metrics['training']['dev_ndcg10']:.4f} (epoch {metrics['training']['best_epoch']})")
    minutes = (time.perf_counter() - started) / 60
    print(f"{metrics['checkpoint_bytes'] / 1e6:.1f} MB, {minutes:.1f} min -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
