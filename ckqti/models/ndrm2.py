"""NDRM2, explicit term matching: ``idf * tf' / (tf' + ReLU(w dl' + b) + eps)`` per query term.

Parts: :class:`BatchScale` (``x / mean(x)``, for tf and dl) and :class:`NDRM2`; the family and its
options: :mod:`ckqti.models.ndrm`.

Choices where paper, reference code and SPEC differ (reference: Mitra's
TREC-Deep-Learning-Quick-Start):

- BatchScale: the reference's running mean of tf also counts padded query positions;
  here only real query terms (ids > 1, with tf = 0 included as in the reference) count, so
  the statistic does not depend on the batch's padding width. Means are kept exactly (float64
  sum and count). Before any training sample is seen, the mean of tf is 1 and the mean of
  dl is the collection's mean document length (set by :meth:`NDRM2.set_collection`), so an
  untrained NDRM2 is ``idf * tf / (tf + dl / avgdl)``: BM25 with ``k1 = 1, b = 1`` (without
  the constant ``k1 + 1`` factor).
- tf counts the occurrences of the term in the ids given (after any truncation); dl is
  ``doc_lengths`` when given (the reference uses the untruncated length), else the count of
  real ids.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ckqti.models.ndrm_base import QTIScorer, occurrences, query_term_mask
from ckqti.models.ndrm_config import NDRMConfig
from ckqti.models.qti import DocumentEncoding, document_lengths
from ckqti.vocab import Vocabulary


class BatchScale(nn.Module):
    """``x / mean(x)``, the mean an exact running mean over every training sample seen.

    In training mode the batch's real samples are added to a float64 sum and count first
    (so the batch is scaled by a mean that includes it, as in the reference code); in eval
    mode the mean is frozen. Before any sample is seen the mean is ``prior``; a ``frozen``
    BatchScale never takes samples (``NDRMConfig.explicit_fixed``).

    Shape:
        x ``[*]``, mask ``[*]`` bool or None (which samples count) -> ``[*]``.
    """

    def __init__(self, prior: float = 1.0, frozen: bool = False):
        super().__init__()
        self.frozen = frozen  # never takes samples: the mean stays ``prior``
        self.register_buffer("total", torch.zeros((), dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("prior", torch.tensor(float(prior), dtype=torch.float64))

    @property
    def mean(self) -> Tensor:
        return torch.where(self.count > 0, self.total / self.count.clamp_min(1.0), self.prior)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        if self.training and not self.frozen:
            samples = x.detach() if mask is None else x.detach()[mask]
            self.total += samples.to(torch.float64).sum()
            self.count += samples.numel()
        return x / self.mean.clamp_min(1e-12).to(x.dtype)


class NDRM2(QTIScorer):
    """Explicit term matching: ``idf * tf' / (tf' + ReLU(w dl' + b) + eps)`` per query term.

    Two learned parameters (``w`` init 1, ``b`` init 0, or BM25's under
    ``NDRMConfig.bm25_init``); idf is a buffer set by :meth:`set_collection`. ``s(t, d) = 0`` exactly when ``t`` does not occur in ``d``.

    Shape:
        ``term_scores``: query ``[B, Q]``, doc ``[B, L]`` -> ``[B, Q]``; ``forward`` -> ``[B]``.
    """

    is_latent = False

    def __init__(self, config: NDRMConfig):
        super().__init__(config)
        self.length_weight = nn.Parameter(torch.empty(()))
        self.length_bias = nn.Parameter(torch.empty(()))
        self.register_buffer("idf", torch.zeros(config.vocab_size))
        self.tf_scale = BatchScale(1.0, frozen=config.explicit_fixed)
        self.length_scale = BatchScale(1.0, frozen=config.explicit_fixed)
        self.reset_parameters()
        if config.explicit_fixed:
            self.length_weight.requires_grad_(False)
            self.length_bias.requires_grad_(False)

    def reset_parameters(self) -> None:
        """``w = 1, b = 0`` (the paper), or ``w = k1 b, b = k1 (1 - b)`` under ``bm25_init = (k1, b)``."""
        k1, b = (1.0, 1.0) if self.config.bm25_init is None else self.config.bm25_init
        nn.init.constant_(self.length_weight, k1 * b)
        nn.init.constant_(self.length_bias, k1 * (1.0 - b))

    def set_collection(self, vocab: Vocabulary) -> None:
        super().set_collection(vocab)
        self.idf.copy_(torch.as_tensor(vocab.idf(), dtype=self.idf.dtype))  # a float64 model's idf unrounded
        self.length_scale.prior.fill_(max(vocab.mean_doc_length, 1e-6))

    def encode_documents(self, ids: Tensor, lengths: Tensor | None = None) -> DocumentEncoding:
        return DocumentEncoding(ids, ids != 0, document_lengths(ids, lengths, self.idf.dtype), None)

    def encoded_term_scores(self, query: Tensor, docs: DocumentEncoding) -> Tensor:
        return self.idf[query] * self.idf_free_scores(query, docs)  # [B, Q]

    impact_channels = ("idf",)

    def idf_free_scores(self, query: Tensor, docs: DocumentEncoding) -> Tensor:
        """``tf' / (tf' + ReLU(w dl' + b) + eps)``: the score without its idf factor -> ``[B, Q]``
        (0 for padding and unknown query terms)."""
        counts = occurrences(query, docs.ids, docs.mask).sum(-1).to(self.idf.dtype)  # [B, Q]
        real = query_term_mask(query).expand_as(counts)  # [B, Q]
        tf = self.tf_scale(counts, real)  # [B, Q]
        dl = self.length_scale(docs.lengths)  # [B]
        saturation = F.relu(self.length_weight * dl + self.length_bias).unsqueeze(1)  # [B, 1]
        return tf / (tf + saturation + self.config.eps) * real  # [B, Q]

    def encoded_channel_scores(self, query: Tensor, docs: DocumentEncoding) -> Tensor:
        return self.idf_free_scores(query, docs).unsqueeze(-1)  # [B, Q, 1]

    def index_constants(self) -> dict[str, float]:
        """The prior mean document length where it is the length mean: an untrained or fixed
        (``explicit_fixed``) model's. A trained one's mean comes from its training samples and is
        part of the checkpoint, so it has no constant to record."""
        if self.length_scale.count > 0 and not self.length_scale.frozen:
            return {}
        return {"length_prior": float(self.length_scale.prior)}

    def set_index_constants(self, constants: dict[str, float]) -> None:
        unknown = set(constants) - {"length_prior"}
        if unknown:
            raise ValueError(f"NDRM2 index constants are length_prior only, got {sorted(unknown)}")
        if "length_prior" in constants:
            self.length_scale.prior.fill_(float(constants["length_prior"]))
