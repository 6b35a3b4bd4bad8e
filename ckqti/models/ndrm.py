"""NDRM1, NDRM2 and NDRM3: the query-term-independent models of seed paper 002.

Every model scores each query term alone against a document and sums the term scores,
so ``forward(q, d) == term_scores(q, d).sum(-1)`` and every ``s(t, d)`` can be stored in
an index (:mod:`ckqti.models.qti`). All three share one scoring path,
:meth:`QTIScorer.encoded_term_scores`, used by ``term_scores`` (training, reranking) and by
``score_encoded`` (indexing).

Term ids: 0 = padding, 1 = unknown (:mod:`ckqti.vocab`). Query terms with id 0 or 1 score
exactly 0 in every model: padding by definition, and an unknown query term has no learned
meaning (and no posting list to store it in), so full retrieval and reranking agree.

- NDRM1 (latent): query term = ``Linear(embedding(t))`` (not contextualised); document
  terms = per-dimension mix of the raw embedding and the Conformer output; cosine -> 10
  RBF kernels -> sums over windows of 300 terms, stride 100 -> ``log(x + 1e-6)`` -> MLP
  ``K -> 256 -> ReLU -> dropout -> 1`` per window -> max over windows.
- NDRM2 (explicit): ``idf * tf' / (tf' + ReLU(w dl' + b) + eps)`` with BatchScale means.
- NDRM3: per term ``[latent, explicit] -> BatchNorm1d(2) -> Linear(2, 1)``.
- Gated latent channel (an option, not in the paper: ``NDRMConfig.latent_gate = tau``):
  NDRM1's score of a term is ``softplus(score)`` where the term occurs in the document or
  its query vector reaches cosine ``tau`` with one of the document's vectors, and 0
  elsewhere (:class:`LatentGate`). The paper's latent channel scores every term against
  every document, so no index of bounded size reproduces it; a gated model's unstored pairs
  all score the same per-term constant, so its learned index is exact up to quantization.
- BM25 start (an option, not in the paper: ``NDRMConfig.bm25_init = (k1, b)``): NDRM2's
  ``w, b`` start at ``k1 b, k1 (1 - b)``, so that untrained (mean tf 1, mean dl the
  collection's) it ranks as BM25 with those parameters instead of the paper's ``k1 = 1, b = 1``.
  ``ckqti index --model ndrm2-anserini`` is NDRM2 untrained from Anserini's defaults
  (0.9, 0.4), the parameters of the BM25 baseline the evaluation compares against. With
  ``explicit_fixed`` the channel keeps that start through training, its length mean then
  always the collection's own: a trained NDRM3 whose explicit half is exactly that BM25 on
  any collection.

Each model is a composition of small ``nn.Module``s, one module a model: :mod:`ckqti.models.ndrm1`,
:mod:`ckqti.models.ndrm2`, :mod:`ckqti.models.ndrm3`, over :mod:`ckqti.models.ndrm_base` (the
scoring path they share) and :mod:`ckqti.models.ndrm_config` (:class:`NDRMConfig`). Each model's
module lists where it departs from the paper and the reference code (Mitra's
TREC-Deep-Learning-Quick-Start). This module builds the models (:func:`build_ndrm`) and is where other code imports them from; a
trained model is read for another collection's vocabulary by :func:`ckqti.models.checkpoint.adapt_to_vocabulary`.
"""

from __future__ import annotations

import torch

from ckqti.models.ndrm1 import NDRM1, EmbeddingMix, LatentGate, WindowedKernelScorer
from ckqti.models.ndrm2 import NDRM2, BatchScale
from ckqti.models.ndrm3 import NDRM3, TermCombiner
from ckqti.models.ndrm_base import QTIScorer, occurrences, query_term_mask
from ckqti.models.ndrm_config import VARIANTS, NDRMConfig
from ckqti.vocab import Vocabulary

__all__ = [
    "NDRM1", "NDRM2", "NDRM3", "MODELS", "VARIANTS", "BatchScale", "EmbeddingMix", "LatentGate", "NDRMConfig",
    "QTIScorer", "TermCombiner", "WindowedKernelScorer", "build_ndrm", "occurrences",
    "query_term_mask",
]

MODELS: dict[str, type[QTIScorer]] = {"ndrm1": NDRM1, "ndrm2": NDRM2, "ndrm3": NDRM3}


def build_ndrm(config: NDRMConfig, vocab: Vocabulary | None = None, device: torch.device | str | None = None) -> QTIScorer:
    """The model named by ``config.variant``, with ``vocab``'s statistics attached when given."""
    model = MODELS[config.variant](config)
    if vocab is not None:
        model.set_collection(vocab)
    return model.to(device) if device is not None else model
