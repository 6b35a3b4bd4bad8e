"""Snippets of search hits: the window with the most query terms, its first hit near the start."""

from __future__ import annotations

from ckqti.text import Analyzer
from retriever.snippets import MAX_WORD, snippet


def test_the_window_with_most_hits_starts_just_before_its_first_hit():
    words = [f"w{i}" for i in range(100)]
    words[40], words[45], words[80] = "cells", "membrane", "cell"
    text = " ".join(words)
    out = snippet(text, {"cell", "membrane"}, Analyzer(), width=10, context=2, mark=("[", "]"))
    assert out.startswith("... w38 w39 [cells] w41") and "[membrane]" in out and out.endswith(" ...")
    assert "[cells]" in out[:20]  # a display cut at 20 characters still shows the first hit
    assert "[cell]" not in out  # the lone later hit is outside the best window


def test_no_hit_gives_the_beginning_and_long_words_are_cut():
    assert snippet("alpha beta gamma", {"zeta"}, Analyzer(), width=2) == "alpha beta ..."
    long = "x" * 5000
    out = snippet(f"{long} cell", {"cell"}, Analyzer(), mark=("[", "]"))
    assert len(out) < MAX_WORD + 10 and out.endswith("[cell]")
    assert snippet("", {"cell"}, Analyzer()) == ""
