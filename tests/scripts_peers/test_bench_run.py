"""scripts/bench_run.py on a tiny SciFact slice: every engine's run parses, holds at most k lines a
query (k where the engine found that many), and the JSON rows carry the timings and nDCG@10."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import scripts.bench_run as bench
from indexer.readers import read_qrels, read_queries
from retriever.run_reader import read_run

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


def check_rows(rows: list[dict], engines: list[str], qids: set[str], workdir: Path, threads=(1, 2)) -> None:
    queries = len(qids)
    assert sorted((r["engine"], r["threads"]) for r in rows) == sorted((e, t) for e in engines for t in threads)
    for row in rows:
        assert row["k"] == K and row["queries"] == queries and row["rounds"] == 1
        assert row["search_s"] > 0 and row["total_s"] >= row["search_s"]
        assert row["qps_total"] == pytest.approx(queries / row["total_s"])
        assert 0 < row["ndcg10"] <= 1
        for path in filter(None, (row["run"], row["command_run"])):
            lines = Counter(qid for qid, docs in read_run(workdir / path).items() for _ in docs)
            assert set(lines) <= qids
            assert max(lines.values()) == K and all(1 <= n <= K for n in lines.values())


def test_ckqti_and_bm25s_runs_and_rows(tiny, tmp_path):
    bench.main(bench_args(tiny, tmp_path, "ckqti-ndrm2,bm25s", "--no-commands", "--bm25s-backend", "numpy"))
    rows = json.loads((tmp_path / "bench.json").read_text())["rows"]
    check_rows(rows, ["ckqti-ndrm2", "bm25s"], set(read_queries(tiny["queries"])), tmp_path / "work")
    assert all(r["command_s"] is None and r["command_run"] is None for r in rows)
    ckqti = read_run(tmp_path / "work" / next(r["run"] for r in rows if r["engine"] == "ckqti-ndrm2"))
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
    check_rows(rows, ["pyserini-bm25"], set(read_queries(tiny["queries"])), tmp_path / "work", threads=(2,))
    assert all(r["command_s"] > 0 and r["command_ndcg10"] == pytest.approx(r["ndcg10"], abs=1e-3) for r in rows)


class ScriptedEngine:
    """An engine whose run and command take the times given, in turn (the warm-up's first)."""

    def __init__(self, name: str, times: list[tuple[float, float]], command: bool):
        self.name, self.times, self.has_command = name, iter(times), command

    def run(self, queries, files, out, k, threads):
        return next(self.times)

    def command(self, files, out, k, threads):
        return ["cmd", str(out)] if self.has_command else None


def test_rows_are_medians_of_the_timed_rounds_without_the_warm_up(tmp_path, monkeypatch):
    """search, rest = total - search and the command are each the median of the rounds after the untimed
    first; q/s are the queries over those medians."""
    commands = iter([100.0, 10.0, 1.0, 4.0])  # median 4, mean 5
    monkeypatch.setattr(bench, "time_command", lambda argv, out: next(commands))
    engine = ScriptedEngine("e", [(100.0, 100.0), (1.0, 4.0), (3.0, 5.0), (2.0, 9.0)], command=True)
    [row] = bench.bench([engine], {q: "text" for q in "abcdefghij"}, {}, [K], [1], 3, tmp_path)
    assert (row["rounds"], row["queries"]) == (3, 10)
    assert (row["search_s"], row["total_s"], row["rest_s"], row["command_s"]) == (2.0, 5.0, 3.0, 4.0)
    assert (row["qps_search"], row["qps_rest"], row["qps_total"]) == pytest.approx((5.0, 10 / 3, 2.0))
    assert bench.table_row({**row, "ndcg10": 0.5}) == "| e | 5 | 1 | 5 | 3 | 2 | 5.000 | 4.00 | 0.5000 |"


def test_query_files_keep_the_judged_queries_on_one_line_each(tmp_path):
    queries, qrels = tmp_path / "queries.tsv", tmp_path / "qrels.tsv"
    queries.write_text("q1\tfirst  query\nq2\tsecond\nq3\tthird\n")
    qrels.write_text("q3\td1\t1\nq1\td2\t1\n")
    got, files = bench.query_files(queries, qrels, tmp_path)
    assert got == {"q1": "first query", "q3": "third"}
    assert read_queries(files["jsonl"]) == read_queries(files["tsv"]) == got


def test_a_command_that_fails_is_an_error_even_when_it_wrote_its_run(tmp_path):
    out = tmp_path / "run.trec"
    with pytest.raises(bench.CkqtiError, match="exit 3"):
        bench.time_command([sys.executable, "-c", f"open({str(out)!r}, 'w'); raise SystemExit(3)"], out)


def test_bm25s_writes_only_the_documents_a_query_matches(tmp_path):
    """bm25s returns k documents whatever they score; its run keeps those scoring above 0, as the other
    engines' runs hold only matching documents (a query matching 1 of 4 documents: 1 line at k = 3)."""
    corpus = tmp_path / "c.tsv"
    corpus.write_text("a\tzebra stripes\nb\tlion mane\nc\teagle wings\nd\tshark fins\n")
    engine = bench.Bm25sEngine(corpus, tmp_path, backend="numpy")
    engine.run({"q1": "zebra", "q2": "lion eagle"}, {}, tmp_path / "r.trec", 3, 1)
    assert {q: sorted(docs) for q, docs in read_run(tmp_path / "r.trec").items()} == {"q1": ["a"], "q2": ["b", "c"]}


def test_each_rows_ndcg_is_of_its_own_run_and_its_commands(tmp_path):
    """``add_quality``: nDCG@10 of the in-process run and, apart, of the command's run (a command that wrote
    another ranking shows its own nDCG@10)."""
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "a.trec").write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d2 2 1.0 x\n")
    (tmp_path / "runs" / "a-cli.trec").write_text("q1 Q0 d2 1 2.0 x\nq1 Q0 d1 2 1.0 x\n")
    rows = [{"run": "runs/a.trec", "command_run": "runs/a-cli.trec"}, {"run": "runs/a-cli.trec", "command_run": None}]
    bench.add_quality(rows, qrels, tmp_path)
    assert rows[0]["ndcg10"] == pytest.approx(1.0) and rows[0]["command_ndcg10"] == pytest.approx(1 / math.log2(3))
    assert rows[1]["ndcg10"] == pytest.approx(1 / math.log2(3)) and rows[1]["command_ndcg10"] is None
