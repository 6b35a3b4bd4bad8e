"""Query readers: TSV, JSONL, TREC topics and SMART query files, plain or gzip."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from ckqti.errors import InputError, OptionError, id_text, id_type_message, is_id
from indexer.readers.formats import (
    check_id,
    iter_lines,
    json_string,
    json_text,
    names_columns,
    object_keys,
    parse_json_object,
    resolve_format,
    smart_records,
    tagged_blocks,
    unescape_sgml,
)

QUERY_FORMATS = ("tsv", "jsonl", "trec", "smart")
QID_KEYS = ("_id", "id", "qid", "query_id")
QUERY_TEXT_KEYS = ("text", "query", "title")


def read_queries(path: str | Path, fmt: str | None = None) -> dict[str, str]:
    """Read a query file into an ordered ``qid -> text`` dict (whitespace collapsed to single spaces).

    Args:
        path: the query file, plain or gzip.
        fmt: ``"tsv"`` (``qid<TAB>text``), ``"jsonl"`` (``_id`` or ``id``/``qid``, ``text``
            or ``query``), ``"trec"`` (``<top>`` blocks with ``<num>`` (``Number: 51`` or
            ``51``; a number of digits loses its leading zeros, with or without ``Number:``, as TREC-1's
            ``051`` is its qrels' ``51`` and as Anserini reads topic numbers) and ``<title>``, the query (a leading ``Topic:`` is dropped; ``<desc>``
            and ``<narr>`` are not read), closing tags optional; or the XML topics of the Web tracks and
            TREC-COVID: ``<topic number="1">`` blocks whose ``<query>`` is the query)
            or ``"smart"``. ``None`` detects it as :func:`~indexer.readers.read_corpus` does
            (``.qry`` is SMART).

    SMART query ids: the queries are numbered ``"1"``, ``"2"``, ... by their order in the
    file and the ``.I`` numbers are ignored, because Cranfield's ``cran.qry`` numbers them
    ``.I 001, 002, 004, 008, ...`` while ``cranqrel`` uses the order 1..225.

    Raises:
        InputError: unknown format, malformed line, empty or duplicate qid (naming both
            lines), a query without text, invalid UTF-8, or no query at all.
    """
    fmt = resolve_format(path, fmt, QUERY_FORMATS, "queries")
    queries: dict[str, str] = {}
    lines: dict[str, str] = {}
    for number, qid, text in _PARSERS[fmt](path):
        _add_query(queries, lines, qid, text, path, number, f"line {number}")
    if not queries:
        raise InputError("no queries in file", path)
    return queries


def check_no_format_in_memory(queries, fmt: str | None, name: str) -> None:
    """A queries format is a file's: with queries in memory (a dict, read as it is) a format given as the
    caller's option ``name`` is an :class:`~ckqti.errors.OptionError` rather than ignored."""
    if fmt is not None and isinstance(queries, Mapping):
        raise OptionError(f"{name} is for a queries file; a dict of queries is read as it is", (name,))


def read_query_mapping(queries: Mapping[str, str]) -> dict[str, str]:
    """In-memory queries, ``qid -> text`` (the Python API's ``run(index, {"1": "text"}, out)``), checked
    as :func:`read_queries` checks a file's; an error names the query (``queries['3']``)."""
    if not isinstance(queries, Mapping):
        raise InputError(f"expected a dict of query id -> text (a run names each query by its id), got "
                         f"{type(queries).__name__}", "queries")
    checked: dict[str, str] = {}
    first: dict[str, str] = {}  # id -> where it was first given
    for qid, text in queries.items():
        where = f"queries[{qid!r}]"
        if not is_id(qid):
            raise InputError(id_type_message(qid, "query id"), where)
        if not isinstance(text, str):
            raise InputError(f"a query must be a string, found {type(text).__name__}", where)
        _add_query(checked, first, id_text(qid), text, where, None, where)
    if not checked:
        raise InputError("no queries in the dict", "queries")
    return checked


def _add_query(queries: dict[str, str], first: dict[str, str], qid: str, text: str, path: str | Path,
               number: int | None, where: str) -> None:
    """Add one query, checked: its id (:func:`check_id`), some text, not seen before (``first``: id -> where)."""
    qid = check_id(qid, "query id", path, number)
    text = " ".join(text.split())
    if not text:
        raise InputError(f"query {qid!r} has no text", path, number)
    if qid in queries:
        raise InputError(f"duplicate query id {qid!r} (first at {first[qid]})", path, number)
    queries[qid], first[qid] = text, where


TSV_HEADER_IDS = ("qid", "query_id", "query-id", "queryid", "id", "_id")
TSV_HEADER_TEXTS = ("text", "query", "query_text", "title")


def _parse_tsv(path: str | Path) -> Iterator[tuple[int, str, str]]:
    first = True
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 2:
            raise InputError(f"expected 2 tab-separated columns (qid, text), found {len(cols)}", path, number)
        header = first and names_columns(cols, (TSV_HEADER_IDS, TSV_HEADER_TEXTS))
        first = False
        if not header:  # a header line ("qid<TAB>text", as pandas writes one) is not a query
            yield number, cols[0], cols[1]


def _parse_jsonl(path: str | Path) -> Iterator[tuple[int, str, str]]:
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        obj = parse_json_object(line, path, number)
        qid = json_string(obj, QID_KEYS, path, number)
        if qid is None:
            raise InputError(f"missing query id (one of {', '.join(QID_KEYS)}; found {object_keys(obj)})", path, number)
        text = json_text(obj, QUERY_TEXT_KEYS, path, number)  # the first not blank
        if text is None:
            raise InputError(f"no query text field (one of {', '.join(QUERY_TEXT_KEYS)}; found {object_keys(obj)})",
                             path, number)
        yield number, qid, text


# A topic field runs from its tag to the next tag (old TREC topics have no closing tags).
_NUM = re.compile(r"<num>\s*(?:Number:)?(.*?)(?=<|\Z)", re.IGNORECASE | re.DOTALL)
_TITLE = re.compile(r"<title>\s*(?:Topic:)?(.*?)(?=<|\Z)", re.IGNORECASE | re.DOTALL)


def _parse_trec(path: str | Path) -> Iterator[tuple[int, str, str]]:
    if _xml_topics(path):
        yield from _parse_xml_topics(path)
        return
    for number, _attributes, raw in tagged_blocks(path, "top"):
        num, title = _NUM.search(raw), _TITLE.search(raw)
        if num is None:
            raise InputError("<top> without <num>", path, number)
        if title is None:
            raise InputError("<top> without <title>", path, number)
        qid = unescape_sgml(num.group(1)).strip()
        if qid.isascii() and qid.isdigit():  # TREC-1's "Number: 051" is its qrels' 51, as Anserini reads it
            qid = str(int(qid))
        yield number, qid, unescape_sgml(title.group(1))  # AT&amp;T is "AT&T"


# The Web tracks' and TREC-COVID's topics: <topic number="1" ...> <query>text</query> <description>...
_TOPIC_OR_TOP = re.compile(r"<(topic|top)[\s>]", re.IGNORECASE)
_NUMBER = re.compile(r"""\bnumber\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.IGNORECASE)
_QUERY = re.compile(r"<query>(.*?)</query>", re.IGNORECASE | re.DOTALL)


def _xml_topics(path: str | Path) -> bool:
    """Whether the file's first topic opens with ``<topic`` (XML topics) rather than ``<top>``."""
    for _number, line in iter_lines(path):
        match = _TOPIC_OR_TOP.search(line)
        if match:
            return match.group(1).lower() == "topic"
    return False


def _parse_xml_topics(path: str | Path) -> Iterator[tuple[int, str, str]]:
    for number, attributes, raw in tagged_blocks(path, "topic"):
        num, query = _NUMBER.search(attributes), _QUERY.search(raw)
        if num is None:
            raise InputError("<topic> without a number attribute", path, number)
        if query is None:
            raise InputError("<topic> without <query>", path, number)
        yield number, unescape_sgml(next(g for g in num.groups() if g is not None)), unescape_sgml(query.group(1))


def _parse_smart(path: str | Path) -> Iterator[tuple[int, str, str]]:
    for position, (number, _ident, fields) in enumerate(smart_records(path), 1):
        yield number, str(position), fields.get("W", "")


_PARSERS: dict[str, Callable[[str | Path], Iterator[tuple[int, str, str]]]] = {
    "tsv": _parse_tsv,
    "jsonl": _parse_jsonl,
    "trec": _parse_trec,
    "smart": _parse_smart,
}
