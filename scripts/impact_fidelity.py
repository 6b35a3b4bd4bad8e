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
from ckqti.errors import IndexFormatError, InputError  # noqa: E402
from ckqti.models.specs import UNTRAINED  # noqa: E402
from indexer.fidelity import measure_fidelity  # noqa: E402
from indexer.format import Manifest  # noqa: E402
from scripts.args import HelpFormatter, existing_dir, file_or_names, output_file, run  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
FILES = ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv")  # what --data must hold


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options; an unknown model, a missing folder or file, an output path that cannot be
    written are usage errors here, before any work."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--model", type=file_or_names(UNTRAINED), default=None,
                    help="'ndrm2', 'ndrm2-anserini' or a checkpoint (default: the bundled model)")
    ap.add_argument("--data", type=existing_dir, default=str(DATA / "scifact"),
                    help=f"a collection folder holding {', '.join(FILES)}")
    ap.add_argument("--index", type=existing_dir, default=None, help="an index of the corpus already built with --model")
    ap.add_argument("--out", type=output_file, default="out/fidelity.json", help="JSON to write")
    args = ap.parse_args(argv)
    if missing := [f for f in FILES if not (args.data / f).is_file()]:
        ap.error(f"--data {args.data}: no {', '.join(missing)} there")
    return args


def check_index(index: Path, model: str | None, corpus: Path) -> Manifest:
    """``index``'s manifest, refused unless it was built with ``model`` from ``corpus``'s documents.

    Raises:
        IndexFormatError: not an index, or one of another model.
        InputError: the index holds other documents than the corpus (measure_fidelity would find out
            only after analyzing the corpus, with a ValueError).
    """
    from ckqti.models.loading import load_qti_model
    from ckqti.models.specs import DEFAULT_CHECKPOINT
    from indexer.readers import read_corpus
    from retriever.index import Index

    idx = Index(index)
    wanted = load_qti_model(model or str(DEFAULT_CHECKPOINT))[1]["id"]
    if idx.model_id != wanted:
        raise IndexFormatError(f"built with {idx.model_id}, not {wanted} (give --model the index's model)", index)
    held = {d for sh in idx.shards for d in sh.docs.column("docid").to_pylist()}
    docs = {d.docid for d in read_corpus(corpus)}
    if held != docs:
        raise InputError(f"holds {len(held)} documents, {len(held - docs)} of them not in {corpus} ({len(docs)} "
                         "documents): --index was built from another corpus than --data's", index)
    return idx.manifest


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    data = args.data
    if args.index:
        check_index(args.index, args.model, data / "corpus.jsonl")
    with tempfile.TemporaryDirectory() as tmp:
        idx = args.index or Path(tmp) / "idx"
        manifest = Manifest.read(idx) if args.index else api.index(data / "corpus.jsonl", idx, model=args.model)
        rep = measure_fidelity(idx, data / "corpus.jsonl", args.model, data / "queries.jsonl", data / "qrels" / "test.tsv", progress=True)
    row = {"model": manifest.model["id"], "postings": manifest.num_postings, **rep.to_dict()}
    print("| model | postings | queries | overlap@100 | nDCG@10 index | nDCG@10 exhaustive | delta |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {row['model']} | {row['postings']} | {rep.queries} | {rep.overlap_at_k:.4f} | {rep.ndcg10_index:.4f} | {rep.ndcg10_exhaustive:.4f} | {rep.delta_ndcg10:+.4f} |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(row, indent=2))


if __name__ == "__main__":
    sys.exit(run(main))
