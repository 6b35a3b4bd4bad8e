"""Relevance judgement readers: TREC 4-column, BEIR 3-column and Cranfield ``cranqrel``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from ckqti.errors import InputError
from indexer.readers.formats import check_id, first_nonblank, is_int, iter_lines, parse_int

QRELS_FORMATS = ("trec", "beir", "cranfield")

# Cleverdon's codes: 1 complete answer .. 4 minimal interest, 5 no interest; -1 marks a
# judged non-relevant document in cranqrel. Gain = 5 - code, non-relevant = 0.
CRANFIELD_GAINS = {1: 4, 2: 3, 3: 2, 4: 1, 5: 0, -1: 0}

Qrels = dict[str, dict[str, int]]


def read_qrels(path: str | Path, fmt: str | None = None) -> Qrels:
    """Read relevance judgements into an ordered ``qid -> {docid: gain}`` dict.

    Args:
        path: the qrels file, plain or gzip.
        fmt: ``"trec"`` (``qid iter docid rel``), ``"beir"`` (``query-id corpus-id score``,
            tab- or space-separated, with or without that header line) or ``"cranfield"``
            (``qid docid code``: code 1 best .. 4 minimal becomes gain ``5 - code``; -1,
            not relevant, becomes 0). ``None`` detects it from the first line: 4 columns
            are TREC; 3 columns are BEIR when headed or tab-separated, Cranfield when
            space-separated and the file name holds ``cran``; other 3-column files (space-
            separated, or tab-separated and named like Cranfield's) are ambiguous and need ``fmt``.

    Raises:
        InputError: unknown or ambiguous format, wrong column count, a grade that is not an
            integer or beyond :data:`~indexer.readers.formats.MAX_GRADE` in size, an unknown
            Cranfield code, an empty id or one holding whitespace or an invisible character, a
            repeated (qid, docid) pair (naming both lines), invalid UTF-8, or no judgement at all.
    """
    fmt = _resolve(path, fmt)
    qrels: Qrels = {}
    rows = 0
    for number, qid, docid, gain in _rows(path, fmt):
        qid, docid = check_id(qid, "query id", path, number), check_id(docid, "docid", path, number)
        judged = qrels.setdefault(qid, {})
        if docid in judged:
            first = next(n for n, q, d, _ in _rows(path, fmt) if (q.strip(), d.strip()) == (qid, docid))
            raise InputError(
                f"repeated judgement of query {qid!r}, doc {docid!r} (first at line {first})", path, number
            )
        judged[docid] = gain
        rows += 1
    if rows == 0:
        if fmt == "beir":  # a lone 3-column line whose third column is not a grade was taken as the header
            first = first_nonblank(path)
            if first is not None:
                raise InputError(f"no judgements in qrels file: its only line, {first[1].strip()!r}, reads as a BEIR "
                                 "header (query-id corpus-id score)", path, first[0])
        raise InputError("no judgements in qrels file", path)
    return qrels


def count_judgements(qrels: Qrels) -> int:
    """Number of (query, document) judgements."""
    return sum(len(docs) for docs in qrels.values())


def _resolve(path: str | Path, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in QRELS_FORMATS:
            raise InputError(f"unknown qrels format {fmt!r}: use one of {', '.join(QRELS_FORMATS)}", path)
        return fmt
    first = first_nonblank(path)
    if first is None:
        raise InputError("empty qrels file", path)
    number, line = first
    cols = line.split()
    if len(cols) == 4:
        return "trec"
    if len(cols) != 3:
        raise InputError(f"expected 4 qrels columns (TREC) or 3 (BEIR, Cranfield), found {len(cols)}", path, number)
    if not is_int(cols[2]):  # BEIR's header line
        return "beir"
    cranfield_name = "cran" in Path(path).name.lower()
    if "\t" in line and not cranfield_name:
        return "beir"
    if cranfield_name and "\t" not in line:
        return "cranfield"
    kind = "tab-separated 3-column qrels named like Cranfield's" if cranfield_name else "space-separated 3-column qrels"
    raise InputError(
        f"{kind}: give the format, 'beir' (third column is the gain) or 'cranfield' "
        "(codes 1 best .. 4, -1 not relevant): --qrels-format, or fmt in Python",
        path,
        number,
    )


def _rows(path: str | Path, fmt: str) -> Iterator[tuple[int, str, str, int]]:
    header_allowed = fmt == "beir"
    for number, line in iter_lines(path):
        cols = line.split()
        if not cols:
            continue
        if header_allowed and len(cols) == 3 and not is_int(cols[2]):
            header_allowed = False
            continue  # BEIR's "query-id corpus-id score" header
        header_allowed = False
        yield (number, *_FIELDS[fmt](cols, path, number))


def _trec(cols: list[str], path: str | Path, number: int) -> tuple[str, str, int]:
    if len(cols) != 4:
        raise InputError(
            f"expected 4 TREC qrels columns (qid, iteration, docid, relevance), found {len(cols)}", path, number
        )
    return cols[0], cols[2], parse_int(cols[3], "relevance", path, number)


def _beir(cols: list[str], path: str | Path, number: int) -> tuple[str, str, int]:
    if len(cols) != 3:
        raise InputError(f"expected 3 BEIR qrels columns (query-id, corpus-id, score), found {len(cols)}", path, number)
    return cols[0], cols[1], parse_int(cols[2], "score", path, number)


def _cranfield(cols: list[str], path: str | Path, number: int) -> tuple[str, str, int]:
    if len(cols) != 3:
        raise InputError(f"expected 3 Cranfield qrels columns (qid, docid, code), found {len(cols)}", path, number)
    code = parse_int(cols[2], "relevance code", path, number)
    if code not in CRANFIELD_GAINS:
        raise InputError(f"Cranfield relevance code must be 1-5 or -1, found {code}", path, number)
    return cols[0], cols[1], CRANFIELD_GAINS[code]


_FIELDS: dict[str, Callable[[list[str], str | Path, int], tuple[str, str, int]]] = {
    "trec": _trec,
    "beir": _beir,
    "cranfield": _cranfield,
}

