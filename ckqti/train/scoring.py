"""Scoring (query, document) pairs with a trained model: validation reranking and rerank runs.

Each document is encoded once however many queries rank it (the encoder is the expensive
part), in batches of similar length so little padding is computed; its encoding is then
gathered for every query that has it as a candidate. Documents are truncated to the model's
``max_doc_terms`` and carry their true lengths, as at indexing time. Training encodes each
batch's documents the same way (:func:`encode_by_length`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ckqti.models.inputs import pad_rows
from ckqti.models.qti import DocumentEncoding
from ckqti.train.data import Collection

PAIR_ELEMENTS = 1 << 23  # bound on (pairs x query terms x positions x kernels) scored at once
# documents of a training batch encoded at once on the CPU: SciFact's batches of 96 documents pad to 3.0
# times their terms in one call, to 1.2 times in groups of 16 of similar length (the encoder is most of a
# step's work: NDRM1/NDRM3 steps 2-5x faster). Not on a GPU, where padding is cheap and each call is
# launches: NDRM3 on an H200 took 8.4-9.8 steps/s in groups against 36-40 in one call (session 38,
# scripts/bench_train.py --models ndrm3 --devices cuda).
ENCODE_GROUP = 16


def encode_group(device: torch.device) -> int | None:
    """Documents :func:`encode_by_length` encodes at once on ``device``: :data:`ENCODE_GROUP` on the
    CPU, else None (the whole batch in one call)."""
    return ENCODE_GROUP if device.type == "cpu" else None


def _kernels(model: nn.Module) -> int:
    return int(getattr(getattr(model, "config", None), "num_kernels", 1))


def _select(enc: DocumentEncoding, rows: torch.Tensor) -> DocumentEncoding:
    vectors = None if enc.vectors is None else enc.vectors.index_select(0, rows)
    return DocumentEncoding(enc.ids.index_select(0, rows), enc.mask.index_select(0, rows),
                            enc.lengths.index_select(0, rows), vectors)


def encode_by_length(model: nn.Module, rows: Sequence[np.ndarray], lengths: torch.Tensor, device: torch.device,
                     group: int | None = None) -> DocumentEncoding:
    """``model.encode_documents`` of the id ``rows`` padded into one batch, rows in their order, with gradients;
    but encoded ``group`` rows at a time in order of length, so that little padding is encoded (an NDRM
    encoding of a document does not depend on the padding beside it). ``lengths``: ``[B]`` true lengths.
    ``group`` None: :func:`encode_group`'s for ``device`` (on a GPU, the whole batch in one call).

    Dropout masks are drawn group by group: in training mode the encoding is another draw of the same
    distribution as one call's, and equal to it without dropout.

    Shape:
        ``B = len(rows)`` rows -> a :class:`~ckqti.models.qti.DocumentEncoding` with ids and mask
        ``[B, W]``, ``W = max(1, longest row)``, lengths ``[B]`` and vectors ``[B, W, D]`` (None for NDRM2).
    """
    group = encode_group(device) if group is None else group
    if group is None or len(rows) <= group:
        return model.encode_documents(pad_rows(rows).to(device), lengths)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    width = max([1] + [len(r) for r in rows])
    parts: list[DocumentEncoding] = []
    for start in range(0, len(order), group):
        part = order[start: start + group]
        ids = pad_rows([rows[i] for i in part]).to(device)  # [N, L]
        enc = model.encode_documents(ids, lengths[part])
        extra = width - ids.shape[1]  # padding up to the batch's width: zero vectors, as one call gives them
        parts.append(DocumentEncoding(F.pad(enc.ids, (0, extra)), F.pad(enc.mask, (0, extra)), enc.lengths,
                                      None if enc.vectors is None else F.pad(enc.vectors, (0, 0, 0, extra))))
    back = torch.as_tensor(np.argsort(order, kind="stable"), dtype=torch.long, device=device)  # rows' places in order

    def joined(tensors: list[torch.Tensor]) -> torch.Tensor:
        return torch.cat(tensors).index_select(0, back)

    vectors = None if parts[0].vectors is None else joined([p.vectors for p in parts])
    return DocumentEncoding(joined([p.ids for p in parts]), joined([p.mask for p in parts]),
                            joined([p.lengths for p in parts]), vectors)


def _score_batch(
    model: nn.Module, chunk: Sequence[int], askers: Mapping[int, list[str]], queries: Mapping[str, torch.Tensor],
    collection: Collection, max_doc_terms: int, device: torch.device,
) -> list[tuple[str, int, float]]:
    """Encode the documents of ``chunk`` once; score every (query, document) pair among them."""
    ids = pad_rows([collection.doc(d) for d in chunk], max_doc_terms).to(device)  # [B, L]
    lengths = torch.tensor([len(collection.doc(d)) for d in chunk], dtype=torch.float32, device=device)  # [B]
    enc = model.encode_documents(ids, lengths)
    pairs = [(qid, row, d) for row, d in enumerate(chunk) for qid in askers[d]]
    width = max(len(queries[qid]) for qid, _, _ in pairs) if pairs else 1
    step = max(1, PAIR_ELEMENTS // max(1, width * ids.shape[1] * _kernels(model)))
    out = []
    for start in range(0, len(pairs), step):
        part = pairs[start : start + step]
        rows = torch.tensor([row for _, row, _ in part], device=device)
        query = pad_rows([queries[qid] for qid, _, _ in part]).to(device)  # [P, Q]
        scores = model.encoded_term_scores(query, _select(enc, rows)).sum(-1)  # [P]
        out.extend((qid, d, float(s)) for (qid, _, d), s in zip(part, scores.tolist()))
    return out


def score_pairs(
    model: nn.Module,
    queries: Mapping[str, np.ndarray],
    collection: Collection,
    candidates: Mapping[str, Sequence[int]],
    batch_size: int = 32,
    max_doc_terms: int = 4000,
    device: torch.device | str | None = None,
    progress: bool = False,
) -> dict[str, dict[int, float]]:
    """``qid -> {document index: score}`` for every candidate of every query (queries without ids skipped).

    The model is put in eval mode and run without gradients; its training mode is restored.
    """
    from ckqti.progress import progress_bar

    device = torch.device(device) if device is not None else next(model.parameters()).device
    askers: dict[int, list[str]] = defaultdict(list)
    for qid, docs in candidates.items():
        if qid in queries:
            for d in dict.fromkeys(docs):
                askers[d].append(qid)
    order = sorted(askers, key=lambda d: (len(collection.doc(d)), d))
    q_tensors = {qid: torch.as_tensor(queries[qid], dtype=torch.long) for qid in candidates if qid in queries}
    result: dict[str, dict[int, float]] = {qid: {} for qid in q_tensors}
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            starts = range(0, len(order), batch_size)
            for start in progress_bar(starts, desc="scoring", unit="batch", show=progress, leave=False):
                chunk = order[start : start + batch_size]
                for qid, d, s in _score_batch(model, chunk, askers, q_tensors, collection, max_doc_terms, device):
                    result[qid][d] = s
    finally:
        model.train(was_training)
    return result


def as_run(scores: Mapping[str, Mapping[int, float]], docids: Sequence[str]) -> dict[str, dict[str, float]]:
    """Index-keyed scores as a run ``qid -> {docid: score}``."""
    return {qid: {docids[d]: s for d, s in by_doc.items()} for qid, by_doc in scores.items()}
