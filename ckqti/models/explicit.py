"""An explicit term-matching channel for the TK and TKL re-rankers (an option, not in their papers).

CK-QTI (seed 002) adds to its latent model an explicit one, NDRM2's BM25-like
``idf * tf' / (tf' + ReLU(w dl' + b))`` per query term, and NDRM3 combines the two scores of
each term by ``BatchNorm1d(2) -> Linear(2, 1)``; on SciFact here that is what lifts NDRM3 above
BM25 (``docs/EFFECTIVENESS.md``). :class:`ExplicitCombiner` gives TK and TKL the same second
channel: the model's document score and NDRM2's score (summed over the query terms) combined by
a BatchNorm and a linear layer. TK and TKL do not score query terms independently (TKL picks its
regions from the sum over query terms), so the combination is per document, not per term as in
NDRM3.

NDRM2 reads the ids the model reads: the query and the document after the model's caps, so a
document's length is its length up to the cap (TK's 200 terms, TKL's 2,000), where the NDRM models
normalise by the untruncated length.

In training mode the BatchNorm normalises over the documents of one call, so a query's
relevant and non-relevant documents must be scored in the same call (the re-ranker trainer
does); in eval mode the combination is the affine map :meth:`ExplicitCombiner.combination`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ckqti.models.ndrm2 import NDRM2
from ckqti.models.ndrm_config import NDRMConfig


class ExplicitCombiner(nn.Module):
    """``[model score, NDRM2 score] -> BatchNorm1d(2) -> Linear(2, 1)`` per document.

    Args:
        vocab_size: rows of NDRM2's idf buffer (the model's vocabulary).

    Shape:
        ``explicit_scores``: query_ids ``[B, Q]``, doc_ids ``[B, L]`` long (0 = padding, 1 =
        unknown) -> ``[B]``; ``forward``: score ``[B]``, explicit ``[B]`` -> ``[B]``.
    """

    def __init__(self, vocab_size: int):
        super().__init__()
        self.explicit = NDRM2(NDRMConfig(vocab_size=vocab_size, variant="ndrm2"))
        self.norm = nn.BatchNorm1d(2)
        self.linear = nn.Linear(2, 1)

    def set_collection(self, vocab) -> None:
        """NDRM2's idf and prior mean document length from a collection's vocabulary."""
        self.explicit.set_collection(vocab)

    def explicit_scores(self, query_ids: Tensor, doc_ids: Tensor) -> Tensor:
        """NDRM2's score of each document: its query terms' explicit scores summed -> ``[B]``."""
        return self.explicit(query_ids, doc_ids)

    def forward(self, score: Tensor, explicit: Tensor) -> Tensor:
        """The model's score combined with :meth:`explicit_scores`' -> ``[B]``."""
        return self.linear(self.norm(torch.stack([score, explicit], dim=-1))).squeeze(-1)  # [B, 2] -> [B]

    def combination(self) -> tuple[float, float, float]:
        """``(a, b, c)`` with ``forward == a * score + b * explicit + c`` in eval mode."""
        norm, w = self.norm, self.linear.weight.detach().double()[0]  # [2]
        scale = norm.weight.detach().double() / torch.sqrt(norm.running_var.double() + norm.eps)  # [2]
        offset = norm.bias.detach().double() - norm.running_mean.double() * scale  # [2]
        a, b = (w * scale).tolist()
        return a, b, float(self.linear.bias.detach().double()[0] + (w * offset).sum())

    def match_init(self) -> None:
        """Start as NDRM2 alone (weights ``(0, 1)``, bias 0), as NDRM3's match initialisation does:
        the model's own score gets weight as far as training finds it useful."""
        with torch.no_grad():
            self.linear.weight.copy_(torch.tensor([[0.0, 1.0]]))
            self.linear.bias.zero_()
