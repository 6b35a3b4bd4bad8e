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
- NDRM3's BatchNorm sees only real query terms (the reference normalises padded positions
  too, then masks them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ckqti.models.conformer import ATTENTION_KINDS, ConformerConfig, ConformerEncoder
from ckqti.models.kernels import RBFKernels, ck_mus, masked_max, windowed_kernel_sums
from ckqti.models.qti import DocumentEncoding, document_lengths
from ckqti.vocab import UNK, Vocabulary

VARIANTS = ("ndrm1", "ndrm2", "ndrm3")


@dataclass(frozen=True)
class NDRMConfig:
    """One NDRM model's settings; defaults are the paper's / reference code's.

    Args:
        vocab_size: rows of the embedding and of the idf buffer (``len(vocabulary)``).
        variant: ``"ndrm1"`` (latent), ``"ndrm2"`` (explicit) or ``"ndrm3"`` (both).
        dim: embedding and encoder width (256: 128-d skip-gram IN + OUT).
        num_layers, num_heads, conv_window, ff_dim, dropout, attention, conv: the
            Conformer (:class:`ckqti.models.conformer.ConformerConfig`).
        num_kernels: RBF kernels, centres ``1 - 2i/K`` (10).
        kernel_sigma: RBF width (0.1).
        pool_window, pool_stride: kernel pooling windows (300, 100).
        mlp_hidden: hidden units of the per-window MLP (256).
        max_query_terms, max_doc_terms: input caps the data pipeline applies (20, 4,000);
            the model itself accepts any length. The query cap applies to training only: under
            QTI a query's score is the sum of its terms' scores, so search and rerank read them all.
        eps: NDRM2's denominator epsilon and the ``log(x + eps)`` of the kernel windows (1e-6).
        score_chunk_elements: bound on the largest intermediate of ``score_encoded``
            (terms are scored in chunks so that ``B * L * chunk * K`` stays below it).
        latent_gate: None (the paper's dense latent channel) or a cosine threshold ``tau`` in
            (0, 1]: the latent score of term t is ``softplus(score)`` where t occurs in the
            document or ``max_j cos(t, d_j) >= tau``, and exactly 0 elsewhere, so that an index
            storing those pairs is exact (:class:`LatentGate`).
        bm25_init: None (the paper's start, ``w = 1, b = 0``: BM25 with ``k1 = 1, b = 1``) or
            BM25's ``(k1, b)`` for NDRM2's (and NDRM3's explicit channel's) starting ``w = k1 b``
            and ``b = k1 (1 - b)``: untrained, NDRM2 is then BM25 with those parameters (without
            the constant ``k1 + 1``), e.g. ``(0.9, 0.4)``, Anserini's defaults
            (:data:`ckqti.models.specs.ANSERINI_BM25`; an option, not in the paper).
        explicit_fixed: NDRM2 (NDRM3's explicit channel) keeps its start: ``w, b`` are not trained
            and its BatchScale means never take training samples, so the mean tf stays 1 and the
            mean dl is whatever collection the model reads (:meth:`NDRM2.set_collection`). The
            channel is then BM25 with ``bm25_init``'s parameters on every collection, zero-shot
            included (an option, not in the paper; NDRM3 still trains its latent channel and the
            combination).
        train_embeddings: False keeps NDRM1's (NDRM3's latent) term embeddings at their initial
            rows (e.g. all-MiniLM-L6-v2's word vectors): the Conformer, the query projection and the
            heads train, the rows do not (an option, not in the paper).
    """

    vocab_size: int
    variant: str = "ndrm3"
    dim: int = 256
    num_layers: int = 2
    num_heads: int = 32
    conv_window: int = 31
    ff_dim: int = 256
    dropout: float = 0.2
    attention: str = "separable"
    conv: bool = True
    num_kernels: int = 10
    kernel_sigma: float = 0.1
    pool_window: int = 300
    pool_stride: int = 100
    mlp_hidden: int = 256
    max_query_terms: int = 20
    max_doc_terms: int = 4000
    eps: float = 1e-6
    score_chunk_elements: int = 1 << 24
    latent_gate: float | None = None
    bm25_init: tuple[float, float] | None = None
    explicit_fixed: bool = False
    train_embeddings: bool = True

    def __post_init__(self) -> None:
        if self.bm25_init is not None:  # JSON gives a list back: keep the frozen config hashable
            object.__setattr__(self, "bm25_init", tuple(float(x) for x in self.bm25_init))
            if len(self.bm25_init) != 2 or self.bm25_init[0] <= 0 or not 0.0 <= self.bm25_init[1] <= 1.0:
                raise ValueError(f"bm25_init must be None or (k1 > 0, 0 <= b <= 1), got {self.bm25_init}")
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        if self.vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2 (padding and unknown), got {self.vocab_size}")
        positive = ("num_kernels", "pool_window", "pool_stride", "mlp_hidden", "max_query_terms", "max_doc_terms")
        for name in positive + ("score_chunk_elements",):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.pool_stride > self.pool_window:
            raise ValueError(f"pool_stride ({self.pool_stride}) must not exceed pool_window ({self.pool_window})")
        if self.kernel_sigma <= 0 or self.eps <= 0:
            raise ValueError("kernel_sigma and eps must be positive")
        if self.attention not in ATTENTION_KINDS:
            raise ValueError(f"attention must be one of {ATTENTION_KINDS}, got {self.attention!r}")
        if self.latent_gate is not None and not 0.0 < self.latent_gate <= 1.0:
            raise ValueError(f"latent_gate must be None or in (0, 1], got {self.latent_gate}")
        self.conformer()  # validates the encoder settings

    def conformer(self) -> ConformerConfig:
        return ConformerConfig(
            dim=self.dim,
            num_layers=self.num_layers,
            num_heads=self.num_heads,
            conv_window=self.conv_window,
            ff_dim=self.ff_dim,
            dropout=self.dropout,
            attention=self.attention,
            conv=self.conv,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "NDRMConfig":
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown NDRMConfig fields: {sorted(unknown)}")
        return cls(**d)


def query_term_mask(query: Tensor) -> Tensor:
    """True at query terms that can score: not padding (0), not unknown (1).

    Shape:
        ``[..., Q]`` long -> ``[..., Q]`` bool.
    """
    return query > UNK


def occurrences(query: Tensor, ids: Tensor, mask: Tensor) -> Tensor:
    """True where query term ``q`` is the real document term at position ``l``.

    Shape:
        query ``[B or 1, Q]``, ids ``[B, L]``, mask ``[B, L]`` bool -> ``[B, Q, L]`` bool.
    """
    return (ids.unsqueeze(1) == query.unsqueeze(2)) & mask.unsqueeze(1)


class QTIScorer(nn.Module):
    """The scoring path shared by all NDRM variants (subclasses define ``encoded_term_scores``).

    Shape:
        ``term_scores``: query ``[B, Q]``, doc ``[B, L]`` -> ``[B, Q]``;
        ``forward``: -> ``[B]``; ``score_encoded``: terms ``[T]`` -> ``[B, T]``;
        ``channel_scores``: terms ``[T]`` -> ``[B, T, C]``, ``C = len(impact_channels)``.
    """

    is_latent: bool = True

    def __init__(self, config: NDRMConfig):
        super().__init__()
        self.config = config

    def encode_documents(self, ids: Tensor, lengths: Tensor | None = None) -> DocumentEncoding:
        raise NotImplementedError

    def encoded_term_scores(self, query: Tensor, docs: DocumentEncoding) -> Tensor:
        """Score each query term alone against ``docs`` (B documents) -> ``[B, Q]``.

        ``query`` is ``[B, Q]`` (one query per document) or ``[1, Q]`` (the same terms for
        every document, as ``score_encoded`` passes them).
        """
        raise NotImplementedError

    def term_vectors(self, terms: Tensor) -> Tensor | None:
        return None

    def _work_per_position(self) -> int:
        """Intermediate elements per (document position, term) pair when scoring."""
        return 1

    def set_collection(self, vocab: Vocabulary) -> None:
        """Attach a collection's statistics (idf, mean document length); checks the vocabulary size."""
        if len(vocab) != self.config.vocab_size:
            raise ValueError(f"vocabulary has {len(vocab)} terms, the model was built for {self.config.vocab_size}")

    def term_scores(self, query: Tensor, doc: Tensor, doc_lengths: Tensor | None = None) -> Tensor:
        if query.dim() != 2 or doc.dim() != 2 or query.shape[0] != doc.shape[0]:
            raise ValueError(f"expected query [B, Q] and doc [B, L], got {tuple(query.shape)} and {tuple(doc.shape)}")
        return self.encoded_term_scores(query, self.encode_documents(doc, doc_lengths))

    def forward(self, query: Tensor, doc: Tensor, doc_lengths: Tensor | None = None) -> Tensor:
        return self.term_scores(query, doc, doc_lengths).sum(-1)

    def score_encoded(self, terms: Tensor, docs: DocumentEncoding) -> Tensor:
        """Every term scored alone against the documents -> ``[B, T]``, in chunks of terms: ``terms [T]``
        against every document, or ``[B, T]`` a row of terms for each document (0, padding, scores 0)."""
        b, length = docs.ids.shape
        chunk = max(1, self.config.score_chunk_elements // max(1, b * length * self._work_per_position()))
        rows = terms if terms.dim() == 2 else terms.unsqueeze(0)  # [B or 1, T]
        parts = [self.encoded_term_scores(part, docs) for part in rows.split(chunk, dim=1)]  # [B, chunk] each
        if not parts:
            return docs.lengths.new_zeros(b, 0)
        return torch.cat(parts, dim=1)  # [B, T]

    impact_channels: tuple[str, ...] = ("one",)

    def encoded_channel_scores(self, query: Tensor, docs: DocumentEncoding) -> Tensor:
        """Idf-free channel scores of each query term alone -> ``[B, Q, C]`` (see :mod:`ckqti.models.qti`)."""
        return self.encoded_term_scores(query, docs).unsqueeze(-1)

    def channel_scores(self, terms: Tensor, docs: DocumentEncoding) -> Tensor:
        """Channel scores of every term of ``terms [T]`` against every document -> ``[B, T, C]``, in chunks;
        ``score_encoded == sum_c weight_c * channel_scores`` (eval mode only: frozen statistics).
        ``terms [B, T]`` gives each document its own terms (each scored alone, so a row's padding
        changes none of its other scores)."""
        if self.training:
            raise RuntimeError(f"{type(self).__name__}.channel_scores needs eval mode (call model.eval())")
        b, length = docs.ids.shape
        chunk = max(1, self.config.score_chunk_elements // max(1, b * length * self._work_per_position()))
        rows = terms if terms.dim() == 2 else terms.unsqueeze(0)  # [B or 1, T]
        parts = [self.encoded_channel_scores(part, docs) for part in rows.split(chunk, dim=1)]  # [B, chunk, C]
        if not parts:
            return docs.lengths.new_zeros(b, 0, len(self.impact_channels))
        return torch.cat(parts, dim=1)  # [B, T, C]

    def index_constants(self) -> dict[str, float]:
        """Collection statistics other than idf that stored impacts depend on (none by default)."""
        return {}

    def set_index_constants(self, constants: dict[str, float]) -> None:
        if constants:
            raise ValueError(f"{type(self).__name__} has no index constants, got {sorted(constants)}")


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


MODELS: dict[str, type[QTIScorer]] = {"ndrm1": NDRM1, "ndrm2": NDRM2, "ndrm3": NDRM3}


def build_ndrm(config: NDRMConfig, vocab: Vocabulary | None = None, device: torch.device | str | None = None) -> QTIScorer:
    """The model named by ``config.variant``, with ``vocab``'s statistics attached when given."""
    model = MODELS[config.variant](config)
    if vocab is not None:
        model.set_collection(vocab)
    return model.to(device) if device is not None else model


def adapt_to_vocabulary(
    model: QTIScorer, old_vocab: Vocabulary, new_vocab: Vocabulary, fallback: str = "minilm", composer=None
) -> QTIScorer:
    """A copy of ``model`` for another collection's vocabulary.

    Embedding rows are re-aligned by :func:`ckqti.embeddings.adapt_embeddings` (known terms
    keep their rows, new terms get ``fallback`` rows); idf and the prior mean document
    length come from ``new_vocab``; every other weight and the BatchScale statistics learned
    in training are kept. The copy is in eval mode on the model's device.
    """
    from ckqti.embeddings import adapt_embeddings

    if len(old_vocab) != model.config.vocab_size:
        raise ValueError(f"old vocabulary has {len(old_vocab)} terms, the model {model.config.vocab_size}")
    config = replace(model.config, vocab_size=len(new_vocab))
    device = next(iter(model.buffers())).device
    new = MODELS[config.variant](config).to(device)
    state = {k: v for k, v in model.state_dict().items() if not k.endswith(("embedding.weight", "idf"))}
    missing, unexpected = new.load_state_dict(state, strict=False)
    if unexpected or any(not k.endswith(("embedding.weight", "idf")) for k in missing):
        raise ValueError(f"state does not match {config.variant}: missing {missing}, unexpected {unexpected}")
    embedding = model.state_dict().get("embedding.weight", model.state_dict().get("latent.embedding.weight"))
    if embedding is not None:
        matrix = adapt_embeddings(embedding.detach().cpu().numpy(), old_vocab, new_vocab, fallback, composer)
        new.load_embeddings(torch.from_numpy(matrix))
    new.set_collection(new_vocab)
    return new.eval()
