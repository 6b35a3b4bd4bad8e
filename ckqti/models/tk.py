"""TK: Transformer-Kernel ranking (Hofstätter et al., ECAI 2020; reference code ``TK_v1``).

Word embeddings -> a small Transformer (shared by query and document, encoded separately)
-> hybrid vectors ``alpha * emb + (1 - alpha) * ctx`` -> cosine match matrix -> 11 RBF
kernels summed over the document per query term -> a log branch and a length-normalised
branch, each summed over query terms -> ``K -> 1`` linear layers -> a ``2 -> 1`` mix.

Choices where paper, reference code and this implementation differ:

* Contextualisation uses ``torch.nn.TransformerEncoder`` (post-LayerNorm, ReLU, no dropout by
  default); the reference ``TK_v1`` uses AllenNLP's ``StackedSelfAttentionEncoder``. Both add
  fixed sinusoid position features to the Transformer's input only; the hybrid mix uses the
  raw embeddings.
* The length branch is ``sum / (doc_len + 1) * scale`` without a log, as in the code (the
  paper writes a log for both branches). Both branches share the one learned ``scale``.
* The document is cut to ``max_doc_length`` (default 200) and the query to
  ``max_query_length`` (30) inside :meth:`TK.forward`, the paper's caps. The TUW19-d3 variant
  (800 document tokens with windowed pooling) is not implemented: :mod:`ckqti.models.tkl` reads
  long documents.
* :class:`TKConfig` defaults to the paper's 300-d vectors and 10 heads, but ``ckqti train``
  builds TK and TKL 256-d with 8 heads (:func:`ckqti.train.reranker_tk.term_model_options`):
  256 is the skip-gram IN+OUT width the embeddings start from (there are no GloVe vectors
  here), and 10 heads do not divide it. ``model_options`` may override both; the runs of
  ``scripts/effectiveness_registry.py`` do not.
* ``term_weights="idf"`` (an option; the default ``"none"`` is the paper's): each query
  term's log and length values are multiplied by the term's idf in the collection read
  (:meth:`TK.set_collection`) before the sum over query terms, as TKL's option does
  (:mod:`ckqti.models.tkl`). The model's ``K -> 1`` layers weigh kernels, never terms: trained
  on a few hundred claims, a rare and a common query word count alike.
* ``explicit=True`` (an option): the score is combined with NDRM2's explicit term matching, as
  NDRM3 combines its two channels (:mod:`ckqti.models.explicit`), as TKL's option does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ckqti.models.explicit import ExplicitCombiner
from ckqti.models.kernels import TK_MUS, RBFKernels

TERM_WEIGHTS = ("none", "idf")


@dataclass(frozen=True)
class TKConfig:
    """TK hyper-parameters (defaults: the paper's, except the vocabulary).

    Attributes:
        vocab_size: rows of the word embedding (ids 0 = padding, 1 = unknown).
        embedding_dim: word vector size (300 GloVe in the paper).
        num_layers: Transformer layers.
        num_heads: attention heads; must divide ``embedding_dim``.
        ff_dim: Transformer feed-forward width (100; a later version used 300).
        kernel_mus: RBF kernel centres.
        kernel_sigma: RBF width shared by all kernels.
        max_query_length: query tokens kept.
        max_doc_length: document tokens kept.
        train_embeddings: whether the word embedding is trained.
        dropout: Transformer dropout.
        term_weights: ``"none"`` (the paper: query terms' values summed as they are) or
            ``"idf"`` (each weighted by its idf in the collection read, :meth:`TK.set_collection`).
        explicit: combine the score with NDRM2's explicit term matching
            (:class:`~ckqti.models.explicit.ExplicitCombiner`).
    """

    vocab_size: int
    embedding_dim: int = 300
    num_layers: int = 2
    num_heads: int = 10
    ff_dim: int = 100
    kernel_mus: tuple[float, ...] = TK_MUS
    kernel_sigma: float = 0.1
    max_query_length: int = 30
    max_doc_length: int = 200
    train_embeddings: bool = True
    dropout: float = 0.0
    term_weights: str = "none"
    explicit: bool = False

    def __post_init__(self) -> None:
        check_encoder_fields(self)
        check_term_weights(self.term_weights)
        if self.max_doc_length < 1:
            raise ValueError(f"max_doc_length must be >= 1, got {self.max_doc_length}")


def check_term_weights(term_weights: str) -> None:
    if term_weights not in TERM_WEIGHTS:
        raise ValueError(f"term_weights must be one of {TERM_WEIGHTS}, got {term_weights!r}")


def set_idf_weights(model: nn.Module, vocab) -> None:
    """Copy a collection's idf (:class:`~ckqti.vocab.Vocabulary`, the one the model reads text
    with) into ``model.idf``, the query term weights of a TK or TKL built with
    ``term_weights="idf"``; no-op for ``"none"``."""
    if model.config.term_weights != "idf":
        return
    if len(vocab) != model.config.vocab_size:
        raise ValueError(f"vocabulary has {len(vocab)} terms, the model was built for {model.config.vocab_size}")
    model.idf.copy_(torch.as_tensor(vocab.idf(), dtype=model.idf.dtype))  # a float64 model's unrounded


def query_term_weights(model: nn.Module, query_ids: Tensor, qmask: Tensor, dtype: torch.dtype) -> Tensor:
    """Each query term's weight: 1 (``term_weights="none"``) or its idf, 0 at padding -> ``[B, Q]``."""
    if model.config.term_weights == "none":
        return qmask.to(dtype)
    return model.idf[query_ids].to(dtype) * qmask


def check_encoder_fields(c: TKConfig) -> None:
    """Validate the fields TK and TKL share (raises ValueError); kernel centres become a float tuple
    so that ``Config(**dataclasses.asdict(config))`` (a checkpoint round trip) gives an equal config."""
    object.__setattr__(c, "kernel_mus", tuple(float(m) for m in c.kernel_mus))
    for name in ("vocab_size", "embedding_dim", "num_layers", "num_heads", "ff_dim", "max_query_length"):
        if getattr(c, name) < 1:
            raise ValueError(f"{type(c).__name__}.{name} must be >= 1, got {getattr(c, name)}")
    if c.vocab_size < 2:
        raise ValueError("vocab_size must be >= 2 (ids 0 and 1 are padding and unknown)")
    if c.embedding_dim % c.num_heads:
        raise ValueError(f"embedding_dim {c.embedding_dim} is not divisible by num_heads {c.num_heads}")
    if not c.kernel_mus or c.kernel_sigma <= 0:
        raise ValueError("need at least one kernel and a positive kernel_sigma")
    if not 0.0 <= c.dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {c.dropout}")


def sinusoid_positions(length: int, dim: int, offset: int = 0, max_timescale: float = 1.0e4) -> Tensor:
    """Sinusoid position features: the sin half then the cos half (a zero column for odd ``dim``).

    Shape:
        -> ``[length, dim]``.
    """
    half = dim // 2
    t = torch.arange(offset, offset + length, dtype=torch.float32)  # [length]
    step = math.log(max_timescale) / max(half - 1, 1)
    inv = torch.exp(torch.arange(half, dtype=torch.float32) * -step)  # [half]
    scaled = t[:, None] * inv[None, :]  # [length, half]
    out = torch.cat([torch.sin(scaled), torch.cos(scaled)], dim=1)  # [length, 2 * half]
    if dim % 2:
        out = torch.cat([out, out.new_zeros(length, 1)], dim=1)
    return out


def word_embedding(vocab_size: int, dim: int, weights: Tensor | None, trainable: bool) -> nn.Embedding:
    """An ``nn.Embedding`` with padding row 0, optionally initialised from ``weights [V, D]``."""
    emb = nn.Embedding(vocab_size, dim, padding_idx=0)
    if weights is not None:
        if tuple(weights.shape) != (vocab_size, dim):
            raise ValueError(f"embedding matrix has shape {tuple(weights.shape)}, expected {(vocab_size, dim)}")
        with torch.no_grad():
            emb.weight.copy_(weights)
            emb.weight[0].zero_()
    emb.weight.requires_grad_(trainable)
    return emb


def transformer(dim: int, heads: int, ff_dim: int, layers: int, dropout: float) -> nn.TransformerEncoder:
    """The contextualiser of TK and TKL: post-LayerNorm Transformer encoder, batch first."""
    layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=ff_dim, dropout=dropout, batch_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


def padding_mask_for_attention(mask: Tensor) -> Tensor:
    """``src_key_padding_mask`` (True = ignore) from a real-token mask; rows without any real
    token attend to their first position so the Transformer gives no NaN (the caller masks
    those rows out afterwards).

    Shape:
        mask ``[B, L]`` bool -> ``[B, L]`` bool.
    """
    ignore = ~mask
    ignore[:, 0] &= mask.any(-1)
    return ignore


def cosine_matrix(q: Tensor, d: Tensor) -> Tensor:
    """Cosine similarity of every query vector with every document vector (0 for zero vectors).

    Shape:
        q ``[B, Q, D]``, d ``[B, L, D]`` -> ``[B, Q, L]``.
    """
    qn = F.normalize(q, dim=-1, eps=1e-13)
    dn = F.normalize(d, dim=-1, eps=1e-13)
    return torch.bmm(qn, dn.transpose(1, 2))  # [B, Q, L]


@dataclass
class TKExplanation:
    """Why TK scored a batch of (query, document) pairs as it did (seed 004, section 4).

    Attributes:
        score: ``[B]`` the model's scores (equal to :meth:`TK.forward`).
        kernel_score: ``[B]`` the kernels' score: ``score`` itself, unless the model has an explicit
            channel, which combines it with ``explicit_score``.
        explicit_score: ``[B]`` NDRM2's score of the document (``explicit=True``), else None.
        term_kernel_scores: ``[B, Q, K]`` each (query term, kernel) cell's share of the kernels'
            score (log and length branches together); summing over ``Q`` and ``K`` gives
            ``kernel_score``.
        log_kernel_values: ``[B, Q, K]`` log branch values ``log2(sum) * scale`` before the
            dense layer (0 at padded query terms).
        length_kernel_values: ``[B, Q, K]`` length branch values ``sum / (len + 1) * scale``.
        kernel_sums: ``[B, Q, K]`` raw soft term frequencies (kernel activations summed over
            the document).
        cosine: ``[B, Q, L]`` cosine match matrix (0 where either side is padding).
        closest_kernel: ``[B, Q, L]`` long: for each query term and document term, the kernel
            whose ``mu`` is closest to their cosine; -1 at padding.
        doc_term_kernel: ``[B, L]`` long: the closest kernel of each document term to its
            best-matching query term (the word colouring of seed 004, Fig. 2); -1 at padding.
        kernel_mus: ``[K]`` the kernel centres, for labelling.
        query_mask: ``[B, Q]`` bool; doc_mask: ``[B, L]`` bool (after the length caps).
    """

    score: Tensor
    kernel_score: Tensor
    explicit_score: Tensor | None
    term_kernel_scores: Tensor
    log_kernel_values: Tensor
    length_kernel_values: Tensor
    kernel_sums: Tensor
    cosine: Tensor
    closest_kernel: Tensor
    doc_term_kernel: Tensor
    kernel_mus: Tensor
    query_mask: Tensor
    doc_mask: Tensor


@dataclass
class _TKParts:
    """Intermediate TK tensors shared by :meth:`TK.forward` and :meth:`TK.explain`."""

    log_values: Tensor  # [B, Q, K]
    length_values: Tensor  # [B, Q, K]
    kernel_sums: Tensor  # [B, Q, K]
    cosine: Tensor  # [B, Q, L]
    query_mask: Tensor  # [B, Q]
    doc_mask: Tensor  # [B, L]
    explicit: Tensor | None  # [B]: NDRM2's score (explicit=True)


class TK(nn.Module):
    """The TK re-ranking model.

    Args:
        config: hyper-parameters.
        embeddings: optional initial word matrix ``[vocab_size, embedding_dim]``.

    Shape:
        query_ids ``[B, Q]`` long, doc_ids ``[B, L]`` long (0 = padding) -> ``[B]`` scores.
    """

    def __init__(self, config: TKConfig, embeddings: Tensor | None = None):
        super().__init__()
        c = self.config = config
        self.embedding = word_embedding(c.vocab_size, c.embedding_dim, embeddings, c.train_embeddings)
        longest = max(c.max_query_length, c.max_doc_length)
        self.register_buffer("positions", sinusoid_positions(longest, c.embedding_dim), persistent=False)
        self.contextualizer = transformer(c.embedding_dim, c.num_heads, c.ff_dim, c.num_layers, c.dropout)
        self.mixer = nn.Parameter(torch.empty(1))
        self.scale = nn.Parameter(torch.empty(1))
        self.kernels = RBFKernels(c.kernel_mus, c.kernel_sigma)
        k = len(c.kernel_mus)
        self.dense_log = nn.Linear(k, 1, bias=False)
        self.dense_length = nn.Linear(k, 1, bias=False)
        self.dense_combine = nn.Linear(2, 1, bias=False)
        if c.term_weights == "idf":
            self.register_buffer("idf", torch.ones(c.vocab_size))  # the collection's, by set_collection
        self.combiner = ExplicitCombiner(c.vocab_size) if c.explicit else None
        self.reset_parameters()

    def set_collection(self, vocab) -> None:
        """Take the query term weights (``term_weights="idf"``) and the explicit channel's statistics
        (``explicit=True``) from a collection's vocabulary."""
        set_idf_weights(self, vocab)
        if self.combiner is not None:
            self.combiner.set_collection(vocab)

    def reset_parameters(self) -> None:
        """The reference initialisation: alpha 0.5, scale 0.01, kernel weights U(-0.014, 0.014)."""
        nn.init.constant_(self.mixer, 0.5)
        nn.init.constant_(self.scale, 0.01)
        nn.init.uniform_(self.dense_log.weight, -0.014, 0.014)
        nn.init.uniform_(self.dense_length.weight, -0.014, 0.014)
        self.dense_combine.reset_parameters()

    def encode(self, ids: Tensor, mask: Tensor) -> Tensor:
        """Hybrid term vectors ``alpha * emb + (1 - alpha) * ctx``, zero at padding.

        Shape:
            ids ``[B, L]``, mask ``[B, L]`` bool -> ``[B, L, D]``.
        """
        emb = self.embedding(ids) * mask.unsqueeze(-1)  # [B, L, D]
        ctx = self.contextualizer(emb + self.positions[: ids.shape[1]], src_key_padding_mask=padding_mask_for_attention(mask))
        return (self.mixer * emb + (1 - self.mixer) * ctx) * mask.unsqueeze(-1)  # [B, L, D]

    def encode_query(self, query_ids: Tensor) -> Tensor:
        """Hybrid vectors of the first ``max_query_length`` query tokens.

        Shape:
            query_ids ``[B, Q]`` -> ``[B, min(Q, max_query_length), D]``.
        """
        query_ids = query_ids[:, : self.config.max_query_length]
        return self.encode(query_ids, query_ids != 0)

    def encode_document(self, doc_ids: Tensor) -> Tensor:
        """Hybrid vectors of the first ``max_doc_length`` document tokens: they do not depend on the
        query, so a reranker encodes a document once for all the queries that rank it
        (:meth:`score_encoded`).

        Shape:
            doc_ids ``[B, L]`` -> ``[B, min(L, max_doc_length), D]``.
        """
        doc_ids = doc_ids[:, : self.config.max_doc_length]
        return self.encode(doc_ids, doc_ids != 0)

    def score_encoded(self, query_ids: Tensor, query: Tensor, doc_ids: Tensor, doc: Tensor) -> Tensor:
        """:meth:`forward` from :meth:`encode_query`'s and :meth:`encode_document`'s vectors.

        Shape:
            query_ids ``[B, Q]``, query ``[B, Q', D]``, doc_ids ``[B, L]``, doc ``[B, L', D]`` (the
            encodings of the capped ids) -> ``[B]``.
        """
        parts = self._match(query_ids, query, doc_ids, doc)
        return self._score(parts, self._kernel_score(parts))

    def _parts(self, query_ids: Tensor, doc_ids: Tensor) -> _TKParts:
        return self._match(query_ids, self.encode_query(query_ids), doc_ids, self.encode_document(doc_ids))

    def _match(self, query_ids: Tensor, query: Tensor, doc_ids: Tensor, doc: Tensor) -> _TKParts:
        query_ids = query_ids[:, : self.config.max_query_length]
        doc_ids = doc_ids[:, : self.config.max_doc_length]
        qmask, dmask = query_ids != 0, doc_ids != 0  # [B, Q], [B, L]
        cos = cosine_matrix(query, doc)  # [B, Q, L]
        pair_mask = (qmask.unsqueeze(-1) & dmask.unsqueeze(1)).unsqueeze(-1)  # [B, Q, L, 1]
        sums = (self.kernels(cos) * pair_mask).sum(2)  # [B, Q, K]
        qm = query_term_weights(self, query_ids, qmask, sums.dtype).unsqueeze(-1)  # [B, Q, 1]: 1 or idf, 0 at padding
        log_values = torch.log2(sums.clamp(min=1e-10)) * self.scale * qm  # [B, Q, K]
        doc_len = dmask.sum(1).to(sums.dtype).view(-1, 1, 1)  # [B, 1, 1]
        length_values = sums / (doc_len + 1) * self.scale * qm  # [B, Q, K]
        explicit = None if self.combiner is None else self.combiner.explicit_scores(query_ids, doc_ids)  # [B]
        return _TKParts(log_values, length_values, sums, cos * pair_mask.squeeze(-1), qmask, dmask, explicit)

    def _kernel_score(self, parts: _TKParts) -> Tensor:
        log_out = self.dense_log(parts.log_values.sum(1))  # [B, 1]
        length_out = self.dense_length(parts.length_values.sum(1))  # [B, 1]
        return self.dense_combine(torch.cat([log_out, length_out], dim=1)).squeeze(1)  # [B]

    def _score(self, parts: _TKParts, kernel_score: Tensor) -> Tensor:
        return kernel_score if self.combiner is None else self.combiner(kernel_score, parts.explicit)

    def forward(self, query_ids: Tensor, doc_ids: Tensor) -> Tensor:
        return self.score_encoded(query_ids, self.encode_query(query_ids), doc_ids, self.encode_document(doc_ids))

    def explain(self, query_ids: Tensor, doc_ids: Tensor) -> TKExplanation:
        """Per-kernel, per-query-term scores and the closest kernel of every document term."""
        p = self._parts(query_ids, doc_ids)
        w_log, w_len = self.dense_combine.weight[0]
        cells = w_log * p.log_values * self.dense_log.weight[0] + w_len * p.length_values * self.dense_length.weight[0]
        mus = self.kernels.mu
        pair = p.query_mask.unsqueeze(-1) & p.doc_mask.unsqueeze(1)  # [B, Q, L]
        closest = (p.cosine.unsqueeze(-1) - mus).abs().argmin(-1)  # [B, Q, L]
        best_q = p.cosine.masked_fill(~pair, -2.0).argmax(1, keepdim=True)  # [B, 1, L]
        doc_kernel = closest.gather(1, best_q).squeeze(1)  # [B, L]
        kernel_score = self._kernel_score(p)
        return TKExplanation(
            score=self._score(p, kernel_score),
            kernel_score=kernel_score,
            explicit_score=p.explicit,
            term_kernel_scores=cells,
            log_kernel_values=p.log_values,
            length_kernel_values=p.length_values,
            kernel_sums=p.kernel_sums,
            cosine=p.cosine,
            closest_kernel=closest.masked_fill(~pair, -1),
            doc_term_kernel=doc_kernel.masked_fill(~p.doc_mask | ~p.query_mask.any(1, keepdim=True), -1),
            kernel_mus=mus.clone(),
            query_mask=p.query_mask,
            doc_mask=p.doc_mask,
        )

    def parameter_groups(self, lr_encoder: float = 1e-4, lr_rest: float = 1e-3) -> list[dict]:
        """Adam parameter groups: embeddings and Transformer at ``lr_encoder``, the explicit channel and its
        combination at ``10 * lr_rest`` (as TKL's), the rest at ``lr_rest``."""
        return encoder_parameter_groups(self, ("embedding.", "contextualizer."), lr_encoder, lr_rest, ("combiner.",),
                                        10 * lr_rest)


def encoder_parameter_groups(model: nn.Module, prefixes: tuple[str, ...], lr_encoder: float,
                             lr_rest: float, head: tuple[str, ...] = (), lr_head: float | None = None) -> list[dict]:
    """Split trainable parameters by name prefix into optimiser groups: ``prefixes`` at ``lr_encoder``,
    ``head`` (when given) at ``lr_head``, the rest at ``lr_rest``; empty groups are left out."""
    enc, top, rest = [], [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (enc if name.startswith(prefixes) else top if head and name.startswith(head) else rest).append(p)
    groups = [{"params": enc, "lr": lr_encoder}, {"params": rest, "lr": lr_rest}, {"params": top, "lr": lr_head}]
    return [g for g in groups if g["params"]]
