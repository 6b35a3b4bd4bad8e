"""How much the learned index loses against exhaustive float scoring by the same model.

    python scripts/impact_fidelity.py [--model ndrm2|CHECKPOINT] [--index DIR] [--out out/fidelity.json]

Builds an index of SciFact with the model (or reads ``--index``, built with the same model), runs SciFact test through it, scores every
document exhaustively with the model, and prints mean overlap@100 and the nDCG@10
difference (targets: overlap@100 >= 0.95, |delta nDCG@10| <= 0.005).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # runs from a checkout without the editable install too
    sys.path.insert(0, str(ROOT))

from ckqti import api  # noqa: E402
from indexer.fidelity import measure_fidelity  # noqa: E402
from indexer.format import Manifest  # noqa: E402

DATA = ROOT.parent / "shared" / "data"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="'ndrm2' or a checkpoint (default: the bundled model)")
    ap.add_argument("--data", default=str(DATA / "scifact"))
    ap.add_argument("--index", default=None, help="an index of the corpus already built with --model")
    ap.add_argument("--out", default="out/fidelity.json")
    args = ap.parse_args()
    data = Path(args.data)
    if args.index:
        from ckqti.models.loading import DEFAULT_CHECKPOINT, load_qti_model

        wanted = load_qti_model(args.model or str(DEFAULT_CHECKPOINT))[1]["id"]
        if Manifest.read(args.index).model["id"] != wanted:
            sys.exit(f"{args.index}: built with {Manifest.read(args.index).model['id']}, not {wanted}")
    with tempfile.TemporaryDirectory() as tmp:
        idx = Path(args.index) if args.index else Path(tmp) / "idx"
        manifest = Manifest.read(idx) if args.index else api.index(data / "corpus.jsonl", idx, model=args.model)
        rep = measure_fidelity(idx, data / "corpus.jsonl", args.model, data / "queries.jsonl", data / "qrels" / "test.tsv", progress=True)
    row = {"model": manifest.model["id"], "postings": manifest.num_postings, **rep.to_dict()}
    print("| model | postings | queries | overlap@100 | nDCG@10 index | nDCG@10 exhaustive | delta |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {row['model']} | {row['postings']} | {rep.queries} | {rep.overlap_at_k:.4f} | {rep.ndcg10_index:.4f} | {rep.ndcg10_exhaustive:.4f} | {rep.delta_ndcg10:+.4f} |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(row, indent=2))


if __name__ == "__main__":
    main()
