"""NDRM1-3's settings, :class:`NDRMConfig` (the models: :mod:`ckqti.models.ndrm`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from ckqti.models.conformer import ATTENTION_KINDS, ConformerConfig

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
            storing those pairs is exact (:class:`ckqti.models.ndrm1.LatentGate`).
        bm25_init: None (the paper's start, ``w = 1, b = 0``: BM25 with ``k1 = 1, b = 1``) or
            BM25's ``(k1, b)`` for NDRM2's (and NDRM3's explicit channel's) starting ``w = k1 b``
            and ``b = k1 (1 - b)``: untrained, NDRM2 is then BM25 with those parameters (without
            the constant ``k1 + 1``), e.g. ``(0.9, 0.4)``, Anserini's defaults
            (:data:`ckqti.models.specs.ANSERINI_BM25`; an option, not in the paper).
        explicit_fixed: NDRM2 (NDRM3's explicit channel) keeps its start: ``w, b`` are not trained
            and its BatchScale means never take training samples, so the mean tf stays 1 and the
            mean dl is whatever collection the model reads (:meth:`ckqti.models.ndrm2.NDRM2.set_collection`). The
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
