"""Snippets: the window of a document's words that holds the most query terms."""

from __future__ import annotations

import re

from ckqti.text import Analyzer

_WORD = re.compile(r"\S+")
MAX_WORD = 40  # characters a snippet shows of one word (a URL or a run of text without spaces)


def snippet(text: str, query_terms: set[str], analyzer: Analyzer, width: int = 30, context: int = 3,
            mark: tuple[str, str] = ("", "")) -> str:
    """The ``width``-word window of ``text`` with the most words analyzing to a query term,
    starting ``context`` words before its first such word (so that a display cut short still shows
    it), each such word wrapped in ``mark`` and every word cut at :data:`MAX_WORD` characters."""
    words = _WORD.findall(text)
    if not words:
        return ""
    hits = [1 if set(analyzer(w)) & query_terms else 0 for w in words]
    best, best_at, run = -1, 0, 0
    for i, h in enumerate(hits):
        run += h
        if i >= width:
            run -= hits[i - width]
        if run > best:
            best, best_at = run, max(0, i - width + 1)
    first = next((i for i in range(best_at, min(best_at + width, len(words))) if hits[i]), best_at)
    start = max(best_at, first - context)  # the words dropped before it hold no hit: the window keeps them all
    shown = [shorten(w) for w in words[start : start + width]]
    shown = [f"{mark[0]}{w}{mark[1]}" if hits[start + i] else w for i, w in enumerate(shown)]
    prefix = "... " if start > 0 else ""
    suffix = " ..." if start + width < len(words) else ""
    return prefix + " ".join(shown) + suffix


def shorten(word: str) -> str:
    return word if len(word) <= MAX_WORD else word[: MAX_WORD - 1] + "…"
