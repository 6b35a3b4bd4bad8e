"""BM25 with ckqti's analyzer over a grid of ``k1, b``: how much a collection wants length normalisation.

    python scripts/bm25_length_norm.py [--collections vaswani,cranfield] [--out out/bm25_length_norm.json]

NDRM2 is ``idf * tf' / (tf' + ReLU(w dl' + b) + eps)``: untrained (``w = 1, b = 0``) it is BM25
with ``k1 = 1, b = 1`` (full length normalisation, without the constant ``k1 + 1``), and NDRM3's
explicit channel starts there. This script scores each collection's judged queries exhaustively
with BM25 over the same analyzed terms the learned index stores (Krovetz, stopwords; not
Pyserini's Porter analyzer), ``idf = max(log((N - df + 0.5) / (df + 0.5)), 0)`` as in NDRM2, and
prints nDCG@10 per ``(k1, b)``: a diagnostic for zero-shot gaps, not a tuned baseline (the
evaluation's BM25 is Pyserini's with its defaults, k1 0.9, b 0.4).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ckqti.evaluate import evaluate  # noqa: E402
from ckqti.text import Analyzer  # noqa: E402
from indexer.readers import read_corpus, read_qrels, read_queries  # noqa: E402
from scripts.args import HelpFormatter, names_from, output_file, run  # noqa: E402
from scripts.effectiveness_registry import ALL, collections  # noqa: E402

GRID = ((0.9, 0.4), (1.2, 0.75), (1.0, 1.0), (1.0, 0.5), (1.0, 0.0))


def term_matrix(texts: list[list[str]]) -> tuple[sp.csc_matrix, dict[str, int]]:
    """``[docs, terms]`` term frequencies and the term -> column map."""
    vocab: dict[str, int] = {}
    rows, cols = [], []
    for i, terms in enumerate(texts):
        for t in terms:
            cols.append(vocab.setdefault(t, len(vocab)))
            rows.append(i)
    tf = sp.csc_matrix((np.ones(len(rows), dtype=np.float64), (rows, cols)), shape=(len(texts), len(vocab)))
    tf.sum_duplicates()
    return tf, vocab


def bm25_run(tf: sp.csc_matrix, vocab: dict[str, int], queries: dict[str, list[str]], docids: list[str],
             k1: float, b: float, depth: int = 100) -> dict[str, dict[str, float]]:
    """Top ``depth`` of every query by exhaustive BM25 (query terms counted as often as they occur)."""
    n = tf.shape[0]
    dl = np.asarray(tf.sum(axis=1)).ravel()
    norm = k1 * (1 - b + b * dl / dl.mean())  # [docs]
    df = np.diff(tf.indptr)
    idf = np.maximum(np.log((n - df + 0.5) / (df + 0.5)), 0.0)
    run = {}
    for qid, terms in queries.items():
        scores = np.zeros(n)
        for t in terms:
            col = vocab.get(t)
            if col is None:
                continue
            lo, hi = tf.indptr[col], tf.indptr[col + 1]
            docs, f = tf.indices[lo:hi], tf.data[lo:hi]
            scores[docs] += idf[col] * f * (k1 + 1) / (f + norm[docs])
        top = np.argsort(-scores, kind="stable")[:depth]
        run[qid] = {docids[i]: float(scores[i]) for i in top if scores[i] > 0}
    return run


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--collections", type=names_from(ALL), default="vaswani,cranfield,scifact,trecdl",
                    help="comma-separated collections")
    ap.add_argument("--out", type=output_file, default="out/bm25_length_norm.json", help="JSON to write")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    specs = collections()
    analyzer = Analyzer()
    results = {}
    print("| collection | avg. terms | " + " | ".join(f"k1 {k1}, b {b}" for k1, b in GRID) + " |")
    print("|---|---|" + "---|" * len(GRID))
    for name in args.collections:
        spec = specs[name]
        docs = list(read_corpus(spec.corpus))
        qrels = read_qrels(spec.qrels, spec.qrels_format)
        queries = {q: analyzer(t) for q, t in read_queries(spec.queries).items() if q in qrels}
        tf, vocab = term_matrix([analyzer(d.full_text()) for d in docs])
        docids = [d.docid for d in docs]
        row = {}
        for k1, b in GRID:
            run = bm25_run(tf, vocab, queries, docids, k1, b)
            row[f"k1={k1},b={b}"] = float(evaluate(run, qrels, ["nDCG@10"]).mean["nDCG@10"])
        avg = float(tf.sum() / tf.shape[0])
        results[name] = {"avg_terms": avg, "ndcg10": row}
        print(f"| {name} | {avg:.1f} | " + " | ".join(f"{v:.4f}" for v in row.values()) + " |", flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"grid": GRID, "results": results}, indent=1))


if __name__ == "__main__":
    sys.exit(run(main))
