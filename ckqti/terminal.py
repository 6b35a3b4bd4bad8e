"""Text for a terminal: documents, queries, ids and file names made safe to print, and counts with their noun."""

from __future__ import annotations

import contextlib
import re
import sys
import unicodedata

# C0 controls but tab and newline, DEL, C1 controls, bidirectional marks, overrides and isolates, and
# lone surrogates (undecodable bytes of a command-line argument or file name)
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def visible(text: str) -> str:
    """``text`` with every character that acts on a terminal instead of showing written as an
    escape (``\\x1b``, ``\\r``'s ``\\x0d``, ``\\u202e``): a document cannot clear the screen,
    retitle the window, hide a link, overwrite a line or reorder what is shown. A CRLF line break
    (a Windows-made text) is a line break, not ``\\x0d`` at the end of every line."""
    return _UNSAFE.sub(_escape, text.replace("\r\n", "\n"))


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def repaired(text: str) -> str:
    """``text`` with mojibake undone for display (``ftfy.fix_encoding``): UTF-8 once read as
    Windows-1252 or Latin-1, as in about a fifth of the bundled MS MARCO passages (``donâ\x80\x99t``
    shows as ``don’t``, ``à¹\x83à¸\x88`` as Thai). Only what is shown: the stored text, ``--json``
    and the service keep the corpus's characters, and the analyzer, which reads ASCII letters and
    digits, tokenizes both alike."""
    if text.isascii():  # most text, and no ftfy import for it
        return text
    import ftfy

    return ftfy.fix_encoding(text)


def readable(text: str) -> str:
    """Document text as shown in a report: mojibake repaired (:func:`repaired`), then terminal
    controls escaped (:func:`visible`)."""
    return visible(repaired(text))


def decoded_argument(text: str) -> str:
    """A command-line argument with bytes that are not UTF-8 (which Python keeps as lone
    surrogates) replaced by U+FFFD, so that it prints, encodes and goes into JSON as text."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


@contextlib.contextmanager
def escaped_output():
    """stdout writes a character its encoding lacks as an escape (``\\U0001f355``), as Python's
    stderr does, instead of ending the command in a ``UnicodeEncodeError`` traceback: a document's
    emoji or an index path's ``é`` shown where stdout is Latin-1 or CP-1252 (a Windows pipe, an
    ISO-8859-1 locale). Restored after."""
    stream = sys.stdout
    before = getattr(stream, "errors", None)
    if before is None or not hasattr(stream, "reconfigure"):  # not a TextIOWrapper: left as it is
        yield
        return
    stream.reconfigure(errors="backslashreplace")
    try:
        yield
    finally:
        with contextlib.suppress(ValueError, OSError):  # a closed stream (the reader left) keeps its setting
            stream.reconfigure(errors=before)


def columns_of(text: str) -> int:
    """Terminal columns ``text`` takes: combining marks and format characters (a zero-width
    joiner) none, wide and full-width characters (CJK, most emoji) two, others one."""
    return sum(0 if unicodedata.category(c)[0] == "M" or unicodedata.category(c) == "Cf"
               else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def safe_cut(text: str, at: int) -> int:
    """``at`` moved back so that ``text[:at]`` does not end inside a character's sequence: not
    before a combining mark, not beside a zero-width joiner (an emoji sequence), not inside a CRLF."""
    at = min(at, len(text))
    while 0 < at < len(text) and (unicodedata.category(text[at])[0] == "M" or text[at - 1] == "\u200d"
                                  or text[at] == "\u200d" or text[at - 1 : at + 1] == "\r\n"):
        at -= 1
    return at


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` with ``noun`` in the number it takes: ``1 document``, ``2 documents``, ``1,000 queries``
    (``plural`` where adding an s is wrong)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
