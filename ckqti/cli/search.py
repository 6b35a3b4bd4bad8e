"""``ckqti search`` (one query, hits with snippets) and ``ckqti run`` (a batch of queries to a TREC run)."""

from __future__ import annotations

import contextlib
import threading

import click

from ckqti import api
from ckqti.cli.base import command
from ckqti.cli.notes import count_queries, echo, note, skipped_reasons
from ckqti.cli.options import (
    POSITIVE,
    OutPath,
    PathArg,
    channel_option,
    check_anytime_options,
    index_option,
    mode_options,
    queries_format_of,
    queries_format_option,
    quiet_option,
)
from ckqti.json_form import json_text
from ckqti.terminal import columns_of, decoded_argument, repaired, visible

SNIPPET_COLUMNS = 100  # terminal columns of a search hit's title and snippet lines (cut between words)


@command("search")
@click.argument("query", nargs=-1, required=True)
@index_option
@click.option("-k", type=POSITIVE, default=10, show_default=True, help="Results.")
@click.option("--json", "as_json", is_flag=True, help="JSON output for programs.")
@mode_options
@channel_option
@quiet_option
def search_cmd(query, index_path, k, as_json, mode, budget, slack, model, channel_weights):
    """Search an index with QUERY (its words quoted or not)."""
    check_anytime_options(mode, slack)
    from ckqti.text import non_ascii_readings
    from retriever.results import search_json

    query = decoded_argument(" ".join(query))  # bytes that are not UTF-8 would go into --json as lone surrogates
    # one query a process: exact mode scans it with numpy, which answers before Numba would have loaded its kernels
    searcher = api.open_searcher(index_path, mode, budget, model, channel_weights=channel_weights, slack=slack,
                                 engine="auto")
    with note_if_slow(SLOW_SEARCH_AFTER, compiling_note, lambda: api.kernels_compiling()):
        res = searcher.search(query, k)
    if readings := non_ascii_readings(query, searcher.index.analyzer):
        shown = "; ".join(f"{w} as {' '.join(terms) or 'nothing'}" for w, terms in readings)
        note(f"note: the analyzer reads ASCII letters and digits only: {shown}")
    if res.oov:
        note(f"note: not in the index vocabulary, skipped: {' '.join(res.oov)}")
    if res.unweighted:
        note(unweighted_note(searcher, res.unweighted))
    if unstored := searcher.unstored([t for t in res.terms if t not in res.unweighted]):
        cap = searcher.index.manifest.max_doc_terms
        past = f" (a term only past a document's first {cap:,} terms, all the model reads, is not indexed)" if cap else ""
        note(f"note: in the vocabulary but in no document's postings: {' '.join(unstored)}{past}")
    if as_json:
        click.echo(json_text(search_json(searcher, res)))
        return
    for line in search_lines(searcher, res):
        echo(line)


SLOW_SEARCH_AFTER = 3.0  # seconds
NOTE_POLL = 0.25  # seconds between looks at whether a slow search has begun compiling its kernels
SLOW_SEARCH_NOTE = ("note: still searching: compiling the search kernels, as the first search of its kind after installing ckqti "
                    "does (10-20 s on 2 cores; Numba keeps them for later searches in $NUMBA_CACHE_DIR, beside ckqti's modules or in "
                    "~/.cache/numba, the first it can write)")
SLOW_RUN_NOTE = ("note: compiling the batch search kernels, as the first run of its kind after installing ckqti does "
                 "(10-20 s on 2 cores; Numba keeps them for later runs in $NUMBA_CACHE_DIR, beside ckqti's modules or in "
                 "~/.cache/numba, the first it can write)")
NOWHERE = ("Numba can keep them nowhere (it can write neither beside ckqti's modules nor in ~/.cache/numba): set "
           "NUMBA_CACHE_DIR to a writable folder")
UNCACHED_SEARCH_NOTE = ("note: still searching: compiling the search kernels (10-20 s on 2 cores), as every search of its kind "
                        "here does: " + NOWHERE)
UNCACHED_RUN_NOTE = "note: compiling the batch search kernels (10-20 s on 2 cores), as every run here does: " + NOWHERE


def compiling_note(batch: bool = False) -> str:
    """The note for a search (``batch``: a run) that compiles its kernels: where Numba keeps them for
    later processes or, from a read-only install beside a home without a writable ~/.cache, that it
    keeps them nowhere (the cached-for-later note misled there: every process compiles them again)."""
    if api.kernels_cached(batch):
        return SLOW_RUN_NOTE if batch else SLOW_SEARCH_NOTE
    return UNCACHED_RUN_NOTE if batch else UNCACHED_SEARCH_NOTE


@contextlib.contextmanager
def note_if_slow(seconds: float, text, compiling):
    """Print ``text`` (or what ``text()`` gives then) on stderr once the block has run ``seconds`` and
    ``compiling()`` says the kernels are being compiled, looked at every :data:`NOTE_POLL` s from then on (a first search
    compiles Numba kernels for 10-20 s in silence, which looks like a hang; a run may read its index
    and queries for longer than ``seconds`` before that; a slow block that compiles nothing is no news)."""
    done = threading.Event()
    ctx = click.get_current_context(silent=True)  # the watcher's note reads the command's -q/--quiet there

    def watch() -> None:
        if done.wait(seconds):
            return
        while not compiling():
            if done.wait(NOTE_POLL):
                return
        with ctx.scope(cleanup=False) if ctx is not None else contextlib.nullcontext():
            note(text() if callable(text) else text)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()  # its note, if any, comes before what follows the block


def unweighted_note(searcher, terms: list[str]) -> str:
    """Why known query terms add nothing (:meth:`retriever.search.Searcher.unweighted_reason`)."""
    return f"note: adds nothing to any score, skipped: {' '.join(terms)} ({searcher.unweighted_reason(terms)})"


def search_lines(searcher, res) -> list[str]:
    from retriever.snippets import clip, snippet

    if not res.hits:
        return ["no documents match"]
    lines = []
    score_width = max(9, *(len(f"{h.score:.4f}") for h in res.hits))  # 10,000 or more: wider, the same for every row
    for h in res.hits:
        doc = searcher.document(h)
        # mojibake repaired in what is shown only (a whole long document costs ftfy ~0.7 ms a KB); the
        # analyzer that marks query terms reads ASCII alone, which the repair leaves where it was
        text = repaired(snippet(doc["text"], set(res.terms), searcher.index.analyzer, mark=("[", "]"),  # query terms marked
                                columns=SNIPPET_COLUMNS))
        title = repaired(clip(" ".join(doc["title"].split()), SNIPPET_COLUMNS))  # a title's line breaks would break the columns
        docid = visible(h.docid)  # as echo prints it, padded to 14 columns (a CJK character takes two)
        head = f"{h.rank:>3}  {docid}{' ' * (14 - columns_of(docid))} {h.score:{score_width}.4f}  "
        lines.append(head + (title or text))
        if title:
            lines.append(" " * columns_of(head) + text)
    return lines


@command("run")
@index_option
@click.option("--queries", required=True, type=PathArg(), help="Queries file (TSV, JSONL, TREC, SMART).")
@click.option("--out", required=True, type=OutPath(),
              help="TREC run file to write (an existing file is replaced only if it is a run, or empty).")
@click.option("-k", type=POSITIVE, default=1000, show_default=True, help="Documents per query.")
@click.option("--threads", type=POSITIVE, default=1, show_default=True, help="Search threads.")
@queries_format_option
@click.option("--format", "fmt", type=click.Choice(["tsv", "jsonl", "trec", "smart"]), default=None, hidden=True,
              help="The old name of --queries-format.")
@click.option("--tag", default="ckqti", show_default=True, help="Run tag, the last column (no whitespace).")
@mode_options
@channel_option
@quiet_option
def run_cmd(index_path, queries, out, k, threads, queries_format, fmt, tag, mode, budget, slack, model,
            channel_weights):
    """Batch fullrank: search every query and write a TREC run."""
    check_anytime_options(mode, slack)
    fmt = queries_format_of(fmt, queries_format)
    with note_if_slow(SLOW_SEARCH_AFTER, lambda: compiling_note(batch=True), lambda: api.kernels_compiling(batch=True)):
        s = api.run(index_path, queries, out, k, threads, mode, budget, fmt, tag, model, channel_weights, slack)
    if s.skipped:
        note(f"note: {count_queries(len(s.skipped))} skipped ({skipped_reasons(s.skipped, s.reasons)})")
    if s.empty:
        why = "; ".join(f"{q}: {r}" for q, r in list(s.empty.items())[:3]) + ("; ..." if len(s.empty) > 3 else "")
        note(f"note: {count_queries(len(s.empty))} retrieved nothing ({why})")
    if not s.documents:
        note("note: no query retrieved a document; the run file is empty")
    rate = f"{s.qps:,.0f}" if s.qps >= 10 else f"{s.qps:.2g}"  # a first run's compiling: "0.083 q/s", not "0 q/s"
    echo(f"{s.searched} of {count_queries(s.searched + len(s.skipped))} searched in {s.seconds:.2f}s ({rate} q/s) -> {out}"
         if s.skipped else f"{count_queries(s.searched)} in {s.seconds:.2f}s ({rate} q/s) -> {out}")
