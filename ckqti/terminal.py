"""Text from documents, queries, ids and file names made safe to print on a terminal."""

from __future__ import annotations

import re

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


def decoded_argument(text: str) -> str:
    """A command-line argument with bytes that are not UTF-8 (which Python keeps as lone
    surrogates) replaced by U+FFFD, so that it prints, encodes and goes into JSON as text."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
