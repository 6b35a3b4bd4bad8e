"""A teacher's scores for distillation: one of ``scripts/effectiveness.py``'s checkpoints reranks
SciFact train claims' BM25 top 100 and, with ``--titles N``, every title pseudo-query's BM25 top N
(``title:<docid>``, :mod:`ckqti.train.pseudo`); written as :func:`ckqti.train.teacher.read_teacher`
reads it (``{"teacher": id, "scores": {qid: {docid: score}}, ...}``, gzip JSON). Dev claims are
scored too; the trainers never read their scores.

    python3 scripts/teacher_scores.py --checkpoint idcm-gpu-lce --titles 30 \\
        --out docs/results/teacher_idcm_scifact_titles.json.gz

The checkpoint is trained first when missing (``effectiveness_stages.ensure_checkpoint``; IDCM wants a
GPU). The BM25 candidates come from Pyserini, cached under ``out/effectiveness/bm25``; on a GPU
machine, which has no Java, from the cache ``scripts/gpu_bundle.py`` carries (``--candidates-only``
fills it here first).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.args import HelpFormatter, nonnegative_int, output_dir, output_file, run  # noqa: E402
from scripts.effectiveness_registry import CHECKPOINTS, WORK, collections  # noqa: E402
from scripts.effectiveness_stages import (  # noqa: E402
    checkpoint_path,
    device_name,
    ensure_checkpoint,
    scifact_title_inputs,
    scifact_train_inputs,
)


def teacher_inputs(work: Path, titles: int) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Queries and the candidates to score: every judged training claim's top 100, each title's top ``titles``."""
    claims, qrels, cands = scifact_train_inputs(work)
    queries = {q: claims[q] for q in qrels if q in claims and cands.get(q)}
    scored = {q: cands[q] for q in queries}
    if titles:
        t_queries, t_cands = scifact_title_inputs(work)
        queries.update(t_queries)
        scored.update({q: t_cands.get(q, [])[:titles] for q in t_queries})
    return queries, scored


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options; an unknown checkpoint key, a negative count or an output path that cannot be
    written are usage errors here, before any work."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    ap.add_argument("--checkpoint", choices=sorted(CHECKPOINTS), default="idcm-gpu-lce", metavar="KEY",
                    help="a checkpoint key of scripts/effectiveness_registry.py's CHECKPOINTS")
    ap.add_argument("--titles", type=nonnegative_int, default=0,
                    help="also score each title pseudo-query's BM25 top N (0: none)")
    ap.add_argument("--out", type=output_file, default=None, help="teacher file (.json.gz)")
    ap.add_argument("--work", type=output_dir, default=str(WORK), help="effectiveness.py's cache folder")
    ap.add_argument("--candidates-only", action="store_true", help="only fill the BM25 caches (needs Java)")
    args = ap.parse_args(argv)
    if args.out is None and not args.candidates_only:
        ap.error("--out is required unless --candidates-only")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    queries, cands = teacher_inputs(args.work, args.titles)
    print(f"{len(queries)} queries, {sum(map(len, cands.values()))} candidates", flush=True)
    if args.candidates_only:
        return 0
    from retriever.candidate_text import corpus_texts
    from retriever.rerank_model import open_reranker
    from retriever.rerank_scoring import rerank_candidates

    record = ensure_checkpoint(args.checkpoint, args.work)
    reranker = open_reranker(checkpoint_path(args.checkpoint, args.work))
    texts = corpus_texts(collections()["scifact"].corpus)
    batch = 128 if reranker.device.type == "cuda" else 16
    started = time.perf_counter()
    scored = rerank_candidates(reranker, queries, cands, texts, batch_size=batch, progress=True)
    seconds = time.perf_counter() - started
    payload = {
        "teacher": reranker.model_id,
        "made_by": f"scripts/teacher_scores.py --checkpoint {args.checkpoint} --titles {args.titles} on "
                   f"{device_name(reranker.device)}: SciFact train claims' BM25 top 100"
                   + (f", title pseudo-queries' top {args.titles}" if args.titles else ""),
        "checkpoint_dev_ndcg10": record.get("dev_ndcg10"),
        "seconds": seconds,
        "scores": {q: {d: float(s) for d, s in docs} for q, docs in scored.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.out, "wt", encoding="utf-8") as f:
        json.dump(payload, f)
    pairs = sum(len(v) for v in scored.values())
    print(f"wrote {args.out}: {len(scored)} queries, {pairs} pairs in {seconds:.0f} s ({pairs / seconds:.0f}/s)")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
