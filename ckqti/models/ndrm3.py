"""NDRM3: NDRM1's and NDRM2's score of each query term combined by ``BatchNorm1d(2) -> Linear(2, 1)``.

Parts: :class:`TermCombiner` (the per-term combination) and :class:`NDRM3`; the family and its
options: :mod:`ckqti.models.ndrm`.

Choices where paper, reference code and SPEC differ (reference: Mitra's
TREC-Deep-Learning-Quick-Start):

- NDRM3's BatchNorm sees only real query terms (the reference normalises padded positions
  too, then masks them).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import torch
from torch import Tensor, nn

from ckqti.models.ndrm1 import NDRM1
from ckqti.models.ndrm2 import NDRM2
from ckqti.models.ndrm_base import QTIScorer, query_term_mask
from ckqti.models.ndrm_config import NDRMConfig
from ckqti.models.qti import DocumentEncoding
from ckqti.vocab import Vocabulary


class TermCombiner(nn.Module):
    """NDRM3's per-term combination ``[latent, explicit] -> BatchNorm1d(2) -> Linear(2, 1)``.

    BatchNorm statistics come from real query terms only.

    Shape:
        features ``[B, Q, 2]``, mask ``[B, Q]`` bool -> ``[B, Q]``, zero where mask is False.
    """

    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm1d(2)
        self.linear = nn.Linear(2, 1)

    def forward(self, features: Tensor, mask: Tensor) -> Tensor:
        out = features.new_zeros(mask.shape)  # [B, Q]
        picked = features[mask]  # [N, 2]
        if picked.shape[0]:
            out = out.masked_scatter(mask, self.linear(self.norm(picked)).squeeze(-1))
        return out


class NDRM3(QTIScorer):
    """NDRM1 and NDRM2 scores of each query term combined by :class:`TermCombiner`.

    In training mode the BatchNorm normalises over the real query terms of one call: score
    a query's relevant and non-relevant documents in the same call (as the reference code
    does, ``[Q x D x Tq]``), or the normalisation erases the difference between them.

    Shape:
        ``term_scores``: query ``[B, Q]``, doc ``[B, L]`` -> ``[B, Q]``; ``forward`` -> ``[B]``.
    """

    is_latent = True

    def __init__(self, config: NDRMConfig):
        super().__init__(config)
        self.latent = NDRM1(replace(config, variant="ndrm1"))
        self.explicit = NDRM2(replace(config, variant="ndrm2"))
        self.combine = TermCombiner()
        self._combination: tuple[float, float, float] | None = None  # set by :meth:`frozen_weights` only

    def set_collection(self, vocab: Vocabulary) -> None:
        super().set_collection(vocab)
        self.explicit.set_collection(vocab)

    def load_embeddings(self, matrix: Tensor) -> None:
        self.latent.load_embeddings(matrix)

    def _work_per_position(self) -> int:
        return self.latent._work_per_position()

    def encode_documents(self, ids: Tensor, lengths: Tensor | None = None) -> DocumentEncoding:
        return self.latent.encode_documents(ids, lengths)

    def term_vectors(self, terms: Tensor) -> Tensor:
        return self.latent.term_vectors(terms)

    @contextmanager
    def frozen_weights(self, term_table: Tensor) -> Iterator[None]:
        """:meth:`NDRM1.frozen_weights`, and :meth:`combination` computed once for the block."""
        with self.latent.frozen_weights(term_table):
            self._combination = self.combination()
            try:
                yield
            finally:
                self._combination = None

    @property
    def gate_threshold(self) -> float | None:
        return self.latent.gate_threshold

    def closed_pair_score(self) -> float:
        """The ``"one"`` channel of a pair the latent gate closes: ``a * 0 + c = c`` (:meth:`combination`)."""
        return self.combination()[2]

    def encoded_term_scores(self, query: Tensor, docs: DocumentEncoding) -> Tensor:
        latent = self.latent.encoded_term_scores(query, docs)  # [B, Q]
        explicit = self.explicit.encoded_term_scores(query, docs)  # [B, Q]
        mask = query_term_mask(query).expand_as(latent)  # [B, Q]
        return self.combine(torch.stack([latent, explicit], dim=-1), mask)  # [B, Q]

    impact_channels = ("one", "idf")

    def combination(self) -> tuple[float, float, float]:
        """``(a, b, c)`` with ``combine(latent, explicit) == a * latent + b * explicit + c`` in eval mode
        (BatchNorm with its running statistics, then the linear layer, is affine)."""
        norm, linear = self.combine.norm, self.combine.linear
        if not norm.track_running_stats or norm.running_mean is None:
            raise ValueError("NDRM3's BatchNorm keeps no running statistics: its combination is not affine")
        var = norm.running_var.double()
        gain = torch.ones(2, dtype=torch.float64) if norm.weight is None else norm.weight.detach().double()
        shift = torch.zeros(2, dtype=torch.float64) if norm.bias is None else norm.bias.detach().double()
        scale = gain.to(var.device) / torch.sqrt(var + norm.eps)  # [2]
        offset = shift.to(var.device) - norm.running_mean.double() * scale  # [2]
        w = linear.weight.detach().double()[0]  # [2]
        a, b = (w * scale).tolist()
        c = float(linear.bias.detach().double()[0] + (w * offset).sum())
        return a, b, c

    def encoded_channel_scores(self, query: Tensor, docs: DocumentEncoding) -> Tensor:
        """Channel "one" = ``a * latent + c``, channel "idf" = ``b * g`` with ``g`` NDRM2's idf-free factor."""
        a, b, c = self._combination or self.combination()
        if b < 0:
            raise ValueError(
                f"NDRM3 weighs exact-match evidence negatively (b = {b:.4g}): its idf channel cannot be stored as impacts"
            )
        latent = self.latent.encoded_term_scores(query, docs)  # [B, Q]
        explicit = self.explicit.idf_free_scores(query, docs)  # [B, Q]
        mask = query_term_mask(query).expand_as(latent)  # [B, Q]
        return torch.stack([(a * latent + c) * mask, b * explicit], dim=-1)  # [B, Q, 2]

    def index_constants(self) -> dict[str, float]:
        return self.explicit.index_constants()

    def set_index_constants(self, constants: dict[str, float]) -> None:
        self.explicit.set_index_constants(constants)
