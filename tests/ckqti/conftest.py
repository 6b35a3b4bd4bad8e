"""A tiny SciFact slice for the model and training tests: 40 train claims, their abstracts plus others,
lexical candidates; the tiny NDRM settings those tests build.

Candidates come from a small idf-weighted term-overlap ranking computed here, so no test
but the one marked slow starts Java.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from ckqti.text import Analyzer

SCIFACT = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "scifact"
TINY_MODEL = dict(dim=16, num_heads=4, conv_window=5, ff_dim=16, mlp_hidden=16, pool_window=20, pool_stride=10,
                  max_doc_terms=120, num_layers=1)


def overlap_candidates(queries: dict[str, str], docs: dict[str, str], depth: int) -> dict[str, list[str]]:
    """Docids ranked by the idf-weighted count of shared analyzed terms (a small lexical first stage)."""
    analyzer = Analyzer()
    doc_terms = {d: set(analyzer(t)) for d, t in docs.items()}
    df: dict[str, int] = {}
    for terms in doc_terms.values():
        for t in terms:
            df[t] = df.get(t, 0) + 1
    n = len(docs)
    out = {}
    for qid, text in queries.items():
        q = set(analyzer(text))
        scored = [(sum(np.log(n / df[t]) for t in q & terms), d) for d, terms in doc_terms.items()]
        out[qid] = [d for s, d in sorted(scored, key=lambda x: (-x[0], x[1]))[:depth] if s > 0]
    return out


@pytest.fixture(scope="session")
def tiny_scifact(tmp_path_factory) -> dict:
    """Corpus file, queries, qrels and candidates of a 40-claim SciFact slice (about 240 documents)."""
    if not SCIFACT.is_dir():
        pytest.skip("../shared/data/scifact is not present")
    rows = [line.rstrip("\n").split("\t") for line in (SCIFACT / "qrels" / "train.tsv").read_text().splitlines()[1:]]
    qrels: dict[str, dict[str, int]] = {}
    for qid, docid, grade in rows:
        if len(qrels) < 40 or qid in qrels:
            qrels.setdefault(qid, {})[docid] = int(grade)
    wanted = {d for judged in qrels.values() for d in judged}
    docs: dict[str, dict] = {}
    with open(SCIFACT / "corpus.jsonl") as f:
        for line in f:
            row = json.loads(line)
            if row["_id"] in wanted or len(docs) < 200:
                docs[row["_id"]] = row
    queries = {}
    with open(SCIFACT / "queries.jsonl") as f:
        for line in f:
            row = json.loads(line)
            if row["_id"] in qrels:
                queries[row["_id"]] = row["text"]
    path = tmp_path_factory.mktemp("tiny") / "corpus.jsonl"
    path.write_text("".join(json.dumps(docs[d]) + "\n" for d in docs))
    texts = {d: r["title"] + "\n" + r["text"] for d, r in docs.items()}
    titles = {"title:" + d: r["title"] for d, r in itertools.islice(docs.items(), None)}
    candidates = overlap_candidates({**queries, **titles}, texts, 100)
    return {"corpus": path, "queries": queries, "qrels": qrels, "candidates": candidates, "docs": texts}
