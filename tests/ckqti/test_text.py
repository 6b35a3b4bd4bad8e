"""The analyzer: a capped analysis equals the whole one's first terms and reads only a prefix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckqti.text import Analyzer, non_ascii_readings

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"

TRICKY = [
    "The BRCA1 gene's role in DNA-repair: 12 cases (İstanbul, ﬁbrosis)!",
    "a" * 5000 + " b",  # one huge token, then another
    "The " * 2000 + "end",  # stopwords only, then a term
    "Running runs RAN; " * 500,
    "",
]


def scifact_texts(n: int) -> list[str]:
    if not DATA.is_dir():
        pytest.skip("../shared/data is not present")
    with open(DATA / "scifact" / "corpus.jsonl") as f:
        return [json.loads(next(f))["text"] for _ in range(n)]


@pytest.mark.parametrize("analyzer", [Analyzer(), Analyzer(stemmer="none", stopwords="none", lowercase=False)])
def test_prefix_equals_the_whole_analysis_cut(analyzer):
    texts = scifact_texts(300)
    texts += [" ".join(texts[i : i + 30]) for i in range(0, 300, 30)] + TRICKY
    for text in texts:
        whole = analyzer(text)
        for n in (0, 1, 7, 200, 2000, len(whole), len(whole) + 1):
            assert analyzer.prefix(text, n) == whole[:n]
        assert analyzer.prefix(text, None) == whole


def test_prefix_stems_only_what_it_returns_and_a_little_more():
    text = " ".join(scifact_texts(40))  # ~8,000 terms
    analyzer = Analyzer()
    calls = []
    stem = analyzer.stem
    object.__setattr__(analyzer, "stem", lambda t: calls.append(t) or stem(t))
    assert len(analyzer.prefix(text, 200)) == 200
    assert 200 <= len(calls) < 800


def test_digits_are_kept_as_terms():
    """The tokenizer keeps ASCII digits (``[^0-9a-z]+`` separates tokens): a number is a term of
    its own, and a hyphen splits a code like COVID-19 into two."""
    assert Analyzer()("COVID-19 cases in 2020") == ["covid", "19", "case", "2020"]
    assert Analyzer(stemmer="none", stopwords="none")("COVID-19 cases in 2020") == ["covid", "19", "cases", "in", "2020"]


def test_prefix_lower_cases_before_cutting_chunks():
    """``prefix`` lower-cases the whole text before it looks for a separator to cut a chunk at:
    on the original text an upper-case letter matches ``[^0-9a-z]``, so a chunk could end
    inside a word and split it into two terms. Words longer than the first chunk's 12
    characters a term leave ``prefix`` short after its first chunk, so a cut word would show."""
    a = Analyzer()
    words = ["PneumonoUltraMicroscopicSilicoVolcano", "HIPPOPOTOMONSTROSESQUIPPEDALIOPHOBIA",
             "FloccinaucinihilipilificationIsLong"]
    text = " ".join(words * 150)
    whole = a(text)
    assert whole[:3] == [w.lower() for w in words] and len(whole) == 450
    for n in (1, 2, 3, 5, 7, 17, 50, 200):
        assert a.prefix(text, n) == whole[:n], n


@pytest.mark.parametrize("analyzer", [Analyzer(), Analyzer(stemmer="none"), Analyzer(stopwords="none"),
                                      Analyzer(stemmer="none", stopwords="none", lowercase=False)])
def test_an_analyzer_comes_back_from_its_manifest_form(analyzer):
    """An index records ``to_dict`` and is only searched with an equal analyzer: every setting returns."""
    again = Analyzer.from_dict(json.loads(json.dumps(analyzer.to_dict())))
    assert again == analyzer and again("The Cells ran") == analyzer("The Cells ran")


def test_an_unknown_stemmer_or_stopword_list_is_refused():
    """Not read as no stemming (an index of unstemmed terms under a name that says otherwise)."""
    with pytest.raises(ValueError, match="unknown stemmer 'porter'"):
        Analyzer(stemmer="porter")
    with pytest.raises(ValueError, match="unknown stopword list 'french'"):
        Analyzer(stopwords="french")


def test_non_ascii_readings_name_each_word_with_a_foreign_letter_once():
    """The search note lists words holding a non-ASCII letter or digit (not punctuation like a dash),
    each once, with the terms the analyzer reads of it."""
    text = "naïve cells — 日本 naïve ok ２"
    assert non_ascii_readings(text, Analyzer()) == [("naïve", ["na", "ve"]), ("日本", []), ("２", [])]


@pytest.mark.parametrize("lowercase", [True, False])
def test_words_are_the_pieces_the_regular_expression_split_text_into(lowercase):
    """``words`` finds tokens through UTF-8 bytes, not ``[^0-9a-z]+``: every character outside ASCII is
    a separator as before, also one that lower-cases to ASCII (the Kelvin sign is ``k``), a lone
    surrogate (``\\ud800``, which UTF-8 cannot hold) and whitespace ``str.split`` knows (U+001C, NBSP)."""
    import re

    texts = TRICKY + scifact_texts(50) + [
        "\u212aelvin caf\u00e9 na\u00efve \ud800lone\udfffsurrogate x\x1cy\u00a0z\u3000w \u00c5ngstr\u00f6m",
        "tab\tnew\nline\r\x00nul \U0001f600emoji 3.14e-10 COVID-19 \u0130stanbul \u1e9e",
    ]
    analyzer = Analyzer(lowercase=lowercase)
    for text in texts:
        cased = text.lower() if lowercase else text
        assert analyzer.words(text) == [t for t in re.split(r"[^0-9a-z]+", cased) if t]
