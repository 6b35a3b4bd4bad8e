"""The analyzer: a capped analysis equals the whole one's first terms and reads only a prefix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckqti.text import Analyzer

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
