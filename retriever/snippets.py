"""Snippets: the window of a document's words that holds the most query terms."""

from __future__ import annotations

import re

import numpy as np

from ckqti.terminal import columns_of, safe_cut
from ckqti.text import Analyzer, past_marks

MAX_WORD = 40  # characters a snippet shows of one word (a URL or a run of text without spaces)
_RUN = re.compile(r"[0-9A-Za-z]+")  # what the analyzer reads of a word: its ASCII letters and digits


def snippet(text: str, query_terms: set[str], analyzer: Analyzer, width: int = 30, context: int = 3,
            mark: tuple[str, str] = ("", ""), columns: int | None = None) -> str:
    """The ``width``-word window of ``text`` with the most words analyzing to a query term,
    starting ``context`` words before its first such word (so that a display cut short still shows
    it), every word cut at :data:`MAX_WORD` characters and the query terms in it wrapped in ``mark``
    (:func:`marked`); a text that fits (in ``width`` words and ``columns``) is shown whole.

    ``columns``: the snippet is cut (:func:`clip`) to that many terminal columns, with fewer
    context words where they would push the first marked word past the cut."""
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

    def shown_from(start: int) -> str:
        shown = [shorten(w) for w in words[start : start + width]]
        shown = [marked(w, query_terms, analyzer, mark) if hits[start + i] else w for i, w in enumerate(shown)]
        prefix = "... " if start > 0 else ""
        suffix = " ..." if start + width < len(words) else ""
        return prefix + " ".join(shown) + suffix

    if len(words) <= width:  # a short text fits whole ("... and iron [supplements]" hid what fit)
        whole = shown_from(0)
        if columns is None or columns_of(whole) <= columns:
            return whole
    if columns is None:
        return shown_from(start)
    first_shown = marked(shorten(words[first]), query_terms, analyzer, mark) if hits[first] else ""

    def first_hit_ends(start: int) -> int:  # columns up to the end of the first marked word
        return columns_of(("... " if start else "") + " ".join([*(shorten(w) for w in words[start:first]), first_shown]))

    while start < first and hits[first] and first_hit_ends(start) + 4 > columns:  # clip keeps 4 for " ..."
        start += 1  # the first marked word does not fit: one context word fewer
    return clip(shown_from(start), columns)


def marked(word: str, query_terms: set[str], analyzer: Analyzer, mark: tuple[str, str]) -> str:
    """``word`` with each run of letters and digits that analyzes to a query term wrapped in ``mark``,
    its punctuation left outside (``[life]:``, ``[people].he``); the whole word when no run does alone
    (a term that a long word's cut left out, or a character that lower-cases to an ASCII letter)."""
    out, pos = [], 0
    for m in _RUN.finditer(word):
        if set(analyzer(m.group())) & query_terms:
            end = past_marks(word, m.end())  # a decomposed accent stays on its letter, not on the closing mark
            out += [word[pos : m.start()], mark[0], word[m.start() : end], mark[1]]
            pos = end
    if not out:
        return f"{mark[0]}{word}{mark[1]}"
    return "".join(out) + word[pos:]


def shorten(word: str) -> str:
    return word if len(word) <= MAX_WORD else word[: safe_cut(word, MAX_WORD - 1)] + "…"


def clip(line: str, columns: int) -> str:
    """``line`` in at most ``columns`` terminal columns (:func:`columns_of`): cut at a space, never
    inside a word (nor the marks around one), with `` ...`` where it was cut; a first word too
    wide for that is cut between characters, with ``…``."""
    if columns_of(line) <= columns:
        return line
    words, kept, used = line.split(" "), [], 0
    for w in words:
        need = columns_of(w) + (1 if kept else 0)
        if used + need + 4 > columns:  # room for " ..."
            break
        kept.append(w)
        used += need
    if kept:
        out = " ".join(kept)
        return out if out.endswith("...") else out + " ..."
    cut, used = 0, 0
    while cut < len(line) and used + columns_of(line[cut]) < columns:  # room for "…"
        used += columns_of(line[cut])
        cut += 1
    return line[: safe_cut(line, cut)] + "…"
