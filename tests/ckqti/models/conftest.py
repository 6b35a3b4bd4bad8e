"""The SciFact slice the NDRM tests (test_ndrm*.py) score: 8 train claims, their abstracts and 8 others."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckqti.text import Analyzer
from ckqti.vocab import Vocabulary
from tests.ckqti.models.ndrm_helpers import pad

SCIFACT = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "scifact"


@pytest.fixture(scope="module")
def scifact():
    """8 SciFact train claims, each with one relevant abstract and one other abstract (60 terms max)."""
    qrels = [line.split("\t") for line in (SCIFACT / "qrels" / "train.tsv").read_text().splitlines()[1:]]
    pairs = [(q, d) for q, d, _ in qrels][:8]
    queries = {}
    for line in (SCIFACT / "queries.jsonl").open():
        row = json.loads(line)
        queries[row["_id"]] = row["text"]
    docs = {}
    for line in (SCIFACT / "corpus.jsonl").open():
        row = json.loads(line)
        docs[row["_id"]] = row["title"] + " " + row["text"]
        if len(docs) >= 400:
            break
    analyzer = Analyzer()
    relevant = {d for _, d in pairs}
    others = [d for d in docs if d not in relevant][:8]
    for _, d in pairs:  # relevant abstracts may lie beyond the first 400 lines
        docs.setdefault(d, None)
    if any(v is None for v in docs.values()):
        for line in (SCIFACT / "corpus.jsonl").open():
            row = json.loads(line)
            if docs.get(row["_id"], "") is None:
                docs[row["_id"]] = row["title"] + " " + row["text"]
    analyzed = {d: analyzer(docs[d])[:60] for d in list(relevant) + others}
    vocab = Vocabulary.build(analyzed.values())
    q = pad([vocab.ids(analyzer(queries[qid]))[:10] for qid, _ in pairs])
    pos = pad([vocab.ids(analyzed[d]) for _, d in pairs])
    neg = pad([vocab.ids(analyzed[d]) for d in others])
    return vocab, q, pos, neg
