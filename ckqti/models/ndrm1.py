"""NDRM1, latent matching: the Conformer-Kernel with query term independence.

Parts: :class:`EmbeddingMix` (the document terms' mix of embedding and Conformer output),
:class:`WindowedKernelScorer` (kernel window sums -> MLP -> max over windows), :class:`LatentGate`
(the gated latent channel, an option) and :class:`NDRM1`; the family and its options:
:mod:`ckqti.models.ndrm`.

Choices where paper, reference code and SPEC differ (reference: Mitra's
TREC-Deep-Learning-Quick-Start):

- Document mix: SPEC's learned *per-dimension* mix ``w0[h] emb[h] + w1[h] ctx[h] + b[h]``
  (init ``0.5, 0.5, 0``); the reference's ``Linear(2, 1)`` shares one pair of weights across
  all dimensions (a special case).
- Windows: the reference pads every document to 4,000 terms and average-pools (window 300,
  stride 100) without masking all-padding windows. Here a window starts at every 100th
  position inside the (padded) input, windows that run past the end are summed over what
  exists, and windows without a real term are masked out of the max; so a score depends
  only on the document's real terms, never on how much padding the batch adds. For a full
  4,000-term document this adds two tail windows (starts 3,800 and 3,900) that the
  reference lacks. A document without real terms scores 0 for every query term.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ckqti.models.conformer import ConformerEncoder
from ckqti.models.kernels import RBFKernels, ck_mus, masked_max, windowed_kernel_sums
from ckqti.models.ndrm_base import QTIScorer, occurrences, query_term_mask
from ckqti.models.ndrm_config import NDRMConfig
from ckqti.models.qti import DocumentEncoding, document_lengths


class EmbeddingMix(nn.Module):
    """Per-dimension learned mix of two term representations: ``w0 * a + w1 * b + bias``.

    Shape:
        a ``[..., D]``, b ``[..., D]`` -> ``[..., D]``.
    """

    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(2, dim))
        self.bias = nn.Parameter(torch.empty(dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.constant_(self.weight, 0.5)
        nn.init.zeros_(self.bias)

    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        return a * self.weight[0] + b * self.weight[1] + self.bias


class WindowedKernelScorer(nn.Module):
    """Kernel activations -> window sums -> ``log(x + eps)`` -> MLP per window -> max over real windows.

    Shape:
        activations ``[..., L, K]``, mask ``[..., L]`` bool (broadcastable) -> ``[...]``.
    """

    def __init__(self, num_kernels: int, hidden: int, window: int, stride: int, dropout: float, eps: float):
        super().__init__()
        self.window, self.stride, self.eps = window, stride, eps
        self.mlp = nn.Sequential(nn.Linear(num_kernels, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, 1))

    def forward(self, activations: Tensor, mask: Tensor) -> Tensor:
        windows = windowed_kernel_sums(activations, mask, self.window, self.stride)  # [..., W, K]
        per_window = self.mlp(torch.log(windows.sums + self.eps)).squeeze(-1)  # [..., W]
        return masked_max(per_window, windows.mask, dim=-1)  # [...]


class LatentGate(nn.Module):
    """Which (term, document) pairs a gated latent channel scores, and their non-negative scores.

    A pair is open when the term occurs in the document or its query vector's cosine with some
    real document vector reaches ``tau``; an open pair scores ``softplus(x)`` (> 0), a closed one
    exactly 0. Every closed pair of a term thus scores the same, which an index reproduces
    without storing it: the indexer stores the open pairs (:class:`indexer.impacts.ImpactScorer`)
    and its top-k equals the model's exhaustive ranking up to quantization. The gate itself
    passes no gradient; ``softplus`` keeps the open scores above the closed ones while staying
    differentiable everywhere.

    Shape:
        pool: ``[N, L]`` cosines, ``[N, L]`` mask -> ``[N]`` (one row per open pair); cos
        ``[B, Q, L]``, query ``[B or 1, Q]``, doc ids ``[B, L]``, doc mask ``[B, L]`` -> ``[B, Q]``.
    """

    def __init__(self, tau: float):
        super().__init__()
        self.tau = float(tau)

    def open_pairs(self, cos: Tensor, query: Tensor, ids: Tensor, mask: Tensor) -> Tensor:
        """``[B, Q]`` bool: pairs the gate lets through."""
        near = masked_max(cos, mask.unsqueeze(1), dim=-1, empty=-2.0) >= self.tau  # [B, Q]
        own = occurrences(query, ids, mask).any(-1)  # [B, Q]
        return near | own

    def forward(self, pool: Callable[[Tensor, Tensor], Tensor], cos: Tensor, query: Tensor, ids: Tensor,
                mask: Tensor) -> Tensor:
        """``softplus(pool(cos, mask))`` at the open pairs, 0 at the closed ones; ``pool`` (``[N, L]``
        cosines and mask -> ``[N]`` scores, one row per pair) runs on the open pairs only, so a
        scan of many terms (``score_encoded``) pays the kernels and the MLP for the few it opens."""
        open_ = self.open_pairs(cos, query, ids, mask)  # [B, Q]
        b, q = open_.nonzero(as_tuple=True)  # [N] each
        scores = F.softplus(pool(cos.expand(open_.shape[0], -1, -1)[b, q], mask[b]))  # [N]
        return scores.new_zeros(open_.shape).index_put((b, q), scores)  # [B, Q]

    def extra_repr(self) -> str:
        return f"tau={self.tau}"


class NDRM1(QTIScorer):
    """Latent matching: Conformer-Kernel with query term independence.

    Shape:
        ``term_scores``: query ``[B, Q]``, doc ``[B, L]`` -> ``[B, Q]``; ``forward`` -> ``[B]``;
        ``encode_documents``: ids ``[B, L]`` -> vectors ``[B, L, D]``; ``term_vectors``: ``[T]`` -> ``[T, D]``.
    """

    is_latent = True

    def __init__(self, config: NDRMConfig):
        super().__init__(config)
        self.embedding = nn.Embedding(config.vocab_size, config.dim, padding_idx=0)
        self.embedding.weight.requires_grad_(config.train_embeddings)
        self.query_proj = nn.Linear(config.dim, config.dim)
        self.encoder = ConformerEncoder(config.conformer())
        self.mix = EmbeddingMix(config.dim)
        self.kernels = RBFKernels(ck_mus(config.num_kernels), config.kernel_sigma)
        self.pooling = WindowedKernelScorer(
            config.num_kernels, config.mlp_hidden, config.pool_window, config.pool_stride, config.dropout, config.eps
        )
        self.gate = None if config.latent_gate is None else LatentGate(config.latent_gate)
        self._term_table: Tensor | None = None  # set by :meth:`frozen_weights` only

    def load_embeddings(self, matrix: Tensor) -> None:
        """Copy an initial ``[vocab_size, dim]`` embedding matrix (row 0 is zeroed: padding)."""
        if tuple(matrix.shape) != tuple(self.embedding.weight.shape):
            raise ValueError(f"embedding matrix {tuple(matrix.shape)} != {tuple(self.embedding.weight.shape)}")
        with torch.no_grad():
            self.embedding.weight.copy_(torch.as_tensor(matrix, dtype=self.embedding.weight.dtype))
            self.embedding.weight[0].zero_()

    def _work_per_position(self) -> int:
        return 2 * self.config.num_kernels

    def encode_documents(self, ids: Tensor, lengths: Tensor | None = None) -> DocumentEncoding:
        mask = ids != 0  # [B, L]
        emb = self.embedding(ids)  # [B, L, D]
        ctx = self.encoder(emb, mask)  # [B, L, D]
        vectors = F.normalize(self.mix(emb, ctx), dim=-1) * mask.unsqueeze(-1)  # [B, L, D]
        return DocumentEncoding(ids, mask, document_lengths(ids, lengths, emb.dtype), vectors)

    def term_vectors(self, terms: Tensor) -> Tensor:
        if self._term_table is not None:
            return self._term_table[terms]  # [..., D]
        return F.normalize(self.query_proj(self.embedding(terms)), dim=-1)  # [..., D]

    @contextmanager
    def frozen_weights(self, term_table: Tensor) -> Iterator[None]:
        """A block in which the weights do not change (indexing scores every document with one model):
        :meth:`term_vectors` reads ``term_table`` ``[V, D]``, which the caller computed once as
        ``term_vectors(arange(V))``, instead of projecting a document's candidate terms again for each
        document. Restored on exit."""
        self._term_table = term_table
        try:
            yield
        finally:
            self._term_table = None

    @property
    def gate_threshold(self) -> float | None:
        """The latent gate's cosine threshold, None for the dense latent channel."""
        return None if self.gate is None else self.gate.tau

    def closed_pair_score(self) -> float:
        """The ``"one"`` channel of a pair the latent gate closes (NDRM1: 0)."""
        return 0.0

    def encoded_term_scores(self, query: Tensor, docs: DocumentEncoding) -> Tensor:
        if docs.vectors is None:
            raise ValueError("NDRM1 needs document vectors: encode the documents with this model")
        cos = self.term_vectors(query) @ docs.vectors.transpose(1, 2)  # [B or 1, Q, D] @ [B, D, L] -> [B, Q, L]
        if self.gate is None:
            scores = self.pooling(self.kernels(cos), docs.mask.unsqueeze(1))  # [B, Q, L, K] activations -> [B, Q]
        else:
            scores = self.gate(lambda c, m: self.pooling(self.kernels(c), m), cos, query, docs.ids, docs.mask)  # [B, Q]
        return scores * query_term_mask(query)
