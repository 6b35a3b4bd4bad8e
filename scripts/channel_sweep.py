"""Re-weight an NDRM3 index's latent channel against its explicit one, chosen on dev only.

NDRM3 in eval mode scores ``a * latent + b * explicit + c``; the index stores the two terms
as channels ``"one"`` and ``"idf"`` (docs/INDEX.md), and search can multiply a channel by a
constant (``Searcher(channel_weights={"one": w})``) without re-indexing. The bundled model
learned ``a = 0.013, b = 0.909``: its latent half barely moves a ranking. This script asks
whether a larger latent weight helps, the honest way: ``w`` is picked on the dev claims the
bundled model was validated on (10 % of SciFact train, seed 0, as :func:`ckqti.train.data.split_dev`
carves them; never seen in its training), fullrank through the learned index, and only the
picked ``w`` (plus ``w = 1``, the model itself) is then run on SciFact test, next to
Pyserini's BM25 (paired t-tests of nDCG@10).

    ckqti index ../shared/data/scifact/corpus.jsonl --out out/sf-ndrm3      # bundled NDRM3
    python scripts/channel_sweep.py --index out/sf-ndrm3 --out docs/results/channel_sweep.json

Prints a table and writes JSON; nothing here changes the bundled model or the index.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ckqti.bm25 import bm25_candidates  # noqa: E402
from ckqti.errors import IndexFormatError  # noqa: E402
from ckqti.evaluate import evaluate  # noqa: E402
from ckqti.significance import paired_ttest  # noqa: E402
from ckqti.train.data import split_dev  # noqa: E402
from indexer.readers import read_qrels, read_queries  # noqa: E402
from retriever.index import Index  # noqa: E402
from retriever.search import Searcher  # noqa: E402
from scripts.args import HelpFormatter, command_line, existing_dir, output_dir, output_file, positive_floats, run  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "scifact"
MEASURES = ("nDCG@10", "RR@10", "AP@100", "NCG@100")
GRID = (0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


def fullrank(searcher: Searcher, queries: dict[str, str], k: int = 100) -> dict[str, list[tuple[str, float]]]:
    found = searcher.search_many(list(queries.values()), k)
    return {q: [(h.docid, h.score) for h in r.hits] for q, r in zip(queries, found) if not isinstance(r, Exception)}


def latent_index(path: Path) -> Index:
    """The index at ``path``, refused unless it has the latent ``"one"`` channel the sweep re-weights.

    Raises:
        IndexFormatError: not an index, or one without a latent channel (NDRM2's).
    """
    index = Index(path)
    channels = list(index.quantizer.weights)
    if "one" not in channels:
        raise IndexFormatError(f"the sweep needs an index with a latent 'one' channel, built with NDRM3 (the bundled "
                               f"model) or NDRM1; this one, built with {index.model_id or 'an unknown model'}, has "
                               f"the channels {channels}", path)
    return index


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    ap.add_argument("--index", type=existing_dir, required=True, help="a SciFact index built with the bundled NDRM3")
    ap.add_argument("--grid", type=positive_floats, default=",".join(f"{w:g}" for w in GRID),
                    help="latent channel weights tried on dev, comma-separated (each > 0)")
    ap.add_argument("--out", type=output_file, default=str(ROOT / "out" / "channel_sweep.json"), help="JSON to write")
    ap.add_argument("--work", type=output_dir, default=str(ROOT / "out" / "channel-sweep"),
                    help="Pyserini's BM25 index goes here")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    index = latent_index(args.index)

    queries = read_queries(DATA / "queries.jsonl")
    _, dev_qrels = split_dev(read_qrels(DATA / "qrels" / "train.tsv"), 0.1, 0)
    test_qrels = read_qrels(DATA / "qrels" / "test.tsv")
    judged = {d for qrels in (dev_qrels, test_qrels) for docs in qrels.values() for d in docs}
    held = {d for sh in index.shards for d in sh.docs.column("docid").to_pylist()}
    if not judged & held:
        raise IndexFormatError(f"holds none of SciFact's judged abstracts ({index.num_docs} documents): the sweep "
                               "needs an index of SciFact's corpus", args.index)
    dev_q = {q: queries[q] for q in dev_qrels}
    test_q = {q: queries[q] for q in test_qrels}

    dev = {}
    print(f"dev: {len(dev_q)} claims carved from SciFact train (seed 0), fullrank top 100")
    print("| latent weight | dev nDCG@10 | dev RR@10 |\n|---|---|---|")
    for w in args.grid:
        res = evaluate(fullrank(Searcher(index, channel_weights={"one": w}), dev_q), dev_qrels, MEASURES)
        dev[w] = res.mean
        print(f"| {w:g} | {res.mean['nDCG@10']:.4f} | {res.mean['RR@10']:.4f} |", flush=True)
    best = max(dev, key=lambda w: (dev[w]["nDCG@10"], -abs(w - 1.0)))

    test = {}
    for w in sorted({1.0, best}):
        test[w] = evaluate(fullrank(Searcher(index, channel_weights={"one": w}), test_q), test_qrels, MEASURES)
    bm25_top = bm25_candidates(DATA / "corpus.jsonl", test_q, args.work, 100)
    bm25 = evaluate({q: [(d, 1000.0 - r) for r, d in enumerate(ds)] for q, ds in bm25_top.items()}, test_qrels, MEASURES)

    def ndcg(r):
        return {q: v["nDCG@10"] for q, v in r.by_query.items()}

    tests = {str(w): {"vs_bm25": paired_ttest(ndcg(bm25), ndcg(r)), "vs_weight_1": paired_ttest(ndcg(test[1.0]), ndcg(r))}
             for w, r in test.items()}
    print(f"\npicked on dev: latent weight {best:g}")
    print("| SciFact test | nDCG@10 | RR@10 | AP@100 | NCG@100 | Δ nDCG@10 vs BM25 | p |\n|---|---|---|---|---|---|---|")
    print("| Pyserini BM25 | " + " | ".join(f"{bm25.mean[m]:.4f}" for m in MEASURES) + " | | |")
    for w, r in test.items():
        t = tests[str(w)]["vs_bm25"]
        print(f"| NDRM3 fullrank, latent weight {w:g} | " + " | ".join(f"{r.mean[m]:.4f}" for m in MEASURES)
              + f" | {t.mean_delta:+.4f} | {t.p_value:.3g} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "command": command_line("channel_sweep.py", argv),
        "dev_queries": len(dev_q), "dev": {str(w): m for w, m in dev.items()}, "picked": best,
        "test": {"bm25": bm25.mean, **{str(w): r.mean for w, r in test.items()}},
        "ttest_ndcg10": {w: {k: {"delta": v.mean_delta, "p": v.p_value} for k, v in d.items()} for w, d in tests.items()},
    }, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
