"""Corpus readers: TSV, BEIR JSONL, TREC ``<DOC>`` and SMART files, plain or gzip, streamed.

:func:`read_corpus` is the one entry point. It yields :class:`Document` objects one at a
time (a corpus can be many GB), checks every docid (non-empty, no whitespace, unique) and
attaches ORCAS clicked queries when given. Malformed input raises
:class:`ckqti.errors.InputError` naming the file and line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from ckqti.errors import InputError, OptionError, id_text, id_type_message, is_id
from ckqti.terminal import counted
from ckqti.text import alphanumeric_words
from indexer.readers.formats import (
    check_id,
    first_nonblank,
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
from indexer.readers.queries import TSV_HEADER_IDS as QUERY_HEADER_IDS
from indexer.readers.queries import TSV_HEADER_TEXTS as QUERY_HEADER_TEXTS

CORPUS_FORMATS = ("tsv", "jsonl", "trec", "smart")
ORCAS_MAX_TERMS = 2000  # the NDRM3+ORCAS runs cap the clicked-query field at 2,000 terms (of a 4,000-term window)

ID_KEYS = ("_id", "id", "docid")
TEXT_KEYS = ("text", "contents", "body")

Orcas = Mapping[str, list[str]]


@dataclass(frozen=True)
class Document:
    """One document: its id and text fields.

    ``orcas`` holds the document's clicked queries (already capped), which the NDRM3+ORCAS
    runs put in front of the other fields.
    """

    docid: str
    title: str
    text: str
    url: str = ""
    orcas: str = ""

    @property
    def fields(self) -> tuple[str, ...]:
        """The non-empty fields in indexing order: orcas, url, title, text."""
        return tuple(f for f in (self.orcas, self.url, self.title, self.text) if f)

    def full_text(self) -> str:
        """The non-empty fields joined with newlines, ORCAS first (see :attr:`fields`)."""
        return "\n".join(self.fields)


def read_corpus(
    path: str | Path, fmt: str | None = None, orcas: str | Path | Orcas | None = None, clicks_required: bool = True
) -> Iterator[Document]:
    """Stream the documents of a corpus file.

    Args:
        path: the corpus file, plain or gzip (gzip is recognised by its magic bytes).
        fmt: ``"tsv"`` (``docid<TAB>text`` or MS MARCO's ``docid<TAB>url<TAB>title<TAB>body``; a
            first line naming those columns, as pandas writes one, is a header, not a document),
            ``"jsonl"`` (BEIR: ``_id`` or ``id``/``docid``, ``title``, and the first of ``text``,
            ``contents``, ``body`` that is not blank),
            ``"trec"`` (``<DOC><DOCNO>``; text from ``<TEXT>`` blocks when present, else the
            whole element; title from ``<TITLE>``/``<HEADLINE>``/``<HEAD>``; entities decoded, the
            TREC disks' ``&hyph;`` too; markup between documents, such as AQUAINT-2's ``<?xml?>``
            and ``<DOCSTREAM>``, skipped; a web page's scripts and styles dropped, and its
            ``<DOCHDR>`` (WT10g, GOV2) read for the ``url`` alone) or ``"smart"``
            (``.I`` id, ``.T`` title, ``.W`` text; other fields dropped). ``None`` takes the
            format from the extension (``.tsv``, ``.jsonl``, ``.trec``, ``.smart``, through
            ``.gz``) or else from the first non-blank line (``.I`` SMART, ``{`` JSONL, ``<``
            TREC, a tab TSV), so ``cran.all.1400`` reads as SMART.
        orcas: an ORCAS file (see :func:`load_orcas`: a repeated line counts once) or its loaded
            mapping; a document's clicked queries become its ``orcas`` field, capped at 2,000 terms
            (:func:`orcas_field`).
        clicks_required: refuse ``orcas`` when it clicks no document of the corpus (another id
            scheme, the wrong file); an append, whose few new documents may have no clicks, checks
            the index's documents itself (:func:`indexer.append.check_clicks`).

    Raises:
        InputError: unknown format, malformed line, a docid empty or holding whitespace or an
            invisible character, a duplicate docid (naming both lines), invalid UTF-8, no
            document at all, or (``clicks_required``) clicks for none of them. The format is
            checked when called; the rest as the documents are read.
    """
    fmt = resolve_format(path, fmt, CORPUS_FORMATS, "corpus")
    clicks = load_orcas(orcas) if isinstance(orcas, (str, Path)) else orcas
    return _checked(path, fmt, clicks, clicks.path if isinstance(clicks, Clicks) else None, clicks_required)


def check_corpus_start(path: str | Path, fmt: str | None = None) -> None:
    """What :func:`read_corpus` would refuse at the start of ``path``, checked from its first lines
    before a model loads: an unknown ``fmt``, a format that cannot be told (``fmt`` None), a file
    empty or blank (the errors' words are :func:`read_corpus`'s)."""
    resolve_format(path, fmt, CORPUS_FORMATS, "corpus")
    if first_nonblank(path) is None:
        raise InputError("no documents in corpus", path)


def _checked(path: str | Path, fmt: str, clicks: Orcas | None, orcas_path: str | Path | None,
             clicks_required: bool) -> Iterator[Document]:
    seen: set[str] = set()
    clicked = 0
    for number, doc in _PARSERS[fmt](path):
        docid = check_id(doc.docid, "docid", path, number)
        if docid in seen:
            first = _first_line_of(path, fmt, docid)
            raise InputError(f"duplicate docid {docid!r} (first at line {first})", path, number)
        seen.add(docid)
        queries = clicks.get(docid) if clicks else None
        clicked += bool(queries)
        if docid == doc.docid and not queries:  # nearly every document: nothing to change (replace() is slow)
            yield doc
        else:
            yield Document(docid, doc.title, doc.text, url=doc.url, orcas=orcas_field(queries) if queries else doc.orcas)
    if not seen:
        raise InputError("no documents in corpus", path)
    if clicks and not clicked and clicks_required:  # another id scheme, or the wrong file: the field would silently stay empty
        raise no_clicks_error(path, orcas_path)


def no_clicks_error(path: str | Path, orcas_path: str | Path | None, index: str | Path | None = None) -> InputError:
    """An ORCAS file that clicks no document of the corpus ``path`` (nor of the ``index`` appended to)."""
    where = f"the corpus {path}" + (f" nor of the index {index}" if index is not None else "")
    return InputError(f"no document of {where} has a click in the ORCAS file (do their docids match?)", orcas_path or path)


def _first_line_of(path: str | Path, fmt: str, docid: str) -> int:
    """Re-read the file to find where ``docid`` first appeared (only on the error path; saves a dict of lines)."""
    return next(n for n, doc in _PARSERS[fmt](path) if doc.docid.strip() == docid)


TSV_HEADER_IDS = ("docid", "doc_id", "id", "_id", "pid")
_TEXT_NAMES = ("text", "body", "contents", "passage")
TSV_HEADERS = {2: (TSV_HEADER_IDS, _TEXT_NAMES),
               4: (TSV_HEADER_IDS, ("url",), ("title",), _TEXT_NAMES)}  # the names of each column, by column count


def _is_header(cols: list[str]) -> bool:
    """Whether a line names its columns (``docid<TAB>text``, as pandas writes one) instead of being a document."""
    return names_columns(cols, TSV_HEADERS.get(len(cols), ()))


def _parse_tsv(path: str | Path) -> Iterator[tuple[int, Document]]:
    first = True
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        cols = line.split("\t")
        header, first = first and _is_header(cols), False
        if header:  # only a first line can be a header
            continue
        if len(cols) == 2:
            yield number, Document(cols[0], "", cols[1].strip())
        elif len(cols) == 4:
            yield number, Document(cols[0], cols[2].strip(), cols[3].strip(), url=cols[1].strip())
        else:
            raise InputError(
                f"expected 2 tab-separated columns (docid, text) or 4 (docid, url, title, body), found {len(cols)}",
                path,
                number,
            )


def _parse_jsonl(path: str | Path) -> Iterator[tuple[int, Document]]:
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        yield number, _json_document(parse_json_object(line, path, number), path, number)


def _json_document(obj: Mapping, path: str | Path, number: int | None) -> Document:
    """A JSONL line's object (or an in-memory dict, :func:`read_documents`) as a :class:`Document`."""
    docid = json_string(obj, ID_KEYS, path, number)
    if docid is None:
        raise InputError(f"missing document id (one of {', '.join(ID_KEYS)}; found {object_keys(obj)})", path, number)
    title = json_string(obj, ("title",), path, number)
    text = json_text(obj, TEXT_KEYS, path, number)  # "text": "" beside a "body" reads the body
    if title is None and text is None:
        raise InputError(f"no text field (title or one of {', '.join(TEXT_KEYS)}; found {object_keys(obj)})", path, number)
    url = json_string(obj, ("url",), path, number) or ""
    return Document(docid, (title or "").strip(), (text or "").strip(), url=url.strip())


def read_documents(documents: Iterable[str | Mapping | Document], start: int = 0) -> list[Document]:
    """In-memory documents, checked as :func:`read_corpus` checks a file's (the Python API's
    ``index(["text", ...], out)``, as bm25s and Pyserini's ``JsonCollection`` users hold them).

    Each item is a text (its docid is its position, ``"0"``, ``"1"``, ..., as bm25s numbers a list
    of texts; counted from ``start``: an append's texts follow the index's documents), a dict read as a BEIR or Pyserini JSONL line (``_id``/``id``/``docid``, ``title``,
    ``text``/``contents``/``body``, ``url``) or a :class:`Document`.

    Raises:
        InputError: naming the item (``documents[3]``): another type, a dict without an id or text,
            a docid :func:`read_corpus` would refuse, a duplicate docid, or no document at all.
    """
    if isinstance(documents, (str, bytes, Mapping)):
        raise InputError(f"expected a list of documents, got one {type(documents).__name__}", "documents")
    return _checked_documents(((f"documents[{i}]", _document(item, start + i, f"documents[{i}]"))
                               for i, item in enumerate(documents)), "no documents in the list", "documents")


def documents_in_memory(documents: Mapping | Iterable, start: int = 0) -> list[Document]:
    """Documents given in memory, as the Python API takes them (``index``, ``append``, ``rerank``): a dict keyed by
    docid (:func:`read_document_mapping`) or a list of texts, dicts or :class:`Document` s (:func:`read_documents`,
    texts numbered from ``start``): the documents a corpus file of the same fields holds, an error naming the entry."""
    return read_document_mapping(documents) if isinstance(documents, Mapping) else read_documents(documents, start)


def entry_names(documents, name: str = "corpus") -> list[str] | None:
    """What an error calls each document of a dict ``documents``, as :func:`read_document_mapping` names them
    (``corpus['d1']``: its key); None for a corpus file or a list, whose errors name a line or an item."""
    return [f"{name}[{key!r}]" for key in documents] if isinstance(documents, Mapping) else None


def check_in_memory_options(corpus, fmt: str | None, orcas, ray_address: str | None = None) -> None:
    """Documents in memory (:func:`ckqti.api.index`'s and :func:`ckqti.api.append`'s, then read by
    :func:`documents_in_memory`) take no file options, and are an iterable."""
    for name, value in (("fmt", fmt), ("orcas", orcas), ("ray_address", ray_address)):
        if value is not None:
            raise OptionError(f"{name} is for a corpus file; documents given in memory are indexed as they are",
                              (name,))
    if not isinstance(corpus, Iterable):  # None too
        raise OptionError(f"corpus must be a path, got {type(corpus).__name__} (or documents in memory: a list of "
                          "texts, dicts or Documents, or a dict of docid -> text)", ("corpus",))


def read_document_mapping(documents: Mapping, name: str = "corpus") -> list[Document]:
    """In-memory documents keyed by docid, checked as :func:`read_documents` checks a list: ``{docid: text}``,
    or ``{docid: {"title": ..., "text": ...}}`` (a corpus as BEIR's ``GenericDataLoader`` holds it). Each is
    read as :func:`read_documents` reads the dict ``{"_id": docid, "text": text}`` (or the fields with the
    key as ``_id``), the :class:`Document` a JSONL line of the same fields gives.

    Raises:
        InputError: naming the entry (``corpus['d1']``; ``name`` is the dict's): a docid that is not a string
            (or an integer, as JSONL ids may be), a document that is neither a text nor a dict of fields, an
            id field other than the key, what :func:`read_documents` refuses, or no document at all.
    """
    if not isinstance(documents, Mapping):
        raise InputError(f"expected a dict of docid -> text, got {type(documents).__name__}", name)

    def items() -> Iterator[tuple[str, Document]]:
        for key, value in documents.items():
            where = f"{name}[{key!r}]"
            if not is_id(key):
                raise InputError(id_type_message(key, "docid"), where)
            if isinstance(value, str):
                fields: Mapping = {"text": value}
            elif isinstance(value, Mapping):
                own = json_string(value, ID_KEYS, where, None)
                if own is not None and own.strip() != str(key).strip():
                    raise InputError(f"its id field says {own!r}: a document's id is its key", where)
                fields = {k: v for k, v in value.items() if k not in ID_KEYS}
            else:
                raise InputError(f"a document is a text or a dict of its fields (title, text), found "
                                 f"{type(value).__name__}", where)
            yield where, _json_document({**fields, "_id": id_text(key)}, where, None)

    return _checked_documents(items(), "no documents in the dict", name)


def _document(item, position: int, where: str) -> Document:
    """One item of :func:`read_documents`' list as a :class:`Document` (its docid not yet checked)."""
    if isinstance(item, str):
        return Document(str(position), "", item.strip())
    if isinstance(item, Mapping):
        return _json_document(item, where, None)
    if isinstance(item, Document):
        return item
    raise InputError(f"expected a text, a dict (id and text fields, as in a JSONL corpus) or a Document, "
                     f"found {type(item).__name__}", where)


def _checked_documents(items: Iterable[tuple[str, Document]], empty: str, name: str) -> list[Document]:
    """The documents of ``(where, document)`` items with their docids checked (:func:`check_id`) and unique, an
    error naming the item; ``empty`` is the error (naming ``name``) when there is none."""
    docs: list[Document] = []
    seen: dict[str, str] = {}  # docid -> where it was first given
    for where, doc in items:
        docid = check_id(doc.docid, "docid", where, None)
        if docid in seen:
            raise InputError(f"duplicate docid {docid!r} (first at {seen[docid]})", where)
        seen[docid] = where
        docs.append(replace(doc, docid=docid))
    if not docs:
        raise InputError(empty, name)
    return docs


_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_ID_ATTRIBUTE = re.compile(r"""\bid\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.IGNORECASE)


def paired(text: str, opening: re.Pattern, close: Callable[[re.Match], str]) -> list[tuple[int, int, int, int]]:
    """Spans ``(start, inner start, inner end, end)`` of each ``opening`` match and the nearest
    closing tag after it (``close(match)``, matched without case), left to right, not overlapping:
    what ``<(A)>(.*?)</\\1>`` finds, in linear time. (That regex searched to the end of the text from
    every opening without a closing: a 300 KB document of unclosed tags took minutes.)"""
    spans, pos, unclosed = [], 0, set()
    while (m := opening.search(text, pos)) is not None:
        name = close(m)
        found = None if name in unclosed else re.compile(re.escape(name), re.IGNORECASE).search(text, m.end())
        if found is None:  # no such closing tag after here: later openings of this tag have none either
            unclosed.add(name)
            pos = m.end()
            continue
        spans.append((m.start(), m.end(), found.start(), found.end()))
        pos = found.end()
    return spans


def _cut(text: str, spans: list[tuple[int, int, int, int]], put: str) -> str:
    """``text`` with each span replaced by ``put``."""
    pieces, pos = [], 0
    for start, _, _, end in spans:
        pieces += [text[pos:start], put]
        pos = end
    return "".join(pieces) + text[pos:]


_OPEN_COMMENT = re.compile(re.escape("<!--"))
_OPEN_DOCNO = re.compile(r"<DOCNO>", re.IGNORECASE)
_OPEN_TITLE = re.compile(r"<(TITLE|HEADLINE|HEAD)>", re.IGNORECASE)
_OPEN_TEXT = re.compile(r"<TEXT>", re.IGNORECASE)
_OPEN_HIDDEN = re.compile(r"<(script|style|DOCOLDNO)(?:\s[^<>]*)?>", re.IGNORECASE)  # code, WT10g's old id
_OPEN_DOCHDR = re.compile(r"<DOCHDR>", re.IGNORECASE)


def _web_page(raw: str) -> tuple[str, str]:
    """``(raw, url)``: a web page's ``<DOC>`` (WT10g, GOV2) without its scripts, styles and ``<DOCOLDNO>``,
    and without the crawler's ``<DOCHDR>`` (the URL, then HTTP headers), whose first word is the ``url``."""
    raw = _cut(raw, paired(raw, _OPEN_HIDDEN, lambda m: f"</{m.group(1)}>"), " ")
    headers = paired(raw, _OPEN_DOCHDR, lambda m: "</DOCHDR>")
    if not headers:
        return raw, ""
    words = raw[headers[0][1] : headers[0][2]].split(maxsplit=1)
    return _cut(raw, headers, "\n"), words[0] if words else ""


def _parse_trec(path: str | Path) -> Iterator[tuple[int, Document]]:
    for number, attributes, raw in tagged_blocks(path, "DOC"):
        raw = _cut(raw, paired(raw, _OPEN_COMMENT, lambda m: "-->"), " ")  # SGML comments are not text
        raw, url = _web_page(raw)
        docnos = paired(raw, _OPEN_DOCNO, lambda m: "</DOCNO>")
        if docnos:
            if len(docnos) > 1:
                raise InputError("<DOC> with two <DOCNO>s (a missing </DOC>?)", path, number)
            body, docid = _cut(raw, docnos, ""), raw[docnos[0][1]:docnos[0][2]]
        else:  # AQUAINT-2, Gigaword: <DOC id="APW_ENG_20041001.0001" type="story">
            ident = _ID_ATTRIBUTE.search(attributes)
            if ident is None:
                raise InputError('<DOC> without <DOCNO> or an id attribute (<DOC id="...">)', path, number)
            body, docid = raw, unescape_sgml(next(g for g in ident.groups() if g is not None))
        titles = paired(body, _OPEN_TITLE, lambda m: f"</{m.group(1)}>")
        title = " ".join(unescape_sgml(_TAG.sub(" ", " ".join(body[a:b] for _, a, b, _ in titles))).split())
        body = _cut(body, titles, "\n")
        blocks = [body[a:b] for _, a, b, _ in paired(body, _OPEN_TEXT, lambda m: "</TEXT>")]
        text = unescape_sgml(_TAG.sub(" ", "\n".join(blocks) if blocks else body))  # &amp; is "&", not a word
        lines = (" ".join(line.split()) for line in text.splitlines())
        yield number, Document(docid, title, "\n".join(x for x in lines if x), url=unescape_sgml(url))


def _parse_smart(path: str | Path) -> Iterator[tuple[int, Document]]:
    for number, ident, fields in smart_records(path):
        yield number, Document(ident, " ".join(fields.get("T", "").split()), fields.get("W", ""))


_PARSERS: dict[str, Callable[[str | Path], Iterator[tuple[int, Document]]]] = {
    "tsv": _parse_tsv,
    "jsonl": _parse_jsonl,
    "trec": _parse_trec,
    "smart": _parse_smart,
}


class Clicks(dict):
    """``docid -> [query, ...]`` as :func:`load_orcas` read the file ``path``; ``repeated`` counts the
    lines it dropped as a query the document already held (a click counts once, as in the ORCAS release)."""

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.path = path
        self.repeated = 0


def repeated_clicks_note(repeated: int, orcas: str | Path) -> str:
    """The note ``index``, ``rerank``, ``train`` and ``explain`` show on ``repeated`` lines of the
    ORCAS file ``orcas`` that :func:`load_orcas` dropped; "" without any."""
    if not repeated:
        return ""
    return f"{counted(repeated, 'repeated line')} of {orcas} dropped (a document's clicked query counts once)"


def load_orcas(path: str | Path, max_terms: int | None = ORCAS_MAX_TERMS) -> Clicks:
    """Load ORCAS clicks as ``docid -> [query, ...]`` in file order.

    Lines are ``docid<TAB>query``, or the released ``orcas.tsv`` layout
    ``qid<TAB>query<TAB>docid<TAB>url``; a first line naming those columns (``docid<TAB>query``, as
    pandas writes one) is a header, not a click. Blank queries are skipped, and so is a query a document
    already holds (whitespace aside): the release lists each (query, document) pair once, so a
    repeated line is a mistake or files joined, and would weigh the query twice; the result's
    ``repeated`` counts them. Once a document holds ``max_terms`` terms (counted as
    :func:`orcas_field` counts them) further queries are not kept (they would be cut anyway; this
    bounds memory on the 18M-line release); a line repeating a query it holds is still counted, one
    repeating a query the cap dropped is not known.

    Raises:
        InputError: a line with another column count, an empty docid, or no clicks at all.
    """
    clicks = Clicks(path)
    terms: dict[str, int] = {}
    full: dict[str, set[str]] = {}  # the queries of each document at the cap: a repeat is found in one look-up
    first = True
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        cols = line.split("\t")
        header, first = first and _is_orcas_header(cols), False
        if header:  # only a first line can be a header
            continue
        if len(cols) not in (2, 4):
            raise InputError(
                f"expected 2 tab-separated ORCAS columns (docid, query) or 4 (qid, query, docid, url), found {len(cols)}",
                path,
                number,
            )
        docid, query = (cols[0], cols[1]) if len(cols) == 2 else (cols[2], cols[1])
        docid, words = check_id(docid, "docid", path, number), query.split()
        if not words:
            continue
        query, queries, held = " ".join(words), clicks.setdefault(docid, []), full.get(docid)
        if query in (queries if held is None else held):  # a list of at most max_terms queries, most of a few
            clicks.repeated += 1
            continue
        if held is not None:
            continue
        queries.append(query)
        terms[docid] = terms.get(docid, 0) + len(alphanumeric_words(query.lower()))
        if max_terms is not None and terms[docid] >= max_terms:
            full[docid] = set(queries)
    if not clicks:
        raise InputError("no ORCAS clicks in file", path)
    return clicks


ORCAS_HEADERS = {2: (TSV_HEADER_IDS, QUERY_HEADER_TEXTS),
                 4: (QUERY_HEADER_IDS, QUERY_HEADER_TEXTS, TSV_HEADER_IDS, ("url",))}  # the names of each column


def _is_orcas_header(cols: list[str]) -> bool:
    """Whether an ORCAS line names its columns (``docid<TAB>query``) instead of being a click."""
    return names_columns(cols, ORCAS_HEADERS.get(len(cols), ()))


def orcas_field(queries: list[str], max_terms: int = ORCAS_MAX_TERMS) -> str:
    """Join a document's clicked queries with spaces, keeping their first ``max_terms`` terms.

    A term is a word as the analyzer splits text (:func:`ckqti.text.alphanumeric_words`: ``covid-19``
    is two, a stopword counts too), so the field is at most ``max_terms`` analysed terms whatever
    the analyzer, and a model reading a document's first 4,000 reads at least 2,000 of its other
    fields (the NDRM3+ORCAS runs' split). The word the cap cuts keeps its first terms, lower-cased
    and spaced as the analyzer reads them (``U.S.A`` cut at two: ``u s``)."""
    kept: list[str] = []
    held = 0
    for word in " ".join(queries).split():
        if held >= max_terms:
            break
        terms = alphanumeric_words(word.lower())
        if held + len(terms) > max_terms:
            terms = terms[:max_terms - held]
            kept.append(" ".join(terms))
            break
        kept.append(word)
        held += len(terms)
    return " ".join(kept)
