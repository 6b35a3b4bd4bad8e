"""TKL: Transformer-Kernel for long documents (Hofstätter et al., SIGIR 2020; code ``TKL_sigir20``).

The document is split into overlapping windows (40-token centres with 5 tokens of context on
each side: 50 tokens); only windows with a real token in their centre are contextualised
(packing), each with the same local position features; the overlaps are cut so the centres
concatenate back to the original order. Kernel activations over the whole document are summed
in a sliding saturation window (30 tokens, stride 2), saturated by a learned, query-term
conditioned ``a * x^(1/b) - c``, summed over query terms and weighted by a ``K -> 1`` layer: one
score per window, the relevance topography. The three best non-overlapping regions (a pick rules
out the ``ceil(window / stride) - 1`` windows on each side, 14 by default, so regions are disjoint
for any window and stride), each with its +-1 and +-2 neighbours (15 values), are weighted by a
learned vector (init ones).

Choices where paper, reference code and this implementation differ:

* End padding: ``n * 40 + 5 - len`` with ``n = max(1, ceil(len / 40))`` windows. It gives the
  same windows as the reference's ``50 - ((len - 5) % 40)`` (and ``50 - 5 - len`` for short
  documents) except when ``len % 40`` is 1 to 4, where the reference makes one window too few
  and its last 1 to 4 tokens are never scored; here every token lies in exactly one centre.
* Saturation windows start at every second position of the document (the last ones running
  past its end), so a window's content never depends on how much padding the batch adds;
  the reference only takes windows that fit in the padded tensor, so its tail windows change
  with batch padding. Windows without a real token are masked (the reference marks a window
  empty when its score is exactly 0). ``tail_windows="whole"`` (an option; the default
  ``"partial"`` keeps every window) also masks the windows that run past the document's end
  with fewer than ``saturation_window - saturation_stride + 1`` real tokens (the last window
  kept still ends on the last token), except the first window of a document shorter than
  that. The learned saturation is conditioned on the window length through a LayerNorm of two
  features, which keeps only which of them is larger, so a window of a few tokens is saturated
  in another regime than a full one: trained with partial windows, the best region starts in
  the last tenth of 8-9% of SciFact abstracts and TREC DL passages, often a one- or two-token
  window (``scripts/region_positions.py``); with whole windows, of none.
* Region exclusion: the SPEC masks "every window whose index is within 15 of the pick (30 tokens:
  no overlap)". Here a pick rules out the windows less than 15 from it (14 on each side), the
  fewest that keep regions from overlapping, so two picks may lie exactly 15 windows (30 tokens)
  apart, adjacent but disjoint; read as ``|i - j| <= 15`` the SPEC's wording would put their
  starts at least 32 tokens apart. Changing it would change a trained TKL's score of every
  document whose picks land exactly 15 windows apart.
* Region picks that find no window left, and neighbours that fall outside the document or on
  an empty window, contribute 0; the reference clamps neighbour indices to the tensor and can
  pick an empty window whose neighbours are real. This makes the score padding-invariant.
* Saturation (``saturation="embedding"``, the code's and paper's main variant): the influence
  features are a LayerNorm of ``[w . q_i, window length]`` with ``q_i`` the contextualised
  query term vector (the code); the paper describes it as query term salience (IDF-initialised).
  ``"linear"`` uses ``a * x - c`` and ``"log"`` uses ``log x`` (the ablations).
* Position features are learned, initialised with sinusoids: the query's from position 0,
  the window's (shared by every window) from position 500, as the code does.
* ``term_weights="idf"`` (an option; the default ``"none"`` is the code's): each query term's
  saturated window values are multiplied by the term's idf in the collection read before the
  sum over query terms. The paper conditions the saturation on an IDF-initialised query term
  salience; the code, followed here, feeds a projection of the query term vector and the
  window length through a LayerNorm of those two features, which passes only the sign of
  their difference: a term can switch its saturation between two settings, not weigh by how
  rare it is. Trained on SciFact's 728
  claims, TKL without idf ranks by how many query words a window holds, and a claim's rare
  words weigh like its common ones (dev nDCG@10 0.685 after 10 epochs, 0.772 with idf;
  SciFact test 0.523 and 0.636 reranking BM25's top 100, BM25 0.679; ``docs/EFFECTIVENESS.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ckqti.models.explicit import ExplicitCombiner
from ckqti.models.kernels import TK_MUS, RBFKernels, window_sums
from ckqti.models.tk import (
    check_encoder_fields,
    check_term_weights,
    cosine_matrix,
    encoder_parameter_groups,
    padding_mask_for_attention,
    query_term_weights,
    set_idf_weights,
    sinusoid_positions,
    transformer,
    word_embedding,
)

SATURATIONS = ("embedding", "linear", "log")
TAIL_WINDOWS = ("partial", "whole")


def window_count(length: int, chunk: int) -> int:
    """Windows needed so every one of ``length`` tokens lies in exactly one centre (at least 1)."""
    return max(1, -(-length // chunk))


def split_windows(x: Tensor, chunk: int, overlap: int, pad_value: float | int = 0) -> Tensor:
    """Cut a sequence into overlapping windows: centres of ``chunk`` tokens plus ``overlap`` on each side.

    The sequence is padded with ``overlap`` in front and ``n * chunk + overlap - L`` at the end,
    then unfolded with size ``chunk + 2 * overlap`` and step ``chunk``; window ``i``'s centre is
    positions ``[i * chunk, (i + 1) * chunk)`` of the input.

    Shape:
        x ``[B, L, ...]`` -> ``[B, n, chunk + 2 * overlap, ...]`` with ``n = max(1, ceil(L / chunk))``.
    """
    n = window_count(x.shape[1], chunk)
    end = n * chunk + overlap - x.shape[1]
    pad_spec = [0, 0] * (x.dim() - 2) + [overlap, end]
    padded = nn.functional.pad(x, pad_spec, value=pad_value)  # [B, n * chunk + 2 * overlap, ...]
    windows = padded.unfold(1, chunk + 2 * overlap, chunk)  # [B, n, ..., chunk + 2 * overlap]
    return windows.movedim(-1, 2)  # [B, n, chunk + 2 * overlap, ...]


def join_centres(windows: Tensor, overlap: int) -> Tensor:
    """Cut the overlaps off every window and concatenate the centres in order.

    Shape:
        windows ``[B, n, chunk + 2 * overlap, ...]`` -> ``[B, n * chunk, ...]``.
    """
    centres = windows[:, :, overlap: windows.shape[2] - overlap]  # [B, n, chunk, ...]
    return centres.flatten(1, 2)


def top_regions(scores: Tensor, valid: Tensor, count: int, window: int, stride: int) -> tuple[Tensor, Tensor]:
    """Pick the best window ``count`` times, each time ruling out the pick and every window that shares a term with it.

    Window ``i`` covers terms ``[i * stride, i * stride + window)``: windows ``i`` and ``j`` overlap
    iff ``|i - j| * stride < window``, i.e. ``|i - j| < ceil(window / stride)``. So the picks are
    distinct, never overlap and are valid windows, for every window and stride. Returns the picked
    indices ``[B, count]`` (long) and whether each pick found a window (``[B, count]`` bool; a failed
    pick, when every valid window overlaps an earlier pick, has a meaningless index).

    Shape:
        scores ``[B, W]``, valid ``[B, W]`` bool -> (``[B, count]``, ``[B, count]``).
    """
    exclusion = -(-window // stride)  # >= 1: the pick itself is always ruled out
    available = valid.clone()
    r = torch.arange(scores.shape[1], device=scores.device)  # [W]
    picks, found = [], []
    for _ in range(count):
        best = scores.masked_fill(~available, float("-inf")).argmax(1)  # [B]
        ok = available.gather(1, best[:, None]).squeeze(1)  # [B]
        available &= ~(((r - best[:, None]).abs() < exclusion) & ok[:, None])
        picks.append(best)
        found.append(ok)
    return torch.stack(picks, 1), torch.stack(found, 1)


@dataclass(frozen=True)
class TKLConfig:
    """TKL hyper-parameters (defaults: the paper's and the reference code's).

    Attributes:
        vocab_size, embedding_dim, num_layers, num_heads, ff_dim, kernel_mus, kernel_sigma,
        max_query_length, train_embeddings, dropout: as in :class:`~ckqti.models.tk.TKConfig`.
        max_doc_length: document tokens kept (2,000 or 4,000 in the paper).
        chunk_size: window centre length (40).
        overlap: context tokens on each side of a centre (5).
        saturation_window: tokens per saturation window (30).
        saturation_stride: distance between saturation windows (2).
        regions: top regions picked (3).
        neighbours: neighbours taken on each side of a pick (2: +-1, +-2).
        saturation: ``"embedding"`` (learned ``a * x^(1/b) - c``), ``"linear"`` or ``"log"``.
        pack_windows: contextualise only windows whose centre holds a real token (the scores do
            not depend on it; False exists to check that).
        term_weights: ``"none"`` (the reference: query terms' saturated values summed as they
            are) or ``"idf"`` (each query term's weighted by its idf in the collection read,
            :meth:`TKL.set_collection`; see the module docstring).
        tail_windows: ``"partial"`` (every saturation window with a real token) or ``"whole"``
            (windows running past the document's end dropped; see the module docstring).
        explicit: combine the score with NDRM2's explicit term matching, as NDRM3 combines its
            channels (:class:`~ckqti.models.explicit.ExplicitCombiner`; see the module docstring).
    """

    vocab_size: int
    embedding_dim: int = 300
    num_layers: int = 2
    num_heads: int = 10
    ff_dim: int = 100
    kernel_mus: tuple[float, ...] = TK_MUS
    kernel_sigma: float = 0.1
    max_query_length: int = 30
    max_doc_length: int = 2000
    chunk_size: int = 40
    overlap: int = 5
    saturation_window: int = 30
    saturation_stride: int = 2
    regions: int = 3
    neighbours: int = 2
    saturation: str = "embedding"
    pack_windows: bool = True
    train_embeddings: bool = True
    dropout: float = 0.0
    term_weights: str = "none"
    tail_windows: str = "partial"
    explicit: bool = False

    def __post_init__(self) -> None:
        check_encoder_fields(self)
        check_term_weights(self.term_weights)
        if self.tail_windows not in TAIL_WINDOWS:
            raise ValueError(f"tail_windows must be one of {TAIL_WINDOWS}, got {self.tail_windows!r}")
        for name in ("max_doc_length", "chunk_size", "saturation_window", "saturation_stride", "regions"):
            if getattr(self, name) < 1:
                raise ValueError(f"TKLConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.overlap < 0 or self.neighbours < 0:
            raise ValueError("overlap and neighbours must be >= 0")
        if self.saturation not in SATURATIONS:
            raise ValueError(f"saturation must be one of {SATURATIONS}, got {self.saturation!r}")

    @property
    def window_length(self) -> int:
        return self.chunk_size + 2 * self.overlap


@dataclass
class TKLExplanation:
    """The relevance topography of TKL and its top regions.

    Attributes:
        score: ``[B]`` the model's scores (equal to :meth:`TKL.forward`).
        region_score: ``[B]`` the weighted sum of the regions' and their neighbours' values: the
            score itself, unless the model has an explicit channel, which combines it with
            ``explicit_score``.
        explicit_score: ``[B]`` NDRM2's score of the document (``explicit=True``), else None.
        topography: ``[B, W]`` score of every saturation window (0 where ``window_valid`` is False).
        window_valid: ``[B, W]`` bool, True where the window holds a real token.
        window_lengths: ``[B, W]`` real tokens in each window.
        region_starts: ``[B, R]`` long token offset of each picked region (``stride * window
            index``, in tokens of the capped document), -1 where no region was found.
        region_scores: ``[B, R]`` the picked windows' topography scores (0 where none).
        region_valid: ``[B, R]`` bool.
        region_length: tokens in a region (the saturation window, 30).
        doc_lengths: ``[B]`` real document tokens (after the cap).
    """

    score: Tensor
    region_score: Tensor
    explicit_score: Tensor | None
    topography: Tensor
    window_valid: Tensor
    window_lengths: Tensor
    region_starts: Tensor
    region_scores: Tensor
    region_valid: Tensor
    region_length: int
    doc_lengths: Tensor


@dataclass
class _TKLParts:
    topography: Tensor  # [B, W]
    valid: Tensor  # [B, W]
    lengths: Tensor  # [B, W]
    picks: Tensor  # [B, R]
    found: Tensor  # [B, R]
    region_score: Tensor  # [B]
    score: Tensor  # [B]: region_score, or its combination with explicit_score
    explicit_score: Tensor | None  # [B]
    doc_lengths: Tensor  # [B]


class Saturation(nn.Module):
    """TKL's learned saturation ``a * x^(1/b) - c`` with a, b, c conditioned on the query term
    and the window length (``kind="embedding"``), or the ``"linear"`` / ``"log"`` ablations.

    Shape:
        x ``[B, Q, W, K]`` kernel sums, query ``[B, Q, D]`` term vectors, lengths ``[B, W]``
        -> ``[B, Q, W, K]``.
    """

    def __init__(self, dim: int, kind: str):
        super().__init__()
        self.kind = kind
        if kind != "log":
            self.project = nn.Linear(dim, 1, bias=False)
            self.norm = nn.LayerNorm(2)
            self.a = nn.Linear(2, 1)
            self.c = nn.Linear(2, 1)
        if kind == "embedding":
            self.b = nn.Linear(2, 1)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Bias 100, weights U(-0.014, 0.014): at init ``a * x^(1/b) - c`` is close to ``ln x``."""
        for lin in (getattr(self, n, None) for n in ("a", "b", "c")):
            if lin is not None:
                nn.init.constant_(lin.bias, 100.0)
                nn.init.uniform_(lin.weight, -0.014, 0.014)

    def forward(self, x: Tensor, query: Tensor, lengths: Tensor) -> Tensor:
        x = x.clamp(min=1e-10)
        if self.kind == "log":
            return torch.log(x)
        salience = self.project(query).expand(-1, -1, lengths.shape[1])  # [B, Q, W]
        length = lengths.to(x.dtype).unsqueeze(1).expand_as(salience)  # [B, Q, W]
        feats = self.norm(torch.stack([salience, length], dim=-1))  # [B, Q, W, 2]
        a, c = self.a(feats), self.c(feats)  # [B, Q, W, 1]
        if self.kind == "linear":
            return a * x - c
        return a * x.pow(1.0 / self.b(feats)) - c  # [B, Q, W, K]


class TKL(nn.Module):
    """The TKL re-ranking model for long documents.

    Args:
        config: hyper-parameters.
        embeddings: optional initial word matrix ``[vocab_size, embedding_dim]``.

    Shape:
        query_ids ``[B, Q]`` long, doc_ids ``[B, L]`` long (0 = padding) -> ``[B]`` scores.
    """

    def __init__(self, config: TKLConfig, embeddings: Tensor | None = None):
        super().__init__()
        c = self.config = config
        d = c.embedding_dim
        self.embedding = word_embedding(c.vocab_size, d, embeddings, c.train_embeddings)
        self.query_positions = nn.Parameter(sinusoid_positions(c.max_query_length, d))
        self.window_positions = nn.Parameter(sinusoid_positions(c.window_length, d, offset=500))
        self.contextualizer = transformer(d, c.num_heads, c.ff_dim, c.num_layers, c.dropout)
        self.mixer = nn.Parameter(torch.full((1,), 0.5))
        self.kernels = RBFKernels(c.kernel_mus, c.kernel_sigma)
        self.saturation = Saturation(d, c.saturation)
        self.dense = nn.Linear(len(c.kernel_mus), 1, bias=False)
        self.region_weights = nn.Parameter(torch.ones(c.regions * (2 * c.neighbours + 1)))
        if c.term_weights == "idf":
            self.register_buffer("idf", torch.ones(c.vocab_size))  # the collection's, by set_collection
        self.combiner = ExplicitCombiner(c.vocab_size) if c.explicit else None
        self.reset_parameters()

    def set_collection(self, vocab) -> None:
        """Take the query term weights (``term_weights="idf"``) and the explicit channel's statistics
        (``explicit=True``) from a collection's :class:`~ckqti.vocab.Vocabulary` (the one the model
        reads text with)."""
        set_idf_weights(self, vocab)
        if self.combiner is not None:
            self.combiner.set_collection(vocab)

    def reset_parameters(self) -> None:
        nn.init.uniform_(self.dense.weight, -0.014, 0.014)
        nn.init.ones_(self.region_weights)
        nn.init.constant_(self.mixer, 0.5)

    def _contextualize(self, x: Tensor, mask: Tensor, positions: Tensor) -> Tensor:
        """Hybrid vectors of sequences ``x [N, L, D]`` (mask ``[N, L]``) -> ``[N, L, D]``, zero at padding."""
        ctx = self.contextualizer(x + positions, src_key_padding_mask=padding_mask_for_attention(mask))
        return (self.mixer * x + (1 - self.mixer) * ctx) * mask.unsqueeze(-1)

    def encode_query(self, query_ids: Tensor) -> Tensor:
        """Query term vectors (zero at padding) of the first ``max_query_length`` tokens.

        Shape:
            query_ids ``[B, Q]`` -> ``[B, min(Q, max_query_length), D]``.
        """
        query_ids = query_ids[:, : self.config.max_query_length]
        mask = query_ids != 0
        emb = self.embedding(query_ids) * mask.unsqueeze(-1)
        return self._contextualize(emb, mask, self.query_positions[: query_ids.shape[1]])

    def encode_document(self, doc_ids: Tensor) -> Tensor:
        """Locally contextualised vectors of the first ``max_doc_length`` document tokens, in the original
        order: they do not depend on the query, so a reranker encodes a document once for all the queries
        that rank it (:meth:`score_encoded`).

        Shape:
            doc_ids ``[B, L]`` -> ``[B, n * chunk_size, D]`` (``n * chunk_size >= min(L, max_doc_length)``),
            zero at padding.
        """
        c = self.config
        doc_ids = doc_ids[:, : c.max_doc_length]
        windows = split_windows(doc_ids, c.chunk_size, c.overlap)  # [B, n, 50]
        b, n, w = windows.shape
        flat = windows.reshape(b * n, w)  # [B * n, 50]
        mask = flat != 0
        emb = self.embedding(flat) * mask.unsqueeze(-1)  # [B * n, 50, D]
        if c.pack_windows:
            keep = mask[:, c.overlap: w - c.overlap].any(-1)  # [B * n] centre has a real token
            out = emb.new_zeros(emb.shape)
            if keep.any():
                out[keep] = self._contextualize(emb[keep], mask[keep], self.window_positions)
        else:
            out = self._contextualize(emb, mask, self.window_positions)
        return join_centres(out.view(b, n, w, -1), c.overlap)  # [B, n * 40, D]

    def score_encoded(self, query_ids: Tensor, query: Tensor, doc_ids: Tensor, doc: Tensor) -> Tensor:
        """:meth:`forward` from :meth:`encode_query`'s and :meth:`encode_document`'s vectors.

        Shape:
            query_ids ``[B, Q]``, query ``[B, Q', D]``, doc_ids ``[B, L]``, doc ``[B, L', D]`` (the
            encodings of the capped ids) -> ``[B]``.
        """
        return self._match(query_ids, query, doc_ids, doc).score

    def _parts(self, query_ids: Tensor, doc_ids: Tensor) -> _TKLParts:
        return self._match(query_ids, self.encode_query(query_ids), doc_ids, self.encode_document(doc_ids))

    def _match(self, query_ids: Tensor, q: Tensor, doc_ids: Tensor, d: Tensor) -> _TKLParts:
        c = self.config
        query_ids = query_ids[:, : c.max_query_length]
        doc_ids = doc_ids[:, : c.max_doc_length]
        qmask = query_ids != 0  # [B, Q]
        dmask = nn.functional.pad(doc_ids != 0, (0, d.shape[1] - doc_ids.shape[1]))  # [B, L']
        act = self.kernels(cosine_matrix(q, d)) * dmask[:, None, :, None]  # [B, Q, L', K]
        sums = window_sums(act, c.saturation_window, c.saturation_stride)  # [B, Q, W, K]
        lengths = window_sums(dmask.unsqueeze(-1).to(act.dtype), c.saturation_window, c.saturation_stride)[..., 0]
        valid = lengths > 0  # [B, W]
        if c.tail_windows == "whole":  # a short document keeps its first window, holding all of it
            real = dmask.sum(1, keepdim=True).to(lengths.dtype)  # [B, 1]
            valid &= lengths >= real.clamp(max=c.saturation_window - c.saturation_stride + 1)
        sat = self.saturation(sums, q, lengths)  # [B, Q, W, K]
        weights = query_term_weights(self, query_ids, qmask, sat.dtype)  # [B, Q]
        sat = sat * weights[:, :, None, None] * valid[:, None, :, None]
        topo = self.dense(sat.sum(1)).squeeze(-1) * valid  # [B, W]
        picks, found = top_regions(topo, valid, c.regions, c.saturation_window, c.saturation_stride)
        region_score = (self._region_values(topo, valid, picks, found) * self.region_weights).sum(-1)  # [B]
        score, explicit = region_score, None
        if self.combiner is not None:
            explicit = self.combiner.explicit_scores(query_ids, doc_ids)  # [B]
            score = self.combiner(region_score, explicit)
        return _TKLParts(topo, valid, lengths, picks, found, region_score, score, explicit, (doc_ids != 0).sum(1))

    def _region_values(self, topo: Tensor, valid: Tensor, picks: Tensor, found: Tensor) -> Tensor:
        """Scores of each pick and its neighbours, ordered (all picks, all -1, all +1, all -2, all +2).

        Shape:
            topo, valid ``[B, W]``; picks, found ``[B, R]`` -> ``[B, R * (2 * neighbours + 1)]``.
        """
        offsets = [0]
        for k in range(1, self.config.neighbours + 1):
            offsets += [-k, k]
        idx = torch.cat([picks + o for o in offsets], dim=1)  # [B, R * 5]
        inside = (idx >= 0) & (idx < topo.shape[1]) & found.repeat(1, len(offsets))
        idx = idx.clamp(0, topo.shape[1] - 1)
        keep = inside & valid.gather(1, idx)
        return topo.gather(1, idx) * keep

    def forward(self, query_ids: Tensor, doc_ids: Tensor) -> Tensor:
        return self._parts(query_ids, doc_ids).score

    def explain(self, query_ids: Tensor, doc_ids: Tensor) -> TKLExplanation:
        """The relevance topography and the top regions (token offsets, length, score)."""
        p = self._parts(query_ids, doc_ids)
        stride = self.config.saturation_stride
        return TKLExplanation(
            score=p.score,
            region_score=p.region_score,
            explicit_score=p.explicit_score,
            topography=p.topography,
            window_valid=p.valid,
            window_lengths=p.lengths.round().long(),
            region_starts=torch.where(p.found, p.picks * stride, torch.full_like(p.picks, -1)),
            region_scores=p.topography.gather(1, p.picks) * p.found,
            region_valid=p.found,
            region_length=self.config.saturation_window,
            doc_lengths=p.doc_lengths,
        )

    def parameter_groups(self, lr_encoder: float = 1e-4, lr_rest: float = 1e-3) -> list[dict]:
        """Adam parameter groups: embeddings, positions and Transformer at ``lr_encoder``, the explicit
        channel and its combination at ``10 * lr_rest`` (NDRM3's head trains at 1e-2 against 1e-3: the
        combination's weights start at ``(0, 1)`` and must move within a few hundred steps), the rest
        at ``lr_rest``."""
        prefixes = ("embedding.", "contextualizer.", "query_positions", "window_positions")
        return encoder_parameter_groups(self, prefixes, lr_encoder, lr_rest, ("combiner.",), 10 * lr_rest)
