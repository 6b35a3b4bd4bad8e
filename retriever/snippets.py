"""Snippets: the window of a document's words that holds the most query terms."""

from __future__ import annotations

import re

from ckqti.text import Analyzer

_WORD = re.compile(r"\S+")


def snippet(text: str, query_terms: set[str], analyzer: Analyzer, width: int = 30) -> str:
    """The ``width``-word window of ``text`` with the most words analyzing to a query term."""
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
    window = words[best_at : best_at + width]
    prefix = "... " if best_at > 0 else ""
    suffix = " ..." if best_at + width < len(words) else ""
    return prefix + " ".join(window) + suffix
