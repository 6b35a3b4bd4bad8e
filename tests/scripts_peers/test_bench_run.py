"""scripts/bench_run.py on a tiny SciFact slice: every engine's run parses, holds at most k lines a
query (k where the engine found that many), and the JSON rows carry the timings and nDCG@10."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import scripts.bench_run as bench
from indexer.readers import read_qrels, read_queries
from retriever.runs import read_run

SCIFACT = Path(bench.DATA)
K = 5


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    """8 test claims, the abstracts judged for them plus 30 others, and their qrels."""
    folder = tmp_path_factory.mktemp("tiny")
    qrels = dict(list(read_qrels(SCIFACT / "qrels" / "test.tsv").items())[:8])
    wanted = {d for judged in qrels.values() for d in judged}
    lines, others = [], 0
    with open(SCIFACT / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            docid = json.loads(line)["_id"]
            if docid in wanted or others < 30:
                others += docid not in wanted
                lines.append(line)
    queries = read_queries(SCIFACT / "queries.jsonl")
    files = {"corpus": folder / "corpus.jsonl", "queries": folder / "queries.jsonl", "qrels": folder / "qrels.tsv"}
    files["corpus"].write_text("".join(lines))
    files["queries"].write_text("".join(json.dumps({"_id": q, "text": queries[q]}) + "\n" for q in qrels))
    files["qrels"].write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{g}\n" for q, judged in qrels.items() for d, g in judged.items()))
    return files


def bench_args(tiny, tmp_path, engines: str, *extra: str, threads: str = "1,2") -> list[str]:
    return ["--engines", engines, "--depths", str(K), "--threads", threads, "--rounds", "1",
            "--corpus", str(tiny["corpus"]), "--queries", str(tiny["queries"]), "--qrels", str(tiny["qrels"]),
            "--workdir", str(tmp_path / "work"), "--out", str(tmp_path / "bench.json"), *extra]


def check_rows(rows: list[dict], engines: list[str], qids: set[str], threads=(1, 2)) -> None:
    queries = len(qids)
    assert sorted((r["engine"], r["threads"]) for r in rows) == sorted((e, t) for e in engines for t in threads)
    for row in rows:
        assert row["k"] == K and row["queries"] == queries and row["rounds"] == 1
        assert row["search_s"] > 0 and row["total_s"] >= row["search_s"]
        assert row["qps_total"] == pytest.approx(queries / row["total_s"])
        assert 0 < row["ndcg10"] <= 1
        for path in filter(None, (row["run"], row["command_run"])):
            lines = Counter(qid for qid, docs in read_run(path).items() for _ in docs)
            assert set(lines) <= qids
            assert max(lines.values()) == K and all(1 <= n <= K for n in lines.values())


def test_ckqti_and_bm25s_runs_and_rows(tiny, tmp_path):
    bench.main(bench_args(tiny, tmp_path, "ckqti-ndrm2,bm25s", "--no-commands", "--bm25s-backend", "numpy"))
    rows = json.loads((tmp_path / "bench.json").read_text())["rows"]
    check_rows(rows, ["ckqti-ndrm2", "bm25s"], set(read_queries(tiny["queries"])))
    assert all(r["command_s"] is None and r["command_run"] is None for r in rows)
    ckqti = read_run(next(r["run"] for r in rows if r["engine"] == "ckqti-ndrm2"))
    assert len(ckqti) == 8  # every claim shares a term with some abstract


@pytest.mark.slow
def test_pyserini_in_process_and_as_a_command(tiny, tmp_path):
    """In a child process: the JVM then never starts in pytest's process (see ckqti.bm25). One thread
    count: each command starts a JVM (~10 s)."""
    script = Path(bench.__file__)
    proc = subprocess.run([sys.executable, str(script), *bench_args(tiny, tmp_path, "pyserini-bm25", threads="2")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads((tmp_path / "bench.json").read_text())["rows"]
    check_rows(rows, ["pyserini-bm25"], set(read_queries(tiny["queries"])), threads=(2,))
    assert all(r["command_s"] > 0 and r["command_ndcg10"] == pytest.approx(r["ndcg10"], abs=1e-3) for r in rows)
