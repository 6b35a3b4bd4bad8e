"""Reranking throughput: documents per second of TK, TKL, NDRM3 and IDCM at 200, 2,000 and 4,000 terms.

    python scripts/bench_rerank.py [--tk TK.pt --tkl TKL.pt --ndrm3 NDRM3.pt --idcm IDCM.pt] [--out out/bench_rerank.json]

Documents are real SciFact abstracts joined and cut to exactly 200, 2,000 and 4,000 analyzed
terms; each is scored against a SciFact claim in batches (``--batch``) from text (tokenization
included), and again from token ids made beforehand (the model alone, as the papers count),
after one warm-up batch; a cell is the best of 3 rounds of ``--seconds / 3`` each
(on a shared machine some rounds are slowed by other work). Models come from checkpoints when given, else are built at
the training sizes with random weights (speed does not depend on the weights): TK and TKL
256-d, 8 heads, 2 layers (TKL reading up to 4,000 terms); NDRM3 the paper's (256-d Conformer,
4,000 terms); IDCM from all-MiniLM-L6-v2 (2,000 WordPiece tokens, 4 windows to the
cross-encoder). Each model reads at most its own cap: TK's 200 terms and IDCM's 2,000 pieces,
so their longer rows measure the cost of tokenizing and capping, not of reading more.

Per-query latency: for ``--latency-queries`` SciFact test claims, rerank BM25's top 100
(Pyserini, run once beforehand) from text: tokenization plus scoring, the work of ``ckqti
rerank`` per query. Runs on CPU and, when torch sees one, on CUDA. Prints a table, writes JSON.
The papers report TK 4 docs/ms and TKL 1.1 docs/ms (GTX 1080), IDCM ~600 docs/s at 2,000 tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python scripts/bench_rerank.py`
    sys.path.insert(0, str(ROOT))

from ckqti.models.checkpoint import QTI_KINDS, Checkpoint  # noqa: E402
from ckqti.models.inputs import TermText, WordPieceText, collection_vocabulary  # noqa: E402
from ckqti.models.reranker import Reranker, build_model, reranker_from_checkpoint  # noqa: E402
from ckqti.text import Analyzer  # noqa: E402
from scripts.args import (  # noqa: E402
    HelpFormatter,
    existing_file,
    names_from,
    output_dir,
    output_file,
    positive_float,
    positive_int,
    run,
    usable_devices,
)
from scripts.long_documents import load_checked  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "scifact"
MODELS = ("TK", "TKL", "NDRM3", "IDCM")  # --models, in any case
LENGTHS = (200, 2000, 4000)


def random_models(vocab_texts: list[str], device: torch.device, names: set[str]) -> dict[str, Reranker]:
    """The models named (of TK, TKL, NDRM3, IDCM) at their training sizes with random weights."""
    from ckqti.models.idcm import IDCM
    from ckqti.models.minilm import WordPieceTokenizer
    from ckqti.models.ndrm import build_ndrm
    from ckqti.models.ndrm_config import NDRMConfig

    analyzer = Analyzer()
    vocab = collection_vocabulary(vocab_texts, analyzer)
    text = TermText(analyzer, vocab)
    size = dict(vocab_size=len(vocab), embedding_dim=256, num_heads=8)
    out = {}
    if "TK" in names:
        out["TK"] = Reranker("tk", build_model("tk", size).to(device).eval(), text, "tk-random", 30, 200, device)
    if "TKL" in names:
        tkl = build_model("tkl", {**size, "max_doc_length": 4000})
        out["TKL"] = Reranker("tkl", tkl.to(device).eval(), text, "tkl-random", 30, 4000, device)
    if "NDRM3" in names:
        ndrm3 = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant="ndrm3"), vocab)
        out["NDRM3"] = Reranker("ndrm3", ndrm3.to(device).eval(), text, "ndrm3-random", 20, 4000, device)
    if "IDCM" in names:
        idcm = IDCM.from_minilm(device=device).eval()
        out["IDCM"] = Reranker("idcm", idcm, WordPieceText(WordPieceTokenizer.minilm()), "idcm-minilm", 30, 2000, device)
    return out


def checkpoint_models(checkpoints: Mapping[str, Checkpoint], device: torch.device) -> dict[str, Reranker]:
    return {name: reranker_from_checkpoint(c, device, 4000 if name == "TKL" else None) for name, c in checkpoints.items()}


def long_texts(docs: list[str], analyzer: Analyzer, lengths=LENGTHS, count: int = 32) -> dict[int, list[str]]:
    """``count`` documents of exactly each length in analyzed terms, from consecutive abstracts."""
    try:
        from scripts.long_documents import TermCutter
    except ImportError:  # run as ``python scripts/bench_rerank.py``: the scripts folder is on the path
        from long_documents import TermCutter

    corpus = {str(i): t for i, t in enumerate(docs)}
    cutter = TermCutter(analyzer, corpus)
    pool = list(corpus)
    out, pos = {}, 0
    for n in lengths:
        out[n] = []
        for _ in range(count):
            text, pos = cutter.fill(pool, pos, n)
            out[n].append(text)
    return out


def docs_per_second(rr: Reranker, query: str, texts: list[str], batch: int, seconds: float, rounds: int = 3,
                    tokenized: bool = False) -> float:
    """Scoring throughput from text (tokenization included) after one warm-up batch: the best of
    ``rounds`` rounds of at least ``seconds / rounds`` each (a shared machine slows some rounds down).
    ``tokenized``: from id rows made beforehand (the model alone, as the papers count)."""
    docs = texts[:batch]
    if tokenized:
        q, rows = rr.query_ids(query), [rr.doc_ids(t) for t in docs]
        lengths = [rr.doc_length(t) for t in docs] if rr.kind in QTI_KINDS else None

        def step() -> None:
            rr.score_rows(q, rows, lengths, batch_size=batch)
    else:

        def step() -> None:
            rr.score(query, docs, batch_size=batch)
    step()
    best = 0.0
    for _ in range(rounds):
        done, started = 0, time.perf_counter()
        while True:
            step()
            done += len(docs)
            if rr.device.type == "cuda":
                torch.cuda.synchronize(rr.device)
            elapsed = time.perf_counter() - started
            if elapsed >= seconds / rounds:
                break
        best = max(best, done / elapsed)
    return best


def query_latencies(rr: Reranker, queries: Mapping[str, str], candidates: Mapping[str, list[str]],
                    texts: Mapping[str, str]) -> list[float]:
    """Milliseconds to rerank each query's candidates from text (fresh tokenization per query)."""
    out = []
    for qid, query in queries.items():
        docs = [texts[d] for d in candidates[qid]]
        started = time.perf_counter()
        rr.score(query, docs, batch_size=32)
        if rr.device.type == "cuda":
            torch.cuda.synchronize(rr.device)
        out.append(1000.0 * (time.perf_counter() - started))
    return out


def bm25_top100(queries: Mapping[str, str], work: Path) -> dict[str, list[str]]:
    """BM25's top 100 of ``queries``, kept in ``work/top100.json`` (a machine without Java, such as a lent
    GPU, reuses the file made here)."""
    cache = work / "top100.json"
    got = json.loads(cache.read_text()) if cache.is_file() else {}
    if all(q in got for q in queries):
        return {q: got[q] for q in queries}
    from ckqti.bm25 import bm25_candidates

    got.update(bm25_candidates(DATA / "corpus.jsonl", dict(queries), work, 100))
    work.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(got))
    return {q: got[q] for q in queries}


def bench_device(models: Mapping[str, Reranker], texts: dict[int, list[str]], query: str, args,
                 latency_inputs) -> list[dict]:
    rows = []
    for name, rr in models.items():
        row = {"model": name, "model_id": rr.model_id, "device": str(rr.device), "reads": rr.max_doc_length}
        for n, docs in texts.items():
            with torch.no_grad():
                row[f"docs_per_s@{n}"] = docs_per_second(rr, query, docs, args.batch, args.seconds)
                row[f"model_docs_per_s@{n}"] = docs_per_second(rr, query, docs, args.batch, args.seconds, tokenized=True)
            print(f"  {name} {rr.device} {n} terms: {row[f'docs_per_s@{n}']:.1f} docs/s from text, "
                  f"{row[f'model_docs_per_s@{n}']:.1f} from ids", flush=True)
        if latency_inputs is not None:
            lat = query_latencies(rr, *latency_inputs)
            row.update({"query_ms_median": statistics.median(lat), "query_ms_mean": float(np.mean(lat)),
                        "latency_queries": len(lat)})
        rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    """Docs/s from text (and from token ids, the model alone, where measured) at each length."""
    head = "| model | device | " + " | ".join(f"docs/s @{n} text (ids)" for n in LENGTHS) + " | ms/query (BM25 top-100) |"
    lines = [head, "|---|---|" + "---|" * len(LENGTHS) + "---|"]
    for r in rows:
        lat = f"{r['query_ms_median']:.0f}" if "query_ms_median" in r else "-"
        cells = [f"{r[f'docs_per_s@{n}']:.1f}" + (f" ({r[f'model_docs_per_s@{n}']:.1f})"
                                                   if f"model_docs_per_s@{n}" in r else "") for n in LENGTHS]
        lines.append(f"| {r['model']} | {r['device']} | " + " | ".join(cells) + f" | {lat} |")
    return "\n".join(lines)


DEVICES = ("cpu", "cuda")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options; a bad value (a count below 1, an unknown device, a missing checkpoint, an output
    path that cannot be written) is a usage error here, before any timing."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    for name in ("tk", "tkl", "ndrm3", "idcm"):
        ap.add_argument(f"--{name}", type=existing_file, default=None,
                        help=f"{name.upper()} checkpoint (default: random weights)")
    ap.add_argument("--batch", type=positive_int, default=16, help="documents per batch")
    ap.add_argument("--seconds", type=positive_float, default=6.0, help="minimum timing per cell (best of 3 rounds)")
    ap.add_argument("--latency-queries", type=positive_int, default=5, help="SciFact test claims timed per query")
    ap.add_argument("--threads", type=positive_int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--models", type=names_from(MODELS), default=",".join(MODELS), help="comma-separated models")
    ap.add_argument("--devices", type=names_from(DEVICES), default=",".join(DEVICES),
                    help="comma-separated devices to measure on (cuda only when torch sees one)")
    ap.add_argument("--work", type=output_dir, default="out/bench_rerank.work", help="BM25 index folder")
    ap.add_argument("--out", type=output_file, default="out/bench_rerank.json", help="JSON to write")
    args = ap.parse_args(argv)
    args.devices = usable_devices(ap, args.devices)
    # each checkpoint loaded here, once: one of another kind (an NDRM3 as --tk) used to be timed under the option's name
    paths = {"TK": args.tk, "TKL": args.tkl, "NDRM3": args.ndrm3, "IDCM": args.idcm}
    args.checkpoints = load_checked(ap, {k: p for k, p in paths.items() if p and k in args.models},
                                    {k: (k.lower(),) for k in paths})
    return args


def main(argv: list[str] | None = None) -> None:
    from indexer.readers import read_corpus, read_qrels, read_queries

    args = parse_args(argv)
    docs = {d.docid: d.full_text() for d in read_corpus(DATA / "corpus.jsonl")}
    queries = read_queries(DATA / "queries.jsonl")
    test = [q for q in read_qrels(DATA / "qrels" / "test.tsv") if q in queries][: args.latency_queries]
    lq = {q: queries[q] for q in test}
    cands = bm25_top100(lq, Path(args.work)) if lq else {}
    latency_inputs = (lq, cands, docs) if lq else None
    texts = long_texts(list(docs.values()), Analyzer(), count=args.batch)
    wanted = args.models
    old_threads = torch.get_num_threads()
    rows = []
    try:
        if args.threads:
            torch.set_num_threads(args.threads)
        for device in args.devices:
            given = args.checkpoints
            models = random_models(list(docs.values()), device, set(wanted) - set(given))
            models.update(checkpoint_models(given, device))
            models = {k: models[k] for k in wanted if k in models}
            rows += bench_device(models, texts, queries[test[0]] if test else "protein folding", args, latency_inputs)
    finally:
        torch.set_num_threads(old_threads)
    print(table(rows))
    meta = {"cpu": platform.processor() or platform.machine(), "torch_threads": args.threads or old_threads,
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "load_average": list(os.getloadavg())}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print("wrote", args.out)


if __name__ == "__main__":
    sys.exit(run(main))
