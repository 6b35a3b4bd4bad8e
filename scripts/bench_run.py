"""Batch TREC runs side by side: ``ckqti run`` vs Pyserini BM25 vs bm25s, on SciFact's claims.

    python scripts/bench_run.py                        # all 1,109 claims, k = 1000 and 100, 1 and 2 threads
    python scripts/bench_run.py --test-only --depths 1000 --out out/bench_run_test.json

Engines, each writing a TREC run of the same queries (read by ckqti's reader):

* ``ckqti-ndrm3``: the bundled NDRM3 model's index, ``ckqti-ndrm2``: the untrained NDRM2 (BM25-like)
  index, both built once into ``--workdir`` (reused when present) and run with ``ckqti.api.run``;
* ``pyserini-bm25``: ``LuceneSearcher.batch_search`` (k1 = 0.9, b = 0.4, Anserini's defaults) over a
  Lucene index built by ``ckqti.bm25.build_bm25_index``, the run written by Pyserini's own
  ``TrecWriter`` (as its ``pyserini.search.lucene`` CLI does); its JVM starts in this process;
* ``bm25s``: bm25s's tokenizer (English stopwords; no stemmer: PyStemmer is not installed here),
  ``BM25(k1=0.9, b=0.4, backend="numba")`` (its Numba retrieval compiles in the warm-up, ~20 s),
  zero-score documents dropped, lines by f-strings.

Per engine, depth and thread count: queries/s of the search alone, of the rest (writing the run;
for ckqti also opening the index and reading the queries, since ``api.run`` does all three), and
end to end in this process; and, for ckqti and Pyserini, the whole command in a fresh process
(``python -m ckqti run``; ``python -m pyserini.search.lucene --bm25 --batch-size 64``, started
through ``ckqti.bm25.start_jvm``: run plainly it cannot start its JVM here, see that module), timed
around ``subprocess.run``. Each is timed after one untimed warm-up, in ``--rounds`` interleaved
rounds (engine after engine, then again); columns are the medians. nDCG@10 of each engine's run on
SciFact's test qrels sits beside the speed. Prints a markdown table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ckqti.errors import CkqtiError  # noqa: E402
from scripts.args import (  # noqa: E402
    HelpFormatter,
    existing_file,
    names_from,
    output_dir,
    output_file,
    positive_int,
    positive_ints,
    run,
    shown,
)

DATA = ROOT.parent / "shared" / "data" / "scifact"
ENGINES = ("ckqti-ndrm3", "ckqti-ndrm2", "pyserini-bm25", "bm25s")
PYSERINI_CLI = ("import runpy, sys; from ckqti.bm25 import start_jvm; start_jvm(); "
                "runpy.run_module('pyserini.search.lucene', run_name='__main__', alter_sys=True)")


def one_line(text: str) -> str:
    return " ".join(text.split())


class CkqtiEngine:
    """``ckqti.api.run`` over a learned index built once in the work folder."""

    def __init__(self, name: str, model: str | None, corpus: Path, workdir: Path):
        from ckqti import api
        from indexer.format import MANIFEST

        self.name, self.index = name, workdir / name
        # in this process the kernels search (engine "auto" scans only until they would have loaded): a
        # process that writes run after run loads them once; the command column shows what a fresh
        # `ckqti run` chooses
        import retriever.kernel_saat  # noqa: F401
        if not (self.index / MANIFEST).is_file():
            api.index(corpus, self.index, model=model, progress=False)

    def run(self, queries: dict[str, str], files: dict[str, Path], out: Path, k: int, threads: int):
        from ckqti import api

        t0 = time.perf_counter()
        stats = api.run(self.index, files["jsonl"], out, k=k, threads=threads)
        return stats.seconds, time.perf_counter() - t0

    def command(self, files: dict[str, Path], out: Path, k: int, threads: int) -> list[str]:
        return [sys.executable, "-m", "ckqti", "run", "--index", str(self.index), "--queries", str(files["jsonl"]),
                "--out", str(out), "-k", str(k), "--threads", str(threads)]


class PyseriniEngine:
    """Pyserini's BM25 in this process: ``batch_search``, then its ``TrecWriter``."""

    name = "pyserini-bm25"

    def __init__(self, corpus: Path, workdir: Path):
        from ckqti import bm25
        from indexer.readers import read_corpus

        self.index = workdir / "lucene-bm25"
        if not bm25.is_lucene_index(self.index):
            bm25.build_bm25_index(((d.docid, d.full_text()) for d in read_corpus(corpus)), self.index)
        bm25.start_jvm()
        from pyserini.search.lucene import LuceneSearcher

        self.searcher = LuceneSearcher(str(self.index))  # k1 = 0.9, b = 0.4 unless set

    def run(self, queries: dict[str, str], files: dict[str, Path], out: Path, k: int, threads: int):
        from pyserini.output_writer import OutputFormat, get_output_writer

        t0 = time.perf_counter()
        qids = list(queries)
        hits = self.searcher.batch_search([queries[q] for q in qids], qids, k=k, threads=threads)
        t1 = time.perf_counter()
        with get_output_writer(str(out), OutputFormat.TREC, "w", max_hits=k, tag="Anserini") as writer:
            for qid in qids:
                writer.write(qid, hits.get(qid, []))
        return t1 - t0, time.perf_counter() - t0

    def command(self, files: dict[str, Path], out: Path, k: int, threads: int) -> list[str]:
        return [sys.executable, "-c", PYSERINI_CLI, "--index", str(self.index), "--topics", str(files["tsv"]),
                "--output", str(out), "--hits", str(k), "--bm25", "--threads", str(threads), "--batch-size", "64"]


class Bm25sEngine:
    """bm25s with its own tokenizer and Numba backend; the run written by f-strings."""

    name = "bm25s"

    def __init__(self, corpus: Path, workdir: Path, backend: str = "numba"):
        import bm25s

        from indexer.readers import read_corpus

        docs = list(read_corpus(corpus))
        self.docids = np.array([d.docid for d in docs], dtype=object)
        self.model = bm25s.BM25(k1=0.9, b=0.4, backend=backend)
        self.model.index(bm25s.tokenize([d.full_text() for d in docs], stopwords="en", show_progress=False),
                         show_progress=False)

    def run(self, queries: dict[str, str], files: dict[str, Path], out: Path, k: int, threads: int):
        import bm25s

        t0 = time.perf_counter()
        qids = list(queries)
        tokens = bm25s.tokenize([queries[q] for q in qids], stopwords="en", show_progress=False, return_ids=False)
        docs, scores = self.model.retrieve(tokens, k=min(k, len(self.docids)), n_threads=threads, show_progress=False)
        t1 = time.perf_counter()
        with open(out, "w", encoding="utf-8") as f:
            for qid, row, vals in zip(qids, docs, scores):
                keep = vals > 0
                f.writelines(f"{qid} Q0 {d} {r} {s:.6f} bm25s\n"
                             for r, (d, s) in enumerate(zip(self.docids[row[keep]], vals[keep].tolist()), 1))
        return t1 - t0, time.perf_counter() - t0

    def command(self, files, out, k, threads):
        return None  # bm25s has no command that writes a run


def make_engines(names, corpus: Path, workdir: Path, bm25s_backend: str = "numba") -> list:
    """The engines named, indexes built (or found) in ``workdir``."""
    made = {"ckqti-ndrm3": lambda: CkqtiEngine("ckqti-ndrm3", None, corpus, workdir),
            "ckqti-ndrm2": lambda: CkqtiEngine("ckqti-ndrm2", "ndrm2", corpus, workdir),
            "pyserini-bm25": lambda: PyseriniEngine(corpus, workdir),
            "bm25s": lambda: Bm25sEngine(corpus, workdir, bm25s_backend)}
    return [made[n]() for n in names]


def query_files(queries_path: Path, qrels: Path | None, workdir: Path) -> tuple[dict[str, str], dict[str, Path]]:
    """The queries (all, or those in ``qrels``) and the same queries as JSONL (ckqti) and TSV (Pyserini)."""
    from indexer.readers import read_qrels, read_queries

    queries = read_queries(queries_path)
    if qrels is not None:
        judged = read_qrels(qrels)
        queries = {q: t for q, t in queries.items() if q in judged}
    queries = {q: one_line(t) for q, t in queries.items()}
    files = {"jsonl": workdir / "queries.jsonl", "tsv": workdir / "queries.tsv"}
    files["jsonl"].write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    files["tsv"].write_text("".join(f"{q}\t{t}\n" for q, t in queries.items()))
    return queries, files


def time_command(argv: list[str], out: Path) -> float:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - t0
    if proc.returncode != 0 or not out.is_file():
        tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        raise CkqtiError(f"{shlex.join(argv[:4])} failed (exit {proc.returncode}): {tail[0]}")
    return took


def bench(engines, queries, files, depths, threads, rounds, workdir: Path, commands: bool = True) -> list[dict]:
    """Every engine at every depth and thread count: one untimed pass each, then ``rounds``
    interleaved timed rounds; a row per (engine, k, threads) with the medians."""
    (workdir / "runs").mkdir(parents=True, exist_ok=True)
    cases = [(e, k, t) for k in depths for t in threads for e in engines]
    timings: dict[tuple, list] = {(e.name, k, t): [] for e, k, t in cases}
    for r in range(rounds + 1):  # round 0 is the warm-up
        for eng, k, t in cases:
            out, cli_out = workdir / run_file(eng.name, k, t), workdir / run_file(eng.name, k, t, command=True)
            search_s, total_s = eng.run(queries, files, out, k, t)
            argv = eng.command(files, cli_out, k, t) if commands else None
            cli_s = time_command(argv, cli_out) if argv else None
            if r:
                timings[(eng.name, k, t)].append((search_s, total_s, cli_s))
    rows = []
    for (name, k, t), ts in timings.items():
        search_s, total_s = (float(np.median([x[i] for x in ts])) for i in range(2))
        cli = [x[2] for x in ts if x[2] is not None]
        n = len(queries)
        rows.append({"engine": name, "k": k, "threads": t, "queries": n, "rounds": len(ts),
                     "search_s": search_s, "rest_s": total_s - search_s, "total_s": total_s,
                     "qps_search": n / search_s, "qps_rest": n / max(total_s - search_s, 1e-9), "qps_total": n / total_s,
                     "command_s": float(np.median(cli)) if cli else None,
                     "run": run_file(name, k, t), "command_run": run_file(name, k, t, command=True) if cli else None})
    return rows


def run_file(engine: str, k: int, threads: int, command: bool = False) -> str:
    """Where a run is written, relative to the work folder (as the JSON records it)."""
    return f"runs/{engine}-k{k}-t{threads}{'-cli' if command else ''}.trec"


def add_quality(rows: list[dict], qrels: Path, workdir: Path) -> None:
    """nDCG@10 of each row's run (and of its command's run, both in ``workdir``) on ``qrels``."""
    from ckqti import api

    def ndcg(path):
        return float(api.evaluate(workdir / path, qrels, measures=["nDCG@10"]).results[0].mean["nDCG@10"])

    for row in rows:
        row["ndcg10"] = ndcg(row["run"])
        row["command_ndcg10"] = ndcg(row["command_run"]) if row["command_run"] else None


HEADER = ("| engine | k | threads | search q/s | rest q/s | in-process q/s | in-process s | command s | nDCG@10 |\n"
          "|---|---|---|---|---|---|---|---|---|")


def table_row(r: dict) -> str:
    cmd = f"{r['command_s']:.2f}" if r["command_s"] is not None else "-"
    return (f"| {r['engine']} | {r['k']} | {r['threads']} | {r['qps_search']:.0f} | {r['qps_rest']:.0f} | "
            f"{r['qps_total']:.0f} | {r['total_s']:.3f} | {cmd} | {r['ndcg10']:.4f} |")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--engines", type=names_from(ENGINES), default=",".join(ENGINES), help="engines, comma-separated")
    ap.add_argument("--depths", type=positive_ints, default="1000,100", help="run depths k, comma-separated")
    ap.add_argument("--threads", type=positive_ints, default="1,2", help="thread counts, comma-separated")
    ap.add_argument("--rounds", type=positive_int, default=3, help="interleaved timed rounds; columns are medians")
    ap.add_argument("--test-only", action="store_true", help="the claims in the test qrels only (300), not all 1,109")
    ap.add_argument("--no-commands", action="store_true", help="skip the fresh-process command timings")
    ap.add_argument("--bm25s-backend", choices=["numba", "numpy"], default="numba",
                    help="bm25s's backend (numpy: no Numba compilation, ~20 s, for quick checks)")
    ap.add_argument("--corpus", type=existing_file, default=DATA / "corpus.jsonl", help="corpus to index")
    ap.add_argument("--queries", type=existing_file, default=DATA / "queries.jsonl", help="queries to run")
    ap.add_argument("--qrels", type=existing_file, default=DATA / "qrels" / "test.tsv", help="qrels for nDCG@10")
    ap.add_argument("--workdir", type=output_dir, default=Path("out/bench_run_work"),
                    help="where the indexes (kept and reused) and the runs go")
    ap.add_argument("--out", type=output_file, default="out/bench_run.json", help="JSON to write")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    queries, files = query_files(args.queries, args.qrels if args.test_only else None, args.workdir)
    engines = make_engines(args.engines, args.corpus, args.workdir, args.bm25s_backend)
    rows = bench(engines, queries, files, args.depths, args.threads, args.rounds, args.workdir, not args.no_commands)
    add_quality(rows, args.qrels, args.workdir)
    print(HEADER)
    for row in rows:
        print(table_row(row))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    recorded = {**vars(args), **{name: shown(getattr(args, name)) for name in ("corpus", "queries", "qrels")}}
    del recorded["workdir"], recorded["out"]  # scratch, and this file: the run files are relative to the former
    args.out.write_text(json.dumps({"args": recorded, "rows": rows}, indent=2, default=str))


if __name__ == "__main__":
    sys.exit(run(main))
