"""Training-test helpers over the tiny SciFact slice (``tiny_scifact`` in tests/ckqti/conftest.py)."""

from __future__ import annotations


def graded_qrels(tiny: dict) -> tuple[dict[str, dict[str, int]], set[str]]:
    """The slice's judgements on a TREC DL-like scale: each judged document grade 2, and two of each
    query's unjudged top candidates grade 1 ("related"); the first 8 queries judged 1 at best.
    Returns the qrels and those 8 queries."""
    qrels: dict[str, dict[str, int]] = {}
    low = set(list(tiny["qrels"])[:8])
    for qid, judged in tiny["qrels"].items():
        related = [d for d in tiny["candidates"][qid] if d not in judged][:2]
        qrels[qid] = {**{d: 1 if qid in low else 2 for d in judged}, **{d: 1 for d in related}}
    return qrels, low


def bad_judgements(qrels: dict, kind: str) -> str:
    """A TREC qrels text: none, every judgement naming a document not in the corpus, or one query's."""
    if kind == "empty":
        return ""
    if kind == "unknown-docs":
        return "".join(f"{q} 0 nodoc-{d} 1\n" for q, j in qrels.items() for d in j)
    qid, judged = next(iter(qrels.items()))
    return "".join(f"{qid} 0 {d} 1\n" for d in judged)
