"""Snippets: the window of a document's words that holds the most query terms."""

from __future__ import annotations

import numpy as np

from ckqti.text import Analyzer

MAX_WORD = 40  # characters a snippet shows of one word (a URL or a run of text without spaces)


def snippet(text: str, query_terms: set[str], analyzer: Analyzer, width: int = 30, context: int = 3,
            mark: tuple[str, str] = ("", "")) -> str:
    """The ``width``-word window of ``text`` with the most words analyzing to a query term,
    starting ``context`` words before its first such word (so that a display cut short still shows
    it), each such word wrapped in ``mark`` and every word cut at :data:`MAX_WORD` characters."""
    words = text.split()  # runs of non-whitespace (str.split's whitespace is re's \s)
    if not words:
        return ""
    hit_of: dict[str, int] = {}  # a word's verdict, analyzed once however often it recurs
    hits = [hit_of[w] if w in hit_of else hit_of.setdefault(w, 1 if set(analyzer(w)) & query_terms else 0)
            for w in words]
    ends = np.cumsum(hits)  # ends[i]: hits in words[: i + 1]
    window = ends - np.concatenate((np.zeros(min(width, len(hits)), ends.dtype), ends[:-width]))
    last = int(np.argmax(window))  # the first window (by its last word) holding the most hits
    best_at = max(0, last - width + 1)
    first = next((i for i in range(best_at, min(best_at + width, len(words))) if hits[i]), best_at)
    start = max(best_at, first - context)  # the words dropped before it hold no hit: the window keeps them all
    shown = [shorten(w) for w in words[start : start + width]]
    shown = [f"{mark[0]}{w}{mark[1]}" if hits[start + i] else w for i, w in enumerate(shown)]
    prefix = "... " if start > 0 else ""
    suffix = " ..." if start + width < len(words) else ""
    return prefix + " ".join(shown) + suffix


def shorten(word: str) -> str:
    return word if len(word) <= MAX_WORD else word[: MAX_WORD - 1] + "…"
