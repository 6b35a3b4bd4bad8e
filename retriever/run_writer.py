"""Writing TREC run files (:mod:`retriever.runs`): :func:`write_run` ranks results in memory, :func:`write_ranked_run`
writes rankings already in trec_eval's order (a search's), each query's rows checked at once, long queries formatted
in Arrow, gzip when the name ends in ``.gz``; the file is replaced atomically."""

from __future__ import annotations

import gzip
import itertools
import math
import sys
from collections.abc import Iterable, Mapping
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from ckqti.files import replacing
from retriever.runs import WHITESPACE, Ranking, RunValueError, check_token, trec_order

GZIP_LEVEL = 6
# A query of this many lines or more is formatted in Arrow (:meth:`_QueryLines._arrow_lines`; SciFact's 1,109
# claims at k = 1,000: 0.5 s where f-strings took 1.25), a shorter one in Python (Arrow's calls cost
# tens of microseconds a query).
ARROW_LINES = 64
# Scores Arrow's cast writes as ``repr`` does (shortest round-trip digits, positional): not integral
# (Arrow drops ``.0``), at least 1e-4 in size (``repr`` turns exponential below) and below 1e9 (Arrow
# turns exponential from about 1e11 on, in fewer characters than ``repr``). ``repr`` writes the rest.
ARROW_SCORES = (1e-4, 1e9)


def write_run(path: str | Path, results: Mapping[str, Ranking] | Iterable[tuple[str, Ranking]], tag: str) -> None:
    """Write a TREC run file (gzip when ``path`` ends in ``.gz``), replacing ``path`` atomically.

    Args:
        path: the run file; parent folders are created.
        results: ``qid -> [(docid, score), ...]`` (or ``qid -> {docid: score}``), or an iterable
            of such ``(qid, ranking)`` pairs (a generator is written as it goes: a large run need
            not be held in memory); queries are written in the given order, documents in
            :func:`trec_order`, ranks from 1.
            Scores are written with ``repr`` so they read back exactly.
        tag: the run tag (last column), without whitespace.

    Raises:
        RunValueError: (an :class:`~ckqti.errors.InputError` and a ValueError) a tag, qid or docid that is
            empty, not a string or holds whitespace; a score that is not a finite number; a docid repeated
            within a query. The file is then left as it was.
    """
    pairs = results.items() if isinstance(results, Mapping) else results
    write_ranked_run(path, ((qid, *_columns(_ordered(qid, docs))) for qid, docs in pairs), tag)


def _ordered(qid, docs: Ranking) -> list[tuple[str, float]]:
    """:func:`trec_order` of a ranking to write, a score that is no number (or a docid without its score) a
    :class:`RunValueError`: a list of docids of two characters read as (docid, score) pairs wrote ``d 1.0``
    for ``"d1"``."""
    try:
        if not isinstance(docs, Mapping):
            docs = list(docs)
            if any(isinstance(pair, str) for pair in docs):
                raise ValueError("a docid without its score")
        return trec_order(docs)
    except (TypeError, ValueError) as e:  # float("x"), float(None), a docid without its score
        raise RunValueError(f"query {qid!r}: a ranking is {{docid: score}} or [(docid, score), ...] with "
                            f"numbers as scores ({e})") from None


def write_ranked_run(path: str | Path, results: Iterable[tuple[str, list[str], list[float]]], tag: str) -> None:
    """:func:`write_run` of rankings already in :func:`trec_order`, as columns: ``(qid, docids,
    scores)`` a query (a :class:`retriever.results.TopK`'s), written in the order given. ``docids``
    may also be an Arrow string array and ``scores`` a numpy array (a
    :class:`retriever.results.TopKColumns`'s): they are written without a Python object a line,
    and checked as a list is (a :class:`RunValueError` as :func:`write_run`'s, and for a query without as many
    docids as scores)."""
    check_token(tag, "run tag")
    path = Path(path)
    lines = _QueryLines(tag)
    with replacing(path) as tmp, open(tmp, "wb") as raw, _byte_writer(raw, path) as out:
        for qid, docids, scores in results:
            check_token(qid, "query id")
            out.write(lines(qid, docids, scores))


def _columns(ranked: list[tuple[str, float]]) -> tuple[list[str], list[float]]:
    return [docid for docid, _ in ranked], [score for _, score in ranked]


def _byte_writer(raw, path: Path):
    """``raw`` (a binary file), gzip-compressed when ``path`` ends in ``.gz`` (its header names ``path``,
    not the temporary file written first: ``gunzip -N`` restores that name) at gzip's own default level,
    6: SciFact's 1,109 claims at k = 1,000 in 2.2 s, 0.5% larger than Python's default 9 in 3.7 s."""
    if path.name.endswith(".gz"):
        return gzip.GzipFile(filename=path.name, mode="wb", fileobj=raw, compresslevel=GZIP_LEVEL)
    return nullcontext(raw)


class _QueryLines:
    """The lines of one query after another of a run with tag ``tag``, in UTF-8, each query's after
    checking all its docids and scores at once (a run at k = 1,000 writes a million lines: one check
    a line cost more than writing it). What Arrow needs of every query alike (the rank strings, the
    tag) is made once a run."""

    def __init__(self, tag: str):
        self.tag = tag
        self.ranks = None  # "1", "2", ... as an Arrow string array, sliced for each query
        self.ends = None  # f"{tag}\n" and " " as Arrow scalars

    def __call__(self, qid: str, docids, scores) -> bytes | memoryview:
        if len(docids) != len(scores):
            raise RunValueError(f"query {qid!r} has {len(docids)} docids but {len(scores)} scores")
        if _is_arrow(docids):
            column = _string_column(docids)
            if column is not None and len(column) >= ARROW_LINES:
                return self._arrow_column(qid, column, scores)
            docids = docids.to_pylist()
        if isinstance(scores, np.ndarray):
            scores = scores.tolist()
        try:
            joined = "".join(docids)
        except TypeError:  # a docid that is not a string (None, as Arrow's nulls read)
            joined = None
        if joined is None or len(set(docids)) < len(docids) or "" in docids or WHITESPACE.search(joined) \
                or not all(map(math.isfinite, scores)):
            _check_rows(qid, docids, scores)
        if len(docids) >= ARROW_LINES:
            return self._arrow_lines(qid, _large_strings(docids), np.ascontiguousarray(scores, dtype=np.float64))
        prefix, suffix = f"{qid} Q0 ", f" {self.tag}\n"
        return "".join([f"{prefix}{docid} {rank} {score!r}{suffix}"
                        for rank, docid, score in zip(itertools.count(1), docids, scores)]).encode("utf-8")

    def _arrow_column(self, qid: str, docids, scores) -> memoryview:
        """The lines of a query whose ``docids`` are an Arrow ``large_string`` array without nulls,
        checked as :meth:`__call__` checks a list (a bad row raises :func:`_check_rows`'s error)."""
        import pyarrow.compute as pc

        values = np.ascontiguousarray(scores, dtype=np.float64)
        offsets = _offsets(docids)
        chars = bytes(memoryview(docids.buffers()[2] or b"")[offsets[0]:offsets[-1]]).decode("utf-8")
        if (offsets[1:] == offsets[:-1]).any() or WHITESPACE.search(chars) or len(pc.unique(docids)) < len(docids) \
                or not np.isfinite(values).all():
            _check_rows(qid, docids.to_pylist(), values.tolist())
        return self._arrow_lines(qid, docids, values)

    def _arrow_lines(self, qid: str, docids, values: np.ndarray) -> memoryview:
        """The lines the f-strings of :meth:`__call__` make (scores as ``repr`` writes floats) of
        ``docids`` (a ``large_string`` array) and ``values`` (float64), joined column by column in
        Arrow: a view of the joined array's character data, which is the lines back to back. Arrays
        are made from buffers: ``pa.array`` and ``pa.scalar`` import pandas (looking for its
        objects), 0.3 s of a ``ckqti run`` process."""
        import pyarrow as pa
        import pyarrow.compute as pc

        text = pc.cast(_numbers(pa.float64(), values), pa.large_string())
        size = np.abs(values)
        by_repr = (size < ARROW_SCORES[0]) | (size >= ARROW_SCORES[1]) | (values == np.floor(values))
        if by_repr.any():
            mask = pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(np.packbits(by_repr, bitorder="little"))])
            text = pc.replace_with_mask(text, mask, _large_strings(list(map(repr, values[by_repr].tolist()))))
        if self.ranks is None or len(self.ranks) < len(values):
            self.ranks = pc.cast(_numbers(pa.int64(), np.arange(1, max(len(values), ARROW_LINES) + 1, dtype=np.int64)),
                                 pa.large_string())
        if self.ends is None:
            self.ends = tuple(_large_strings([f"{self.tag}\n", " "]))  # two scalars
        lines = pc.binary_join_element_wise(_large_strings([f"{qid} Q0"])[0], docids, self.ranks.slice(0, len(values)),
                                            text, *self.ends)
        offsets = _offsets(lines)
        return memoryview(lines.buffers()[2])[offsets[0]:offsets[-1]]


def _is_arrow(docids) -> bool:
    """Whether ``docids`` are an Arrow array (never so while pyarrow is not imported)."""
    pa = sys.modules.get("pyarrow")
    return pa is not None and isinstance(docids, (pa.Array, pa.ChunkedArray))


def _string_column(docids):
    """Arrow ``docids`` as one ``large_string`` array without nulls, or ``None`` when they are not strings or
    hold a null (they are then written as a list, which checks them)."""
    import pyarrow as pa

    if isinstance(docids, pa.ChunkedArray):
        docids = docids.combine_chunks()
    if docids.null_count or not (pa.types.is_string(docids.type) or pa.types.is_large_string(docids.type)):
        return None
    return docids if pa.types.is_large_string(docids.type) else docids.cast(pa.large_string())


def _offsets(strings) -> np.ndarray:
    """The int64 offsets of a ``large_string`` array's values into its character data."""
    return np.frombuffer(strings.buffers()[1], np.int64, len(strings) + 1, strings.offset * 8)


def _numbers(kind, values: np.ndarray):
    """A pyarrow array of ``kind`` over the contiguous numpy ``values`` of its width."""
    import pyarrow as pa

    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])


def _large_strings(strings: list[str]):
    """``strings`` as a pyarrow ``large_string`` array, made from its UTF-8 bytes and their offsets."""
    import pyarrow as pa

    data = "".join(strings)
    lengths = map(len, strings) if data.isascii() else map(len, map(str.encode, strings))
    offsets = np.zeros(len(strings) + 1, np.int64)
    np.cumsum(np.fromiter(lengths, np.int64, len(strings)), out=offsets[1:])
    return pa.Array.from_buffers(pa.large_string(), len(strings), [None, pa.py_buffer(offsets),
                                                                  pa.py_buffer(data.encode("utf-8"))])


def _check_rows(qid: str, docids: list[str], scores: list[float]) -> None:
    """Raise for the first bad row of a query: a docid that is empty, holds whitespace or repeats
    one before it, or a score that is not finite."""
    seen: set[str] = set()
    for docid, score in zip(docids, scores):
        check_token(docid, "docid")
        if docid in seen:
            raise RunValueError(f"docid {docid!r} appears twice in the results of query {qid!r}")
        if not math.isfinite(score):
            raise RunValueError(f"score {score} of query {qid!r}, doc {docid!r} is not finite")
        seen.add(docid)
