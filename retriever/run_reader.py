"""Reading TREC run files (:mod:`retriever.runs`), plain or gzip: :func:`read_run` whole, :func:`read_run_queries`
holding only the queries kept, :func:`iter_run_queries` a query at a time. A well-formed run is read a block of lines
at a time, in columns by Arrow where the lines are plain; anything else is read line by line (:func:`run_rows`),
which names what is wrong."""

from __future__ import annotations

import gzip
import math
import zlib
from collections.abc import Container, Iterator
from pathlib import Path

import numpy as np

from ckqti.errors import InputError
from indexer.readers.formats import check_id, is_decimal, is_int, iter_lines, open_binary

# Bytes read_run's fast path reads at a time: a block's rows stay in cache (a run at k = 1,000,
# 1.1M lines: 1.4-1.5 s at 16-64 KB, 2.6-4.0 s at 16 MB, 2.8 s line by line; a loaded machine).
# A longer line is read line by line.
READ_BLOCK = 1 << 16
# Bytes of whole lines read_run's fast path gathers before reading them in columns (:func:`_add_columns`),
# and the fewest it reads so (below, Arrow's calls and the first import of pyarrow.csv, 0.09 s, cost more
# than they save).
ARROW_BLOCK = 1 << 22
ARROW_MIN = 1 << 20


def read_run(path: str | Path) -> dict[str, dict[str, float]]:
    """Read a TREC run file (plain or gzip) into ``qid -> {docid: score}``, queries in file order.

    A well-formed run is read a block of lines at a time (:func:`_read_well_formed`), in columns where
    the lines are plain; anything it cannot vouch for is read again line by line, which finds and names
    what is wrong.

    Raises:
        InputError: a line without 6 columns, a non-integer rank, a non-numeric or
            non-finite score, a docid repeated within a query (naming both lines), invalid
            UTF-8, or an empty file.
    """
    return read_run_queries(path)[0]


def read_run_queries(path: str | Path, keep: Container[str] | None = None) -> tuple[dict[str, dict[str, float]], list[str]]:
    """:func:`read_run` holding only the rankings of the queries in ``keep`` (None: all), and every query id of
    the file in order of first appearance, kept or not: ``(run, qids)``. Every line is checked as
    :func:`read_run` checks it, but a docid repeated within a query not kept is not looked for (that would
    hold its ranking). ``ckqti eval`` keeps the judged queries: a run of 30,000 queries at k = 1,000, 300 of
    them judged, took 3.6 GB read whole (~120 bytes a line), 0.3 GB so (session 44)."""
    seen: dict[str, None] = {}
    run = _read_well_formed(path, keep, seen)
    if run is None:
        seen.clear()
        run = _read_line_by_line(path, keep, seen)
    return run, list(seen)


def _read_well_formed(path: str | Path, keep: Container[str] | None = None,
                      seen: dict[str, None] | None = None) -> dict[str, dict[str, float]] | None:
    """:func:`read_run`'s result when the file is a run it reads without complaint, else ``None``
    (also for a line over :data:`READ_BLOCK` bytes; a file with carriage returns but no line feeds
    reads as one line of more than 6 columns). About 2x faster on a run at k = 1,000: its million
    lines are checked a block at a time, and 2x faster again read in columns (:func:`_add_columns`), as
    blocks of plain lines (single spaces, ASCII) of :data:`ARROW_MIN` bytes or more are. Only the queries
    in ``keep`` are held (None: all); ``seen`` gets every query id."""
    run: dict[str, dict[str, float]] = {}
    seen = {} if seen is None else seen
    rows, first = 0, True  # first: no line of the file has been read (a byte-order mark is the first's)
    try:
        with open_binary(path) as stream:
            for pieces in _line_blocks(stream):
                added = _add_pieces(run, pieces, first, keep, seen)
                if added is None:
                    return None
                rows, first = rows + added, False
    except (_LongLine, UnicodeDecodeError, EOFError, gzip.BadGzipFile, zlib.error):
        return None
    # fewer rows held than kept: a docid repeated in a query
    if not seen or rows != sum(map(len, run.values())):
        return None
    return run


class _LongLine(Exception):
    """A line over :data:`READ_BLOCK` bytes: left to the line-by-line reader."""


def _line_blocks(stream) -> Iterator[list[bytes]]:
    """The whole lines of binary ``stream``, read :data:`READ_BLOCK` bytes at a time, as lists of pieces of
    :data:`ARROW_BLOCK` bytes or more together, the last list the rest (the file's last line among them, with or
    without its line feed; empty when there is none). Raises :class:`_LongLine` for a line over :data:`READ_BLOCK`."""
    rest, pieces, size = b"", [], 0
    while chunk := stream.read(READ_BLOCK):
        block = rest + chunk
        cut = block.rfind(b"\n") + 1
        block, rest = block[:cut], block[cut:]
        if len(rest) > READ_BLOCK:
            raise _LongLine
        if block:
            pieces.append(block)
            size += len(block)
        if size >= ARROW_BLOCK:
            yield pieces
            pieces, size = [], 0
    if rest:
        pieces.append(rest)
    yield pieces


class NotGrouped(Exception):
    """:func:`iter_run_queries` cannot give the run a query at a time: a query's lines come back after another
    query's (concatenated runs), or the file is not one it reads without complaint (:func:`read_run_queries`
    reads it whole, naming what is wrong)."""


def iter_run_queries(path: str | Path, keep: Container[str] | None = None) -> Iterator[tuple[str, dict[str, float]]]:
    """:func:`read_run_queries`' rankings of a run whose lines are grouped by query (each query's together, as
    nearly every run's are), a query at a time in file order, those in ``keep`` only (None: all): a query is given
    once the block of lines after its last has been read, so what is held is about :data:`ARROW_BLOCK` bytes of
    lines and a query's ranking, not the run (~120 bytes a line read whole). Every line is checked as
    :func:`read_run` checks it; rankings are those :func:`read_run_queries` holds.

    Raises:
        NotGrouped: a kept query's lines come back after those of a later query (grouped within a block they
            read the same and pass), or anything :func:`read_run` would complain of, or a line
            :func:`read_run`'s fast path leaves to its line-by-line reader; some queries may have been given
            already. :func:`read_run_queries` then reads the file whole, as before.
    """
    done: set[str] = set()  # queries given (kept ones): one coming back means the run is not grouped
    held: tuple[str, dict[str, float]] | None = None  # the last query read, whose lines may go on
    any_line, first = False, True
    try:
        with open_binary(path) as stream:
            for pieces in _line_blocks(stream):
                run: dict[str, dict[str, float]] = {}
                seen: dict[str, None] = {}
                added = _add_pieces(run, pieces, first, keep, seen)
                pieces.clear()  # the block's bytes, not held while its queries are given
                if added is None or added != sum(map(len, run.values())):  # fewer held than added: a docid repeated
                    raise NotGrouped
                first, any_line = False, any_line or bool(seen)
                if held is not None and not _goes_on(held, run, seen):
                    done.add(held[0])
                    yield held
                if not done.isdisjoint(run):
                    raise NotGrouped
                # seen's order is the lines' (first appearances); the last query read may go on in the next block
                last = next(reversed(seen), None)
                for qid, docs in run.items():
                    if qid != last:
                        done.add(qid)
                        yield qid, docs
                held = (last, run[last]) if last in run else None
    except (_LongLine, UnicodeDecodeError, EOFError, gzip.BadGzipFile, zlib.error):
        raise NotGrouped from None
    if not any_line:
        raise NotGrouped  # read_run: no results in run file
    if held is not None:
        yield held


def _goes_on(held: tuple[str, dict[str, float]], run: dict[str, dict[str, float]], seen: dict[str, None]) -> bool:
    """Whether the query ``held`` (the last of a block) goes on in the next block's ``run`` (query ids ``seen`` in
    order), the ranking then joined in ``run``; :class:`NotGrouped` when it comes back after another query, or
    repeats a docid."""
    qid, docs = held
    if qid not in run:
        return False
    if next(iter(seen)) != qid:
        raise NotGrouped
    size = len(docs) + len(run[qid])
    docs.update(run[qid])
    if len(docs) != size:
        raise NotGrouped
    run[qid] = docs
    return True


def _add_pieces(run: dict[str, dict[str, float]], pieces: list[bytes], first: bool, keep: Container[str] | None,
                seen: dict[str, None]) -> int | None:
    """Add the rows of ``pieces`` (blocks of whole lines, each but the file's last ending in a line feed;
    the file's ``first`` lines among them) to ``run`` as :func:`_add_rows` does, in columns when together
    they are :data:`ARROW_MIN` bytes or more and plain (:func:`_add_columns`), else a piece at a time."""
    if pieces and sum(map(len, pieces)) >= ARROW_MIN:
        added = _add_columns(run, b"".join(pieces), keep, seen)
        if added is not None:
            return added
    total = 0
    for piece in pieces:
        added = _add_rows(run, piece, first, keep, seen)
        if added is None:
            return None
        total, first = total + added, False
    return total


# Bytes other than the line feed that Python's str.split (and so the line-by-line reader) may split an ASCII
# line at, or that Arrow's CSV reader would read otherwise (a carriage return ends a line there): all controls.
_CONTROLS = bytes(b for b in range(32) if b != 10)
# What float reads of the scores :func:`_add_columns` reads (is_decimal less inf and nan).
_SCORE = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"


def _add_columns(run: dict[str, dict[str, float]], block: bytes, keep: Container[str] | None = None,
                 seen: dict[str, None] | None = None) -> int | None:
    """:func:`_add_rows` of a block of whole lines (the last one may lack its line feed), read in columns by
    Arrow's CSV reader with a space delimiter (SciFact's 1,109 claims at k = 1,000, 1.1M lines: 0.36 s where
    :func:`_add_rows` took 0.76); ``None``, leaving ``run`` as it was, for anything else. The block must be
    ASCII without control characters but line feeds, so that its only column separator is the space (a tab,
    a carriage return or Unicode whitespace is left to :func:`_add_rows`), and Arrow must read every line as
    6 non-empty columns (two spaces in a row, a space at either end or a blank line would make an empty one):
    then ``str.split`` reads the same 6. Ranks must be ASCII digits (a sign is left to :func:`_add_rows`),
    scores :func:`is_decimal` and finite. Arrow's string-to-double parse and Python's ``float`` both round
    correctly: the same floats (tests/retriever/test_runs.py checks awkward ones). Arrow's arrays are read
    back with ``to_pylist`` and from buffers (``to_numpy`` imports pandas). Only the rows of queries in
    ``keep`` (None: all) are added, and counted; ``seen`` gets every query id."""
    if not block.isascii() or len(block.translate(None, _CONTROLS)) != len(block):
        return None
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as csv

    names = ["qid", "q0", "docid", "rank", "score", "tag"]
    try:
        table = csv.read_csv(
            pa.BufferReader(block),
            read_options=csv.ReadOptions(column_names=names, use_threads=False, block_size=max(len(block), 1 << 20)),
            parse_options=csv.ParseOptions(delimiter=" ", quote_char=False, escape_char=False, double_quote=False,
                                           newlines_in_values=False, ignore_empty_lines=False),
            convert_options=csv.ConvertOptions(column_types=dict.fromkeys(names, pa.large_string()),
                                               strings_can_be_null=False, quoted_strings_can_be_null=False))
        if table.num_rows != block.count(b"\n") + (not block.endswith(b"\n")):
            return None
        columns = [table.column(name).combine_chunks() for name in names]
        if any(pc.min(pc.binary_length(column)).as_py() == 0 for column in columns):
            return None
        qids, _, docids, ranks, scores, _ = columns
        if not (pc.all(pc.utf8_is_digit(ranks)).as_py() and pc.all(pc.match_substring_regex(scores, _SCORE)).as_py()):
            return None
        numbers = pc.cast(scores, pa.float64())
    except pa.ArrowException:
        return None
    values = np.frombuffer(numbers.buffers()[1], np.float64, len(numbers), numbers.offset)
    if not np.isfinite(values).all():  # 1e999
        return None
    return _add_queries(run, qids, docids, values, keep, seen)


def _add_queries(run: dict[str, dict[str, float]], qids, docids, values: np.ndarray, keep: Container[str] | None,
                 seen: dict[str, None] | None) -> int:
    """Add the rows of :func:`_add_columns`' checked columns (``qids`` and ``docids`` as Arrow strings) to
    ``run``, a query's rows at a time; those of queries in ``keep`` only (None: all); how many were added."""
    import pyarrow.compute as pc

    queries = pc.run_end_encode(qids)
    groups = list(zip(queries.values.to_pylist(), queries.run_ends.to_pylist()))
    if seen is not None:
        seen.update(dict.fromkeys(qid for qid, _ in groups))
    if keep is None:
        docs_in_order, values_in_order = docids.to_pylist(), values.tolist()
    added, start = 0, 0
    for qid, end in groups:
        if keep is None:
            ranked = zip(docs_in_order[start:end], values_in_order[start:end])
        elif qid in keep:  # only a kept query's docids become Python strings
            ranked = zip(docids.slice(start, end - start).to_pylist(), values[start:end].tolist())
        else:
            start = end
            continue
        docs = run.get(qid)
        if docs is None:
            docs = run[qid] = {}
        docs.update(ranked)
        added, start = added + end - start, end
    return added


_HIDDEN = bytes([*range(0x09), *range(0x0E, 0x1C), 0x7F])  # the ASCII controls str.split does not split at


def _add_rows(run: dict[str, dict[str, float]], block: bytes, first: bool, keep: Container[str] | None = None,
              seen: dict[str, None] | None = None) -> int | None:
    """Add the rows of whole lines ``block`` (the file's ``first`` lines: a byte-order mark is dropped)
    to ``run``, those of queries in ``keep`` only when given (``seen`` gets every query id); how many were
    added, or ``None`` when one is not what :func:`run_rows` reads without complaint."""
    text = block.decode("utf-8")
    if first and text.startswith("\ufeff"):
        text = text[1:]
    rows = [cols for cols in map(str.split, text.split("\n")) if cols]
    if any(len(cols) != 6 for cols in rows):
        return None
    ranks, scores = [cols[3] for cols in rows], [cols[4] for cols in rows]
    # what int and float read beyond is_int and is_decimal is an underscore or a digit of another script
    written = "".join(ranks) + "".join(scores)
    if "_" in written or not written.isascii():
        return None
    if len(block.translate(None, _HIDDEN)) < len(block) or not (
            text.isascii() or "".join([cols[0] + cols[2] for cols in rows]).isprintable()):
        return None  # an id may hold an invisible character (a NUL, a byte-order mark), which run_rows names
    try:
        for _ in map(int, ranks):  # only whether int reads every rank
            pass
        values = list(map(float, scores))
    except ValueError:
        return None
    if not all(map(math.isfinite, values)):
        return None
    seen = {} if seen is None else seen
    added = 0
    for cols, score in zip(rows, values):
        docs = run.get(cols[0])
        if docs is None:
            seen[cols[0]] = None
            if keep is not None and cols[0] not in keep:
                continue
            docs = run[cols[0]] = {}
        docs[cols[2]] = score
        added += 1
    return added


def _read_line_by_line(path: str | Path, keep: Container[str] | None = None,
                       seen: dict[str, None] | None = None) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    seen = {} if seen is None else seen
    for number, qid, docid, score in run_rows(path):
        seen[qid] = None
        if keep is not None and qid not in keep:
            continue
        docs = run.setdefault(qid, {})
        if docid in docs:
            first = next(n for n, q, d, _ in run_rows(path) if (q, d) == (qid, docid))
            raise InputError(f"query {qid!r} retrieves doc {docid!r} twice (first at line {first})", path, number)
        docs[docid] = score
    if not seen:
        raise InputError("no results in run file", path)
    return run


def run_rows(path: str | Path) -> Iterator[tuple[int, str, str, float]]:
    """Each line of a run that is not blank as ``(line number, qid, docid, score)``, checked as trec_eval would
    read it: an :class:`~ckqti.errors.InputError` naming the file and line for the first that is not a run's."""
    for number, line in iter_lines(path):
        cols = line.split()
        if not cols:
            continue
        if len(cols) != 6:
            raise InputError(f"expected 6 run columns (qid Q0 docid rank score tag), found {len(cols)}", path, number)
        if not (cols[0] + cols[2]).isprintable():  # a NUL ends a docid for trec_eval (C): "d\0x" was judged as "d"
            check_id(cols[0], "query id", path, number), check_id(cols[2], "docid", path, number)
        # Python's int and float also take "1_0" (trec_eval: 1) and other scripts' digits
        if not is_int(cols[3]):
            raise InputError(f"bad rank {cols[3]!r} (column 4, an integer)", path, number)
        if not is_decimal(cols[4]):
            raise InputError(f"bad score {cols[4]!r} (column 5, a decimal number)", path, number)
        score = float(cols[4])
        if not math.isfinite(score):
            raise InputError(f"score {cols[4]!r} is not finite", path, number)
        yield number, cols[0], cols[2], score
