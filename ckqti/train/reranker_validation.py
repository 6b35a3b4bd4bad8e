"""Validating a re-ranker: its rerank of the dev queries' candidates, and their mean nDCG@10."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from ckqti.models.inputs import pad_rows
from ckqti.train.reranker_config import RerankerTrainConfig
from ckqti.train.reranker_data import PairData
from ckqti.train.reranker_epoch import ScoreFn


def rerank_scores(score: ScoreFn, data: PairData, qids: Sequence[str], depth: int, batch_size: int,
                  device: torch.device) -> dict[str, dict[str, float]]:
    """A run ``qid -> {docid: score}`` of the top ``depth`` candidates of ``qids`` (no gradients). A TK or TKL
    model as ``score`` encodes each candidate once for all the queries that rank it
    (:func:`~ckqti.models.reranker.score_encoded_pairs`), as a rerank does; another scores pair by pair."""
    if hasattr(score, "encode_document") and hasattr(score, "score_encoded"):
        return encoded_rerank_scores(score, data, qids, depth, batch_size, device)
    run: dict[str, dict[str, float]] = {}
    with torch.no_grad():
        for qid in qids:
            cands = data.candidates.get(qid, [])[:depth]
            order = sorted(cands, key=lambda i: len(data.docs[i]))
            scores: dict[str, float] = {}
            for start in range(0, len(order), batch_size):
                part = order[start: start + batch_size]
                d = pad_rows([data.docs[i] for i in part]).to(device)
                q = pad_rows([data.queries[qid]]).to(device).expand(len(part), -1)
                scores.update(zip((data.docids[i] for i in part), score(q, d).tolist()))
            run[qid] = scores
    return run


def encoded_rerank_scores(model: nn.Module, data: PairData, qids: Sequence[str], depth: int, batch_size: int,
                          device: torch.device) -> dict[str, dict[str, float]]:
    """:func:`rerank_scores` of a TK or TKL model, each distinct candidate encoded once for every dev query
    that ranks it (pair by pair, SciFact's validation of 81 dev queries' top 100 took 2-3 times as long)."""
    from ckqti.models.reranker import score_encoded_pairs

    cands = {qid: list(dict.fromkeys(data.candidates.get(qid, [])[:depth])) for qid in qids}
    docs = list(dict.fromkeys(d for ds in cands.values() for d in ds))  # distinct candidates
    at = {d: n for n, d in enumerate(docs)}
    pairs = np.array([(q, at[d]) for q, qid in enumerate(qids) for d in cands[qid]], dtype=np.int64).reshape(-1, 2)
    scores = score_encoded_pairs(model, [data.queries[qid] for qid in qids], [data.docs[d] for d in docs], pairs,
                                 device, batch_size).tolist()
    run: dict[str, dict[str, float]] = {qid: {} for qid in qids}
    for (q, d), s in zip(pairs.tolist(), scores):
        run[qids[q]][data.docids[docs[d]]] = s
    return run


def validate(score: ScoreFn, model: nn.Module, data: PairData, config: RerankerTrainConfig,
             device: torch.device) -> float:
    """Mean nDCG@10 of the dev queries reranking their top ``dev_depth`` candidates."""
    from ckqti.evaluate import evaluate

    was = model.training
    model.eval()
    try:
        run = rerank_scores(score, data, data.dev_qids, config.dev_depth, config.eval_batch_size, device)
    finally:
        model.train(was)
    return float(evaluate(run, data.dev_qrels, ["nDCG@10"]).mean["nDCG@10"])
