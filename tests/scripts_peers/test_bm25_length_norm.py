"""scripts/bm25_length_norm.py: exhaustive BM25 over analyzed terms, NDRM2's idf, length normalised by b."""

from __future__ import annotations

import math

import pytest

from scripts.bm25_length_norm import bm25_run, term_matrix

DOCS = [["cell", "protein", "cell", "z"], ["protein", "z"], ["gene", "z"], ["gene", "cell", "z"], ["x", "z"], ["y", "y"]]
IDS = [f"d{i}" for i in range(len(DOCS))]


def expected(k1, b, doc, tf, df):
    """One term's BM25 in document ``doc``: 6 documents, 2.5 terms on average."""
    idf = max(math.log((6 - df + 0.5) / (df + 0.5)), 0.0)
    return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(DOCS[doc]) / 2.5))


@pytest.mark.parametrize("k1, b", [(0.9, 0.4), (1.2, 0.75), (1.0, 0.0)])
def test_bm25_run_scores_every_document_with_length_normalisation(k1, b):
    tf, vocab = term_matrix(DOCS)
    assert tf.shape == (6, 6) and tf[0, vocab["cell"]] == 2
    run = bm25_run(tf, vocab, {"q1": ["cell", "z", "unknown"], "q2": ["protein", "protein"]}, IDS, k1, b)
    # z is in 5 of 6 documents: idf clipped at 0 (not negative), so it adds nothing and matches nothing
    assert run["q1"] == pytest.approx({"d0": expected(k1, b, 0, 2, 2), "d3": expected(k1, b, 3, 1, 2)})
    # a term twice in the query counts twice
    assert run["q2"] == pytest.approx({"d0": 2 * expected(k1, b, 0, 1, 2), "d1": 2 * expected(k1, b, 1, 1, 2)})
    assert list(run["q2"]) == (["d1", "d0"] if b > 0 else ["d0", "d1"])  # b > 0: the shorter document wins
    assert list(bm25_run(tf, vocab, {"q": ["protein"]}, IDS, k1, b, depth=1)["q"]) == list(run["q2"])[:1]
