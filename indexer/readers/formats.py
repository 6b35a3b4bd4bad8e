"""Line-level plumbing shared by the corpus, query and qrels readers.

Every reader streams a file as ``(line_number, text)`` pairs through :func:`iter_lines`,
which opens plain or gzip files (recognised by their magic bytes, whatever the name),
decodes UTF-8 line by line so that a bad byte is reported with its line number, and drops
the line terminator (``\\n`` or ``\\r\\n``) and a leading byte-order mark.
"""

from __future__ import annotations

import gzip
import html
import json
import os
import re
import stat
import sys
import unicodedata
import zlib
from collections.abc import Iterator, Mapping, Sequence
from html.entities import html5
from pathlib import Path
from typing import IO

from ckqti.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"

# File-name endings that name a format outright; anything else is sniffed from the content.
EXTENSIONS: dict[str, str] = {
    ".tsv": "tsv",
    ".jsonl": "jsonl",
    ".trec": "trec",
    ".sgml": "trec",
    ".smart": "smart",
    ".qry": "smart",
}

MAX_LINE_BYTES = 64 * 2**20  # longer is no document line: a file without line breaks (JSON, not JSONL), or a gzip bomb
_WHITESPACE = re.compile(r"\s")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?(inf|infinity|nan)", re.IGNORECASE)
MAX_GRADE = 10**6  # a relevance grade's largest size: trec_eval (pytrec_eval) holds grades in a C int and
# allocates memory for every level up to the largest (2**31 - 1: a minute and gigabytes; 10**7: 80 MB)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # what json.loads leaves of an unpaired \ud800-\udfff escape


def open_binary(path: str | Path) -> IO[bytes]:
    """Open ``path`` for reading bytes, decompressing it when it starts with the gzip magic."""
    path = Path(path)
    if not path.exists():
        raise InputError("no such file", path)
    if path.is_dir():
        raise InputError("is a directory, expected a file", path)
    if stat.S_ISFIFO(path.stat().st_mode):  # `<(...)`: readers open a file more than once (format, repeated ids)
        raise InputError("is a pipe, which can be read once only; write it to a file first", path)
    with open(path, "rb") as probe:
        magic = probe.read(10)
    if (other := _other_encoding(magic)) is not None:
        raise InputError(other, path)
    return gzip.open(path, "rb") if magic.startswith(GZIP_MAGIC) else open(path, "rb")


# What a file's first bytes say it is when it is neither gzip nor UTF-8 text: each was reported as
# "invalid UTF-8 (byte 0 of the line)" of line 1, which sent users after the text's encoding.
_COMPRESSED = {
    b"\xfd7zXZ\x00": ("xz", "unxz -k FILE"),
    b"\x28\xb5\x2f\xfd": ("zstd", "unzstd FILE"),
    b"PK\x03\x04": ("zip", "unzip FILE"),
}
_BZIP2 = re.compile(rb"BZh[1-9](1AY&SY|\x17rE8P\x90)")  # a block, or the end of an empty stream
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _other_encoding(magic: bytes) -> str | None:
    """Why a file starting with ``magic`` cannot be read (``None``: it can): compressed otherwise than
    with gzip, or UTF-16 text (as Windows editors save "Unicode")."""
    found = _COMPRESSED.get(next((m for m in _COMPRESSED if magic.startswith(m)), b""))
    if found is None and _BZIP2.match(magic):
        found = ("bzip2", "bunzip2 -k FILE")
    if found is not None:
        return f"{found[0]}-compressed; only gzip is read: decompress it first ({found[1]}) or gzip it"
    if magic.startswith(_UTF16_BOMS):
        return "UTF-16 text (it starts with a UTF-16 byte-order mark); convert it to UTF-8 first (iconv -f UTF-16 -t UTF-8)"
    return None


# A file whose records end in a carriage return alone (classic Mac OS) reads as one line, which a
# 4-column TSV reader would take for one document with the others as its url, title and body.
CR_ONLY = ("carriage returns but no line feeds: a file with old Mac (CR-only) line ends? "
           "(convert them to line feeds, e.g. tr '\\r' '\\n' < FILE > NEW)")


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` for every line of ``path``, numbered from 1, without terminator.

    Raises:
        InputError: invalid UTF-8 (with the line number), a line over :data:`MAX_LINE_BYTES` (found
            before it is read whole: it would take ~25x its size in memory as a document), a first
            line holding carriage returns but no line feed (:data:`CR_ONLY`), or a corrupt gzip stream.
    """
    number = 0
    try:
        with open_binary(path) as stream:
            for number, raw in enumerate(iter(lambda: stream.readline(MAX_LINE_BYTES + 1), b""), 1):
                if number == 1 and not raw.endswith(b"\n") and b"\r" in raw.rstrip(b"\r"):
                    raise InputError(CR_ONLY, path, number)  # the whole file read as one line, or a cap's worth of it
                if len(raw) > MAX_LINE_BYTES:
                    raise InputError(f"line longer than {MAX_LINE_BYTES:,} bytes: a file without line breaks? "
                                     "(one document or query a line; split longer documents)", path, number)
                yield number, _decode(raw, path, number)
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:
        raise InputError(f"corrupt gzip data ({err})", path, number + 1) from None


START_BYTES = 4 * 2**20  # what a command reads of its input before loading a model (a few ms)


def check_start(path: str | Path, size: int = START_BYTES) -> None:
    """Read the lines of ``path``'s first ``size`` bytes (decompressed) as :func:`iter_lines` does,
    raising its errors: a text in another encoding (CP-1252, Latin-1), a file of one line, a corrupt
    gzip stream are named at once, not after the seconds a model takes to load. An error further on
    is still named by the reader, file and line."""
    read = 0
    for _, line in iter_lines(path):
        read += len(line) + 1
        if read >= size:
            return


def check_text_starts(*paths: str | Path | None) -> None:
    """Each of ``paths`` that is a file starts with UTF-8 lines (:func:`check_start`):
    a corpus, queries, qrels or run file in another encoding (CP-1252) is named before the model loads, not after
    the seconds torch's import alone takes. What is no file (not there, a folder, a pipe) is left to
    the command's own checks, which say what it is."""
    for path in paths:
        if isinstance(path, (str, os.PathLike)) and Path(path).is_file():
            check_start(path)


def _decode(raw: bytes, path: str | Path, number: int) -> str:
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"invalid UTF-8 (byte {err.start} of the line)", path, number) from None
    if number == 1 and line.startswith("\ufeff"):
        line = line[1:]
    return line.rstrip("\r\n")


def first_nonblank(path: str | Path) -> tuple[int, str] | None:
    """The first line holding more than whitespace, or ``None`` for an empty file."""
    for number, line in iter_lines(path):
        if line.strip():
            return number, line
    return None


def names_columns(cols: Sequence[str], names: Sequence[Sequence[str]]) -> bool:
    """Whether a tab-separated line's ``cols`` name their columns (a header, as pandas writes one)
    rather than hold data: as many as ``names``, each one of its column's (any case, whitespace aside)."""
    return len(cols) == len(names) and all(c.strip().lower() in allowed for c, allowed in zip(cols, names))


def sniff(line: str) -> str | None:
    """Guess a format from a file's first non-blank line: ``smart``, ``jsonl``, ``trec``, ``tsv`` or ``None``."""
    stripped = line.strip()
    if re.match(r"\.I(\s|$)", stripped):
        return "smart"
    if stripped.startswith("{"):
        return "jsonl"
    if stripped.startswith("<"):
        return "trec"
    if "\t" in line:
        return "tsv"
    return None


def extension_format(path: str | Path) -> str | None:
    """The format named by the file's extension (``.gz`` is looked through), or ``None``."""
    name = Path(path).name.lower()
    if name.endswith(".gz"):
        name = name[: -len(".gz")]
    return EXTENSIONS.get(Path(name).suffix)


def resolve_format(path: str | Path, fmt: str | None, allowed: Sequence[str], kind: str) -> str:
    """Check an explicit ``fmt``, or take it from the extension, or sniff it from the first line.

    Args:
        path: the input file.
        fmt: the caller's choice, or ``None`` to detect.
        allowed: the formats this kind of input can be read in.
        kind: ``"corpus"``, ``"queries"``, ... for the messages.
    """
    choices = ", ".join(allowed)
    open_binary(path).close()  # a missing file is reported when the reader is called, not when iterated
    if fmt is not None:
        if fmt not in allowed:
            raise InputError(f"unknown {kind} format {fmt!r}: use one of {choices}", path)
        return fmt
    guess = extension_format(path)
    if guess in allowed:
        return guess
    first = first_nonblank(path)
    if first is None:
        raise InputError(f"empty {kind} file", path)
    guess = sniff(first[1])
    if guess not in allowed:
        raise InputError(f"cannot tell the {kind} format from this line: pass a format ({choices})", path, first[0])
    return guess


def parse_json_object(line: str, path: str | Path, number: int) -> dict:
    """Parse one JSONL line that must hold a JSON object."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        msg = err.msg.removesuffix(" at")  # "Invalid control character at": json's own message ends so
        raise InputError(f"bad JSON ({msg} at column {err.colno})", path, number) from None
    except RecursionError:  # "[[[[..." thousands deep: valid JSON that Python's parser cannot hold
        raise InputError("bad JSON (nested too deeply)", path, number) from None
    except ValueError:  # an integer over Python's limit (4,300 digits): "Exceeds the limit ... for integer string conversion"
        # the limit and sys.get_int_max_str_digits came together (3.10.7, 3.11): an older 3.10 never gets here
        raise InputError(f"bad JSON (a number of more than {sys.get_int_max_str_digits():,} digits)", path, number) from None  # novermin
    if not isinstance(obj, dict):
        raise InputError(f"expected a JSON object, found {type(obj).__name__}", path, number)
    return obj


def json_string(obj: Mapping, keys: Sequence[str], path: str | Path, number: int | None) -> str | None:
    """The value of the first of ``keys`` present (and not null) in ``obj`` as a string, else ``None``.

    Integers are accepted and converted (ids are often written as numbers); any other type is an error.
    """
    for key in keys:
        value = obj.get(key)
        if value is None:
            continue
        if value.__class__ is str and value.isascii():  # nearly every value: no lone surrogate to look for
            return value
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise InputError(f"field {key!r} must be a string, found {type(value).__name__}", path, number)
        if isinstance(value, str) and (lone := _LONE_SURROGATE.search(value)):  # JSON's \ud800 escape, unpaired
            raise InputError(f"field {key!r} holds a lone surrogate (\\u{ord(lone.group()):04x}), which is not "
                             "Unicode text", path, number)
        return str(value)
    return None


def json_text(obj: Mapping, keys: Sequence[str], path: str | Path, number: int | None) -> str | None:
    """The first of ``keys`` holding more than whitespace (see :func:`json_string`): a blank value falls
    through to the next key (``{"text": "", "body": "..."}`` reads the body). ``""`` when every key present is
    blank, ``None`` when none is present. Keys after the one taken are not looked at."""
    blank = None
    for key in keys:
        value = json_string(obj, (key,), path, number)
        if value is not None and value.strip():
            return value
        blank = blank if value is None else value
    return blank


def object_keys(obj: Mapping, shown: int = 8) -> str:
    """The keys a JSON object has, for an error saying which it lacks: ``"abstract"`` beside a wanted ``"text"``."""
    keys = [repr(str(k)) for k in obj]
    return (", ".join(keys[:shown]) + (f" and {len(keys) - shown} more" if len(keys) > shown else "")) or "no keys"


def check_id(value: str, what: str, path: str | Path, number: int | None) -> str:
    """Strip an identifier and reject it when empty or holding whitespace (run files could not hold it)
    or an invisible character: a control character (a NUL ends the id for C tools such as trec_eval)
    or a format character, such as the byte-order mark that starts a second file after ``cat``
    (``U+FEFF``) or a zero-width space; either makes an id that looks like another and matches none."""
    value = value.strip()
    if not value:
        raise InputError(f"empty {what}", path, number)
    if _WHITESPACE.search(value):
        raise InputError(f"{what} {value!r} contains whitespace", path, number)
    hidden = None if value.isprintable() else next((c for c in value if unicodedata.category(c) in ("Cc", "Cf")), None)
    if hidden is not None:  # (isprintable: a quick test that passes nearly every id)
        name = "a byte-order mark: files joined with cat?" if hidden == "\ufeff" else unicodedata.name(hidden, "control")
        raise InputError(f"{what} {value!r} contains the invisible character U+{ord(hidden):04X} ({name.lower()})",
                         path, number)
    return value


def parse_int(value: str, what: str, path: str | Path, number: int) -> int:
    """Parse a relevance grade (ASCII digits, an optional sign), naming the column in the error.

    Python's ``int`` would also take ``1_0`` (10, where trec_eval reads 1) and other scripts' digits;
    a grade beyond :data:`MAX_GRADE` in size is refused: pytrec_eval failed on ``99999999999999999999``
    (SystemError), read ``4294967297`` as another grade, and spent a minute and gigabytes on
    ``2147483647``.
    """
    if not _INTEGER.fullmatch(value):
        raise InputError(f"{what} must be an integer, found {value!r}", path, number)
    parsed = int(value)
    if abs(parsed) > MAX_GRADE:
        raise InputError(f"{what} {value} is out of range (at most {MAX_GRADE:,} either side of 0)", path, number)
    return parsed


def is_int(value: str) -> bool:
    """Whether :func:`parse_int` reads ``value`` as an integer (in range or not)."""
    return _INTEGER.fullmatch(value) is not None


def is_decimal(value: str) -> bool:
    """Whether ``value`` is a number in plain decimal or scientific notation (or inf, nan), as
    trec_eval and other tools read one: Python's ``float`` also takes ``"1_0"`` (10), surrounding
    whitespace and other scripts' digits."""
    return _DECIMAL.fullmatch(value) is not None


def tagged_blocks(path: str | Path, tag: str) -> Iterator[tuple[int, str, str]]:
    """Yield ``(opening_line, attributes, inner_text)`` for every ``<tag> ... </tag>`` block (tag
    case-insensitive); ``attributes`` is the opening tag's text after its name (``' id="x"'`` of
    ``<DOC id="x">``, else empty).

    Blocks may span lines or share one; inner lines are joined with newlines. Markup alone may
    stand between them (``<?xml ...?>``, ``<!DOCTYPE ...>``, ``<!-- ... -->`` on one line, a wrapping
    element's tags); text outside the blocks, nested or unclosed blocks are errors naming the line.
    """
    pattern = re.compile(rf"<(/?){re.escape(tag)}(\s[^<>]*)?>", re.IGNORECASE)
    parts: list[str] | None = None
    start, attributes = 0, ""
    for number, line in iter_lines(path):
        pos = 0
        for match in pattern.finditer(line):
            before, pos = line[pos : match.start()], match.end()
            if match.group(1):
                if parts is None:
                    raise InputError(f"</{tag}> without an opening <{tag}>", path, number)
                parts.append(before)
                yield start, attributes, "\n".join(parts)
                parts = None
            else:
                if parts is not None:
                    raise InputError(
                        f"<{tag}> inside the <{tag}> opened at line {start} (missing </{tag}>?)", path, number
                    )
                _nothing_outside(before, tag, path, number)
                parts, start, attributes = [], number, match.group(2) or ""
        if parts is None:
            _nothing_outside(line[pos:], tag, path, number)
        else:
            parts.append(line[pos:])
    if parts is not None:
        raise InputError(f"<{tag}> never closed", path, start)


# Markup alone between blocks: an XML declaration, a DOCTYPE, a one-line comment, a wrapping element's
# tags (AQUAINT-2's <DOCSTREAM>); text there would belong to no block.
_MARKUP = re.compile(r"<!--.*?-->|<[?!/]?[A-Za-z][^<>]*>")


def _nothing_outside(text: str, tag: str, path: str | Path, number: int) -> None:
    if _MARKUP.sub("", text).strip():
        raise InputError(f"text outside <{tag}> ... </{tag}>: {text.strip()[:40]!r}", path, number)


# Entities of the TREC disks' SGML (Federal Register, Congressional Record) that HTML lacks or reads
# otherwise. Any other name HTML does not know stays as written: in newswire "AT&T;" or "R&D;" is text
# (an ampersand, then a semicolon), whose letters must not be lost.
SGML_ENTITIES = {"hyph": "-", "blank": " "}
_NAMED_ENTITY = re.compile(r"&([A-Za-z][A-Za-z0-9]*);")


def unescape_sgml(text: str) -> str:
    """``html.unescape`` that also reads the TREC disks' SGML entities (``&hyph;`` a hyphen, ``&blank;``
    a space, not the words ``hyph``, ``blank``); a name neither knows is left as written (``R&D;`` stays
    ``R&D;``, analyzed as ``R&D`` is), not read by its prefix as HTML's entities without a semicolon are
    (``&notable;`` is not ``¬able;``)."""
    def named(match: re.Match) -> str:
        name = match.group(1)
        if name in SGML_ENTITIES:
            return SGML_ENTITIES[name]
        return match.group() if name + ";" in html5 else "&amp;" + match.group()[1:]  # &amp; unescapes to &

    return html.unescape(_NAMED_ENTITY.sub(named, text))


_SMART_MARKER = re.compile(r"\.([A-Z])(?:\s+(.*))?$")


def smart_records(path: str | Path) -> Iterator[tuple[int, str, dict[str, str]]]:
    """Yield ``(line, id, fields)`` for every SMART record (``.I id`` then ``.T``, ``.A``, ``.B``, ``.W``, ... fields).

    A field's lines are stripped and joined with newlines, blank lines dropped; a field
    repeated within a record is appended (Cranfield has two ``.W`` in records 576 and 578).
    Text on the marker line itself (``.T A title``) belongs to the field.
    """
    record: tuple[int, str, dict[str, list[str]]] | None = None
    field: str | None = None
    for number, line in iter_lines(path):
        marker = _SMART_MARKER.match(line.rstrip())
        if marker and marker.group(1) == "I":
            if record is not None:
                yield _joined(record)
            record, field = (number, (marker.group(2) or "").strip(), {}), None
        elif record is None:
            if line.strip():
                raise InputError("expected a SMART record start '.I <id>'", path, number)
        elif marker:
            field = marker.group(1)
            record[2].setdefault(field, []).append(marker.group(2) or "")
        elif field is not None:
            record[2][field].append(line)
        elif line.strip():
            raise InputError("text before any SMART field marker (.T, .A, .B, .W)", path, number)
    if record is not None:
        yield _joined(record)


def _joined(record: tuple[int, str, dict[str, list[str]]]) -> tuple[int, str, dict[str, str]]:
    number, ident, fields = record
    return number, ident, {k: "\n".join(s.strip() for s in v if s.strip()) for k, v in fields.items()}
