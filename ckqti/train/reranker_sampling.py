"""Each epoch's re-ranker training examples: one (query, relevant, non-relevant) triple or listwise group a query."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ckqti.train.reranker_data import PairData


def epoch_qids(data: PairData, seed: int, epoch: int, pseudo_per_epoch: int | None = None) -> list[str]:
    """The epoch's training queries: every judged one, then ``pseudo_per_epoch`` title
    pseudo-queries (all when None) drawn without replacement; a function of ``(seed, epoch)``."""
    from ckqti.train.pseudo import draw_pseudo

    return list(data.train_qids) + draw_pseudo(data.pseudo_qids, pseudo_per_epoch, np.random.default_rng([seed, epoch, 3]))


def training_pools(data: PairData, depth: int, qids: Sequence[str] | None = None):
    """``(qid, relevant documents sorted, non-relevant candidates of the top depth)`` of each training
    query (``qids``, default ``data.train_qids``) that has both, in that order."""
    for qid in data.train_qids if qids is None else qids:
        rel = sorted(data.relevant[qid])
        negs = [d for d in data.candidates.get(qid, [])[:depth] if d not in data.relevant[qid]]
        if rel and negs:
            yield qid, rel, negs


def epoch_triples(data: PairData, depth: int, seed: int, epoch: int,
                  pseudo_per_epoch: int | None = None) -> list[tuple[str, int, int]]:
    """One ``(qid, relevant, non-relevant)`` triple per training query, shuffled; a function of ``(seed, epoch)``.

    The non-relevant document is drawn from the query's top ``depth`` candidates that are not
    judged relevant (queries without one are skipped).
    """
    rng = np.random.default_rng([seed, epoch])
    out = []
    for qid, rel, negs in training_pools(data, depth, epoch_qids(data, seed, epoch, pseudo_per_epoch)):
        out.append((qid, rel[int(rng.integers(len(rel)))], negs[int(rng.integers(len(negs)))]))
    return [out[i] for i in rng.permutation(len(out))]


def epoch_groups(data: PairData, depth: int, seed: int, epoch: int, negatives: int,
                 pseudo_per_epoch: int | None = None) -> list[tuple[str, int, tuple[int, ...]]]:
    """One ``(qid, relevant, (non-relevant, ...))`` group per training query, shuffled; a function of ``(seed, epoch)``.

    ``negatives`` distinct documents of the query's top ``depth`` candidates that are not judged
    relevant (drawn with replacement only when the query has fewer), so every group has the same size.
    """
    rng = np.random.default_rng([seed, epoch, negatives])
    out = []
    for qid, rel, negs in training_pools(data, depth, epoch_qids(data, seed, epoch, pseudo_per_epoch)):
        picked = rng.choice(len(negs), size=negatives, replace=len(negs) < negatives)
        out.append((qid, rel[int(rng.integers(len(rel)))], tuple(negs[int(i)] for i in picked)))
    return [out[i] for i in rng.permutation(len(out))]
