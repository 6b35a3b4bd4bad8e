"""scripts/bench_one_query.py on 50 sample documents, one timed process a row: the rows hold what the
processes printed and measured, the table and the JSON agree with them, and a process that prints fewer
than k hits, fails, or searches without the engine its row names stops the script."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import scripts.bench_one_query as bench
from ckqti import api
from scripts.args import run

SAMPLE = Path(bench.ROOT) / "ckqti" / "data" / "sample" / "corpus.jsonl"
QUERY = "cost of interior concrete flooring"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """The sample's first 30 documents and the first 20 others on concrete or flooring (so that the query
    matches more than 10 documents for every engine)."""
    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)
    docs = [json.loads(line) for line in lines]
    about = [i for i, d in enumerate(docs) if i >= 30 and any(w in d["text"].lower() for w in ("concrete", "flooring"))]
    corpus = tmp_path_factory.mktemp("tiny") / "corpus.jsonl"
    corpus.write_text("".join(lines[i] for i in [*range(30), *about[:20]]), encoding="utf-8")
    return corpus


@pytest.fixture
def tiny_corpora(tiny, monkeypatch):
    monkeypatch.setattr(bench, "CORPORA", {"tiny": (tiny, QUERY)})


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_rows_hold_what_each_process_printed_and_measured(tiny_corpora, tmp_path, capsys):
    argv = ["--corpora", "tiny", "--engines", "ckqti,ckqti-numba,bm25s", "--repeats", "1",
            "--workdir", str(tmp_path / "work"), "--out", str(tmp_path / "b.json")]
    bench.main(argv)
    result = json.loads((tmp_path / "b.json").read_text())
    assert result["command"] == "python scripts/bench_one_query.py " + " ".join(argv)
    rows = {r["engine"]: r for r in result["rows"]}
    assert list(rows) == ["ckqti", "ckqti-numba", "bm25s"]
    assert rows["ckqti"]["command"].startswith("python -m ckqti search 'cost of interior concrete flooring' --index ")
    assert rows["ckqti"]["program"] is None and rows["bm25s"]["program"] == bench.BM25S
    assert rows["bm25s"]["command"].startswith("python -c PROGRAM ")
    for row in rows.values():
        assert row["corpus"] == "tiny" and row["processes"] == 1 and row["hits"] == 10 == len(row["top"])
        assert row["median_s"] == row["min_s"] == row["wall_s"][0] > 0
        assert row["median_mib"] == row["max_mib"] == row["peak_mib"][0] > 0
    # bytecode compiled once by the untimed processes, read by the timed ones (as from an installed package)
    assert list((tmp_path / "work" / "pycache").rglob("ckqti/cli/__init__.*.pyc"))
    [index] = (tmp_path / "work").glob("tiny-*/ckqti")
    expected = [h.docid for h in api.search(QUERY, index, k=10).hits]
    assert rows["ckqti"]["top"] == rows["ckqti-numba"]["top"] == expected
    docs = map(json.loads, Path(bench.CORPORA["tiny"][0]).read_text().splitlines())
    texts = {d["_id"]: d["text"].lower() for d in docs}
    assert all(any(w in texts[d] for w in ("cost", "interior", "concrete", "flooring")) for d in rows["bm25s"]["top"])
    # Numba and its LLVM take over 100 MiB here (205 against 79 on the sample): a row that did not load them,
    # or peaks that were not each process's own, would not show it
    assert rows["ckqti-numba"]["max_mib"] > rows["ckqti"]["max_mib"] + 50
    table = capsys.readouterr().out.strip().splitlines()
    assert table[:2] == bench.HEADER.splitlines()
    for line, row in zip(table[2:], result["rows"], strict=True):
        corpus, engine, median_s, min_s, median_mib, max_mib, hits = cells(line)
        assert (corpus, engine, int(hits)) == ("tiny", row["engine"], 10)
        assert float(median_s) == pytest.approx(row["median_s"], abs=5e-4)
        assert float(min_s) == pytest.approx(row["min_s"], abs=5e-4)
        assert float(median_mib) == pytest.approx(row["median_mib"], abs=0.5)
        assert float(max_mib) == pytest.approx(row["max_mib"], abs=0.5)


@pytest.mark.slow
def test_pyserini_row(tiny_corpora, tmp_path):
    """Its process starts a JVM (about 6 s with Pyserini's imports): one timed process, apart from the fast test."""
    bench.main(["--corpora", "tiny", "--engines", "pyserini", "--repeats", "1",
                "--workdir", str(tmp_path / "work"), "--out", str(tmp_path / "b.json")])
    [row] = json.loads((tmp_path / "b.json").read_text())["rows"]
    assert row["engine"] == "pyserini" and row["hits"] == 10 == len(set(row["top"]))
    assert row["median_s"] == row["wall_s"][0] > 0 and row["max_mib"] == row["peak_mib"][0] > 0


def test_a_query_matching_fewer_than_k_documents_is_exit_status_1(tiny_corpora, tmp_path, capsys):
    code = run(lambda: bench.main(["--corpora", "tiny", "--engines", "ckqti", "--repeats", "1", "--query", "concrete",
                                   "-k", "30", "--workdir", str(tmp_path / "work"), "--out", str(tmp_path / "b.json")]))
    assert code == 1
    assert "hits, not 30: pick a query that more documents match" in capsys.readouterr().err
    assert not (tmp_path / "b.json").exists()


def test_each_peak_is_the_childs_own_not_its_parents():
    """This process holds 300 MiB more while it measures: a child forked from it straight away would start
    its peak there (Linux keeps it across exec)."""
    held = np.ones(300 << 20, dtype=np.uint8)
    try:
        small = bench.measure([sys.executable, "-c", "print('small')"])
        large = bench.measure([sys.executable, "-c", "b = b'x' * (200 << 20); print(len(b))"])
    finally:
        del held
    assert (small.returncode, small.stdout) == (0, "small\n")
    assert small.peak_kib < 60 * 1024
    assert large.peak_kib > 200 * 1024 and large.stdout == f"{200 << 20}\n"


def test_measure_keeps_a_childs_exit_status_and_output():
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    sample = bench.measure([sys.executable, "-c", code])
    assert (sample.returncode, sample.stdout, sample.stderr) == (3, "out\n", "err\n")
    assert sample.wall_s > 0


def sample(wall: float, mib: float, hits: list[str], stderr: str = "") -> bench.Sample:
    return bench.Sample(wall, int(mib * 1024), 0, "\n".join(hits) + "\n", stderr)


def test_rows_are_medians_min_and_max_of_the_timed_rounds_interleaved(monkeypatch):
    """Round 0 is untimed; rounds run engine after engine; seconds: median and min, MiB: median and max."""
    hits = [f"d{i}" for i in range(3)]
    scripted = {"a": iter([sample(100, 900, hits), sample(3, 10, hits), sample(1, 30, hits), sample(8, 11, hits)]),
                "b": iter([sample(100, 900, hits), sample(5, 50, hits), sample(4, 40, hits), sample(9, 60, hits)])}
    order = []

    def measured(argv, env=None):
        order.append(argv[0])
        return next(scripted[argv[0]])

    monkeypatch.setattr(bench, "measure", measured)
    rows = bench.bench({"a": ["a"], "b": ["b"]}, repeats=3, k=3, corpus="c")
    assert order == ["a", "b"] * 4
    a, b = rows
    assert (a["processes"], a["wall_s"], a["median_s"], a["min_s"]) == (3, [3, 1, 8], 3, 1)  # mean 4
    assert (a["median_mib"], a["max_mib"]) == (11, 30)  # mean 17
    assert (b["median_s"], b["min_s"], b["median_mib"], b["max_mib"]) == (5, 4, 50, 60)
    assert a["top"] == hits and a["hits"] == 3
    assert bench.table_row(a) == "| c | a | 3.000 | 1.000 | 11 | 30 | 3 |"


@pytest.mark.parametrize("samples, message", [
    ({"bm25s": [sample(1, 1, ["d1", "d2"])]}, "bm25s .* printed 2 hits, not 3"),
    ({"bm25s": [bench.Sample(1, 1, 2, "", "Traceback\nboom\n")]}, r"bm25s .* failed \(exit 2\): boom"),
    ({"ckqti-numba": [sample(1, 1, ["d1", "d2", "d3"])]}, "did not load Numba"),
    ({"ckqti": [sample(1, 1, ["d1", "d2", "d3"])],
      "ckqti-numba": [sample(1, 1, ["d1", "d3", "d2"], bench.NUMBA_LOADED)]}, "different top 3s"),
    ({"bm25s": [sample(1, 1, ["d1", "d2", "d3"]), sample(1, 1, ["d1", "d2", "d4"])]}, "another top 3"),
])
def test_a_process_that_does_not_answer_as_its_row_says_stops_the_bench(monkeypatch, samples, message):
    scripted = {engine: iter(s * 2) for engine, s in samples.items()}
    monkeypatch.setattr(bench, "hits_of", lambda engine, stdout: stdout.split())
    monkeypatch.setattr(bench, "measure", lambda argv, env=None: next(scripted[argv[0]]))
    with pytest.raises(bench.CkqtiError, match=message):
        bench.bench({e: [e] for e in samples}, repeats=1, k=3)


def test_hits_are_read_from_the_hit_lines_not_from_a_titles_second_line():
    out = ("  1  d1               12.5000  A title\n"
           + " " * 32 + "12  34567  text that starts with numbers\n"
           + "  2  doc-2            -1.0000  ... text [marked] ...\n"
           + " 10  d10               3.2500  text\n")
    assert bench.hits_of("ckqti", out) == ["d1", "doc-2", "d10"]
    assert bench.hits_of("ckqti", "no documents match\n") == []
    assert bench.hits_of("bm25s", "d1\nd2\n") == ["d1", "d2"]
