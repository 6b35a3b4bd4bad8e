"""Snippets of search hits: the window with the most query terms, its first hit near the start."""

from __future__ import annotations

import re

from ckqti.terminal import columns_of
from ckqti.text import Analyzer
from retriever.snippets import MAX_WORD, clip, shorten, snippet


def test_the_window_with_most_hits_starts_just_before_its_first_hit():
    words = [f"w{i}" for i in range(100)]
    words[40], words[45], words[80] = "cells", "membrane", "cell"
    text = " ".join(words)
    out = snippet(text, {"cell", "membrane"}, Analyzer(), width=10, context=2, mark=("[", "]"))
    assert out.startswith("... w38 w39 [cells] w41") and "[membrane]" in out and out.endswith(" ...")
    assert "[cells]" in out[:20]  # a display cut at 20 characters still shows the first hit
    assert "[cell]" not in out  # the lone later hit is outside the best window


def test_marks_wrap_the_matching_letters_not_the_punctuation_around_them():
    """The demo showed ``[people.he]`` and ``[life:]``: the whole whitespace-delimited word was marked."""
    analyzer = Analyzer()
    out = snippet("daily life: the people.he and Thai. cells-membranes (cell)", set(analyzer("life people thai cell")),
                  analyzer, mark=("[", "]"))
    assert out == "daily [life]: the [people].he and [Thai]. [cells]-membranes ([cell])"
    cut = "x" * MAX_WORD + "-cell"  # a hit whose matching letters the cut of a long word drops: the word is marked whole
    assert snippet(cut, {"cell"}, Analyzer(), mark=("[", "]")) == "[" + "x" * (MAX_WORD - 1) + "\u2026]"


def test_a_mark_closes_after_the_accents_of_a_decomposed_word_not_before_them():
    """``cafe\u0301`` (``café`` written in NFD) is read as ``cafe``: its mark closed before the
    accent, which then sat on the closing bracket (``[cafe]\u0301``); explain already kept it inside."""
    analyzer = Analyzer()
    assert snippet("the cafe\u0301 in Zu\u0308rich", {"cafe", "rich"}, analyzer, mark=("[", "]")) == \
        "the [cafe\u0301] in Zu\u0308[rich]"
    assert snippet("cafe\u0301s.", {"cafe"}, analyzer, mark=("[", "]")) == "[cafe\u0301]s."  # s is not a term: an unmarked run


def test_no_hit_gives_the_beginning_and_long_words_are_cut():
    assert snippet("alpha beta gamma", {"zeta"}, Analyzer(), width=2) == "alpha beta ..."
    long = "x" * 5000
    out = snippet(f"{long} cell", {"cell"}, Analyzer(), mark=("[", "]"))
    assert len(out) < MAX_WORD + 10 and out.endswith("[cell]")
    assert snippet("", {"cell"}, Analyzer()) == ""


def _reference(text, query_terms, analyzer, width, context, mark):
    """The window rule written plainly: every word analyzed, every window summed."""
    words = text.split()
    hits = [1 if set(analyzer(w)) & query_terms else 0 for w in words]
    best, best_at = -1, 0
    for last in range(len(words)):
        at = max(0, last - width + 1)
        if sum(hits[at : last + 1]) > best:
            best, best_at = sum(hits[at : last + 1]), at
    first = next((i for i in range(best_at, min(best_at + width, len(words))) if hits[i]), best_at)
    start = 0 if len(words) <= width else max(best_at, first - context)  # a text that fits is shown whole

    def marked(w):  # the runs of ASCII letters and digits that analyze to a query term, else the whole word
        runs = re.split("([0-9A-Za-z]+)", w)
        out = [f"{mark[0]}{r}{mark[1]}" if i % 2 and set(analyzer(r)) & query_terms else r for i, r in enumerate(runs)]
        return "".join(out) if out != runs else f"{mark[0]}{w}{mark[1]}"

    shown = [marked(w) if hits[start + i] else w for i, w in enumerate(words[start : start + width])]
    return ("... " if start else "") + " ".join(shown) + (" ..." if start + width < len(words) else "")


def test_matches_the_plain_rule_on_random_texts():
    import random

    rng, analyzer = random.Random(7), Analyzer()
    vocab = ["cells", "Cell", "membrane,", "the", "of", "protein", "x", "Proteins.", "\u00a0", "\t", "\n"]
    for _ in range(300):
        text = " ".join(rng.choice(vocab) for _ in range(rng.randrange(0, 60)))
        width, context = rng.randrange(1, 12), rng.randrange(0, 4)
        terms = set(analyzer(" ".join(rng.sample(["cell", "membrane", "protein", "zeta"], 2))))
        assert snippet(text, terms, analyzer, width, context, ("[", "]")) == _reference(
            text, terms, analyzer, width, context, ("[", "]")), (text, terms, width, context)


def test_clip_cuts_between_words_in_terminal_columns():
    assert columns_of("caf\u00e9 cafe\u0301 \u7d30\u80de \U0001f469\u200d\U0001f469") == 4 + 1 + 4 + 1 + 4 + 1 + 4
    line = "[cell] growth of the [membrane] proteins"
    assert clip(line, 100) == line
    assert clip(line, 30) == "[cell] growth of the ..."  # "[membrane]" would not fit whole: no "[membr"
    assert clip("\u7d30\u80de\u819c " * 10, 12) == "\u7d30\u80de\u819c ..."  # 6 + 1 + 4 columns
    assert clip("aaa bbb ccc", 7) == "aaa ..."  # exactly the columns: the word fits
    assert clip("x" * 50, 10) == "x" * 9 + "\u2026"
    assert clip("cafe\u0301" * 10, 5) == "cafe\u0301\u2026"  # never between a letter and its accent
    assert clip("\U0001f469\u200d\U0001f469\u200d\U0001f467" * 3, 8) == "\U0001f469\u200d\U0001f469\u200d\U0001f467\u2026"


def test_clip_never_exceeds_its_columns_and_keeps_every_word_that_fits():
    """At every width: the line (its " ..." included) fits, and no further whole word would have."""
    line = "[cell] growth of the \u7d30\u80de [membrane] proteins aaa bbb ccc"
    for columns in range(1, columns_of(line) + 2):
        out = clip(line, columns)
        assert columns_of(out) <= columns, (columns, out)
        if out.endswith(" ..."):
            kept = out[: -len(" ...")].split(" ")
            more = " ".join(line.split(" ")[: len(kept) + 1]) + " ..."
            assert columns_of(more) > columns, (columns, out)
    assert clip("aaa bbb ccc", 10) == "aaa ..."  # "aaa bbb ..." takes 11


def test_a_long_word_is_cut_before_an_accent_or_a_joined_emoji_not_inside():
    assert shorten("a" * MAX_WORD) == "a" * MAX_WORD and shorten("a" * (MAX_WORD + 1)) == "a" * (MAX_WORD - 1) + "\u2026"
    word = "a" * (MAX_WORD - 2) + "e\u0301" + "tail"
    assert shorten(word) == "a" * (MAX_WORD - 2) + "\u2026"
    joined = "a" * (MAX_WORD - 2) + "\U0001f469\u200d\U0001f469" + "tail"
    assert shorten(joined) == "a" * (MAX_WORD - 2) + "\u2026"


def test_a_snippet_cut_to_columns_drops_context_words_to_show_its_first_hit():
    text = " ".join(["x" * 60, "y" * 60, "z" * 60, "cells", "grow"])
    out = snippet(text, {"cell"}, Analyzer(), mark=("[", "]"), columns=60)
    assert "[cells]" in out and columns_of(out) <= 60
    assert snippet(text, {"cell"}, Analyzer(), mark=("[", "]")).startswith("x" * (MAX_WORD - 1))  # no cut asked
    # the cut's " ..." takes 4 columns: a first hit ending in them would be cut off, so a context word goes
    assert snippet("delta cells beta", {"cell"}, Analyzer(), mark=("[", "]"), columns=15) == "... [cells] ..."


def test_a_short_text_that_fits_is_shown_whole():
    """A text shorter than the snippet started 3 words before its first hit all the same:
    ``... and iron supplements [vitamin]`` hid the words that fit before it."""
    text = "Daily folic acid and iron supplements vitamin"
    terms, analyzer = {"vitamin"}, Analyzer()
    whole = "Daily folic acid and iron supplements [vitamin]"
    assert snippet(text, terms, analyzer, mark=("[", "]")) == whole
    assert snippet(text, terms, analyzer, mark=("[", "]"), columns=len(whole)) == whole
    narrow = snippet(text, terms, analyzer, mark=("[", "]"), columns=40)  # too wide for the columns: cut as before
    assert narrow == "... and iron supplements [vitamin]"
    longer = snippet(" ".join(["w"] * 40 + [text]), terms, analyzer, mark=("[", "]"))  # more words than the window
    assert longer.startswith("... and iron supplements [vitamin]")
