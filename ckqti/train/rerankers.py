"""Training TK, TKL and IDCM re-rankers.

The trained model is written as a checkpoint (:func:`ckqti.models.reranker.save_reranker`, the
one format of :mod:`ckqti.models.checkpoint` with kinds ``"tk"``, ``"tkl"`` and ``"idcm"``);
:func:`ckqti.models.reranker.load_reranker` loads it, or any NDRM checkpoint, to score text.

**Training** (:func:`train_reranker`): pairwise, on (query, relevant, non-relevant) triples;
the relevant document from the judgements (grade ``rel_level`` or more), the non-relevant one
drawn from the query's BM25 top ``depth`` (Pyserini) minus its relevant documents; one triple per
query per epoch. Loss:
margin ranking (margin 1) or RankNet; Adam with the SPEC's two learning rates (1e-4 for
embeddings / Transformer, 1e-3 for the rest). ``loss="lce"`` trains listwise instead: each
query's relevant document against ``negatives`` of its BM25 non-relevant ones at once, softmax
cross-entropy over the group (localized contrastive estimation, Gao et al., ECIR 2021: more of
BM25's hard negatives per query and step, the usual way to fine-tune BERT re-rankers). After every epoch the model reranks the dev
queries' BM25 candidates; the best dev nDCG@10 is kept (early stopping with ``patience``).
``weak_supervision="titles"`` (TK and TKL) adds documents' titles as pseudo-queries for their
own documents (:mod:`ckqti.train.pseudo`, as the NDRM trainer's switch), with negatives from
their own BM25 top ``depth``: ``pseudo_per_epoch`` of them (all by default) join each epoch's
training queries; dev is carved from the judged queries only. With a ``teacher`` that scored
them too, the titles' BM25 candidates are distilled as the claims' are.

IDCM trains in the three stages of the SPEC: (1) the cross-encoder on passages: each
document's first window (``[CLS] q [SEP] head [SEP]``, 64 tokens, the passage-sized input);
(2) the cross-encoder on all windows of documents (:meth:`IDCM.forward_all_windows`, best 3
windows combined); (3) the kernel selector distilled from the frozen cross-encoder's window
scores (:func:`ckqti.train.losses_idcm.selector_distillation_loss`, LambdaLoss), only the
selector's parameters trained.
Validation uses each stage's own scoring (stage 1: passage score of the first window; stage 2:
all windows; stage 3: the cascade of :meth:`IDCM.forward`). A stage's best model is saved
to ``<work>/stage<N>.pt`` so an interrupted run resumes after its last finished stage; each stage
seeds torch from ``(seed, stage)``, so it ends with an uninterrupted run's weights.

``init="match"`` (the default) starts TK and TKL from a model that already ranks by exact
matches, as the NDRM trainer's option does (the papers train for days on MS MARCO; a few
hundred CPU steps on SciFact barely move a random ``K -> 1`` layer, whose sign may rank
against matching): the hybrid mix takes the raw embedding only (``alpha = 1``: a term's cosine
with itself is 1), and the ``K -> 1`` layer weights the exact-match kernel (``mu = 1``) by 1 and
the others by 0. Every weight stays trainable.
"""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor, nn

from ckqti.errors import CkqtiError, InputError
from ckqti.models.checkpoint import Checkpoint, load_checkpoint
from ckqti.models.inputs import TermText, WordPieceText, pad_rows
from ckqti.models.loading import pick_device
from ckqti.models.reranker import RERANKER_KINDS, build_model, save_reranker
from ckqti.train.data import (
    bm25_step,
    candidate_indices,
    clicks_notes,
    inputs_digest,
    judgement_notes,
    load_clicks,
    read_training_inputs,
    relevant_docs,
    require_texts,
    show_notes,
    show_step,
    split_dev,
    wordless_notes,
)
from ckqti.train.losses_idcm import SELECTOR_LOSSES, selector_distillation_loss
from ckqti.train.options import check_seed
from ckqti.train.stage_state import StageProgress, StageState, resume_settings
from ckqti.train.stage_state import show as show_state

if TYPE_CHECKING:
    from indexer.readers import Clicks

WEAK_SUPERVISION = ("titles",)
LOSSES = ("margin", "ranknet", "lce")
# Settings only IDCM's stage 3 reads: a change retrains the selector, not the cross-encoder (stages 1-2)
STAGE3_SETTINGS = ("distill_epochs", "selector_loss")
INITS = ("paper", "match")


# -- initialisation ---------------------------------------------------------------------------


def match_init(model: nn.Module) -> None:
    """Start TK or TKL from exact matching: ``alpha = 1`` and only the ``mu = 1`` kernel weighted.

    See the module docstring. TK's two branches are combined as ``1 * log + 0 * length``; a TKL
    with an explicit channel starts as that channel alone
    (:meth:`~ckqti.models.explicit.ExplicitCombiner.match_init`).
    """
    with torch.no_grad():
        model.mixer.fill_(1.0)
        mus = model.kernels.mu
        exact = (mus - 1.0).abs().argmin()
        dense = model.dense_log if hasattr(model, "dense_log") else model.dense
        dense.weight.zero_()
        dense.weight[0, exact] = 1.0
        if hasattr(model, "dense_combine"):
            model.dense_length.weight.zero_()
            model.dense_combine.weight.copy_(torch.tensor([[1.0, 0.0]]))
    if getattr(model, "combiner", None) is not None:
        model.combiner.match_init()


# -- training configuration ------------------------------------------------------------------


@dataclass(frozen=True)
class RerankerTrainConfig:
    """Settings of one re-ranker training run.

    Args:
        kind: ``"tk"``, ``"tkl"`` or ``"idcm"``.
        epochs: most epochs (IDCM: per cross-encoder stage 1 and 2).
        distill_epochs: IDCM stage 3 epochs.
        selector_loss: IDCM stage 3's distillation loss of the selector from the cross-encoder's
            window scores: ``"lambda"`` (LambdaLoss, the paper's), ``"mse"`` or ``"kl"``
            (:func:`ckqti.train.losses_idcm.selector_distillation_loss`).
        stages: IDCM stages to run, in order (a subset of 1, 2, 3).
        batch_size: triples per optimizer step (16: the CPU budget of scripts/effectiveness.py's rows;
            SPEC's TKL trained with 32, the default of ``ckqti train`` and :func:`ckqti.api.train`).
        lr_encoder, lr_rest: Adam learning rates of the embeddings / Transformer (IDCM: the
            cross-encoder) and of everything else.
        loss: ``"margin"`` (margin ranking, ``margin``), ``"ranknet"`` or ``"lce"`` (listwise: softmax
            cross-entropy of the relevant document among ``negatives`` BM25 negatives; IDCM's
            stage 3 keeps its distillation loss).
        negatives: BM25 negatives per query in a group (``"lce"`` only; 1 otherwise).
        seed: sampling, initialisation, dropout and the dev split.
        patience: epochs without a better dev nDCG@10 before stopping.
        dev_fraction: share of the judged training queries carved out as dev.
        rel_level: the grade from which a judged document is relevant (``ckqti train --rel-level``;
            TREC DL passages: 2): the positives drawn and the queries trained on or taken for dev
            (a query without one is skipped). Lower grades are non-relevant (BM25 negatives may be
            drawn among them); dev nDCG@10 keeps every grade's gain. Title pseudo-queries'
            documents are always relevant.
        depth: BM25 candidates per training query the negatives are drawn from.
        dev_depth: candidates reranked per dev query for validation.
        max_dev_queries: validate on at most this many dev queries (None: all).
        max_steps: optimizer steps per epoch at most (None: one triple per query).
        embeddings: TK/TKL initial embeddings: ``"skipgram"``, ``"minilm"``, ``"random"``, or a
            checkpoint file (``.pt``) whose word vectors of the same width start the model.
        init: ``"match"`` (see the module docstring) or ``"paper"``.
        min_df: TK/TKL vocabulary bound (rarer terms -> unknown).
        eval_batch_size: documents scored at once when validating.
        teacher: TK/TKL only: a file of a teacher's scores of training queries' documents
            (``{"teacher": id, "scores": {qid: {docid: score}}}``, ``.json`` or ``.json.gz``, as
            :func:`ckqti.train.loop.read_teacher` reads for NDRM; dev queries' are never used;
            title pseudo-queries' ``title:<docid>`` are used with ``weak_supervision="titles"``).
            Each step then adds ``distill_weight`` times a listwise distillation loss: for every
            query of the batch the teacher scored, ``distill_docs`` of its scored documents drawn
            at random, the cross-entropy between the teacher's softmax over them and the
            student's (:func:`ckqti.train.losses.distill_loss`).
        distill_docs, distill_weight: see ``teacher``.
        weak_supervision: None, or ``"titles"`` (TK and TKL: documents' titles as pseudo-queries
            for their own documents, see the module docstring).
        pseudo_per_epoch: title pseudo-queries drawn per epoch (None: all of them).
        model_options: fields of the model's config (TKConfig, TKLConfig or IDCMConfig) other
            than ``vocab_size``. For IDCM a ``bert`` entry (BertConfig fields) builds a randomly
            initialised cross-encoder of that shape instead of loading all-MiniLM-L6-v2.
        device: torch device (default CUDA when available).
        progress: progress bars and a line per epoch.
    """

    kind: str = "tkl"
    epochs: int = 5
    distill_epochs: int = 1
    selector_loss: str = "lambda"
    stages: tuple[int, ...] = (1, 2, 3)
    batch_size: int = 16
    lr_encoder: float = 1e-4
    lr_rest: float = 1e-3
    loss: str = "margin"
    margin: float = 1.0
    negatives: int = 1
    seed: int = 0
    patience: int = 2
    dev_fraction: float = 0.1
    rel_level: int = 1
    depth: int = 100
    dev_depth: int = 100
    max_dev_queries: int | None = None
    max_steps: int | None = None
    embeddings: str = "skipgram"
    init: str = "match"
    min_df: int = 1
    eval_batch_size: int = 32
    teacher: str | None = None
    distill_docs: int = 8
    distill_weight: float = 1.0
    weak_supervision: str | None = None
    pseudo_per_epoch: int | None = None
    model_options: Mapping[str, Any] = field(default_factory=dict)
    device: str | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", tuple(int(s) for s in self.stages))
        object.__setattr__(self, "model_options", dict(self.model_options))
        from ckqti.train.loop import check_embedding_start

        checks = {"kind": RERANKER_KINDS, "loss": LOSSES, "init": INITS, "selector_loss": SELECTOR_LOSSES}
        for name, allowed in checks.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        check_embedding_start(self.embeddings)
        check_seed(self.seed)
        for name in ("epochs", "distill_epochs", "batch_size", "patience", "depth", "dev_depth", "min_df",
                     "eval_batch_size", "negatives", "distill_docs", "rel_level"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("max_steps", "max_dev_queries", "pseudo_per_epoch"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be None or >= 1")
        if self.lr_encoder <= 0 or self.lr_rest <= 0 or self.margin <= 0 or not 0.0 < self.dev_fraction < 1.0:
            raise ValueError("learning rates and margin must be positive, dev_fraction in (0, 1)")
        if not self.stages or any(s not in (1, 2, 3) for s in self.stages) or list(self.stages) != sorted(set(self.stages)):
            raise ValueError(f"stages must be increasing values among 1, 2, 3, got {self.stages}")
        self._check_distillation()
        self._check_weak_supervision()
        if self.negatives > 1 and self.loss != "lce":
            raise ValueError("negatives > 1 needs loss='lce' (margin and RankNet are pairwise)")
        if "vocab_size" in self.model_options:
            raise ValueError("model_options must not set vocab_size (it is the training vocabulary's)")

    def _check_distillation(self) -> None:
        if self.distill_weight < 0:
            raise ValueError(f"distill_weight must be >= 0, got {self.distill_weight}")
        if self.teacher is not None and self.kind == "idcm":
            raise ValueError("teacher distillation is for TK and TKL (IDCM's stage 3 distils its own cross-encoder)")

    def _check_weak_supervision(self) -> None:
        if self.weak_supervision not in (None, *WEAK_SUPERVISION):
            raise ValueError(f"weak_supervision must be None or one of {WEAK_SUPERVISION}, got {self.weak_supervision!r}")
        if self.weak_supervision is not None and self.kind == "idcm":
            raise ValueError("weak supervision is for TK and TKL")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["model_options"] = dict(self.model_options)
        d["stages"] = list(self.stages)
        return d


@dataclass(frozen=True)
class RerankerTrainResult:
    """What :func:`train_reranker` produced.

    Attributes:
        out: the checkpoint written; model_id: its id.
        best_dev_ndcg10: dev nDCG@10 of the saved model (its last stage for IDCM).
        history: per epoch: ``stage``, ``epoch``, ``loss``, ``steps``, ``dev_ndcg10``, ``seconds``.
        work_dir: BM25 index and IDCM stage checkpoints.
        notes: what training could not use of the judgements (:func:`~ckqti.train.data.judgement_notes`;
            shown on stderr before training when ``config.progress``).
    """

    out: Path
    model_id: str
    best_dev_ndcg10: float
    history: tuple[dict, ...]
    work_dir: Path
    notes: tuple[str, ...] = ()

    def _last_stage(self) -> list[dict]:
        return [h for h in self.history if h["stage"] == self.history[-1]["stage"]]

    @property
    def best_epoch(self) -> int:
        """Epoch of the saved model in the last stage (0: validation before training was not beaten;
        the first of equal scores, as training keeps only a strictly better epoch)."""
        return max(self._last_stage(), key=lambda h: h["dev_ndcg10"])["epoch"]

    @property
    def epochs_run(self) -> int:
        """Epochs trained in the last stage."""
        return max(h["epoch"] for h in self._last_stage())


# -- training data ---------------------------------------------------------------------------


@dataclass
class PairData:
    """Token ids of documents and queries, judgements and candidates, in collection indices."""

    docids: list[str]
    docs: list[np.ndarray]
    queries: dict[str, np.ndarray]
    relevant: dict[str, frozenset[int]]
    candidates: dict[str, list[int]]
    train_qids: list[str]
    dev_qids: list[str]
    dev_qrels: dict[str, dict[str, int]]
    teacher: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # qid -> (doc indices, scores)
    pseudo_qids: list[str] = field(default_factory=list)  # title pseudo-queries usable for training


def build_text(kind: str, corpus: str | Path, config: RerankerTrainConfig, fmt: str | None,
               orcas: str | Path | Clicks | None = None):
    """``(text, docids, document texts or None, collection or None)`` for the model kind; ``orcas``:
    an ORCAS file whose clicks lead each document's text, as ``ckqti index --orcas`` reads them, or
    its clicks as :func:`ckqti.train.data.load_clicks` loaded them."""
    from indexer.readers import read_corpus

    if kind == "idcm":
        from ckqti.models.minilm import WordPieceTokenizer

        docs = list(read_corpus(corpus, fmt=fmt, orcas=orcas))
        return WordPieceText(WordPieceTokenizer.minilm()), [d.docid for d in docs], [d.full_text() for d in docs], None
    from ckqti.train.data import load_collection

    coll = load_collection(corpus, fmt=fmt, min_df=config.min_df, orcas=orcas)
    return TermText(coll.analyzer, coll.vocab), coll.docids, None, coll


def load_teacher(config: RerankerTrainConfig, docids: list[str], qrels: Mapping[str, Mapping[str, int]],
                 pseudo_qrels: Mapping[str, Mapping[str, int]] | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``config.teacher``'s scores of the training split's queries and of the title pseudo-queries
    ``pseudo_qrels`` (dev queries' never), as :func:`ckqti.train.loop.read_teacher` reads them;
    ``{}`` without a teacher."""
    if not config.teacher:
        return {}
    from ckqti.train.loop import read_teacher

    train_qrels, dev = split_dev(qrels, config.dev_fraction, config.seed, config.rel_level)  # prepare_pairs' split
    pseudo = {q: j for q, j in (pseudo_qrels or {}).items() if q not in dev}
    return read_teacher(config.teacher, {d: i for i, d in enumerate(docids)}, {**pseudo, **train_qrels})


def prepare_pairs(text, docids: list[str], doc_rows: list[np.ndarray], queries: Mapping[str, str],
                  qrels: Mapping[str, Mapping[str, int]], candidates: Mapping[str, Sequence[str]],
                  config: RerankerTrainConfig, max_query: int,
                  teacher: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
                  pseudo_qrels: Mapping[str, Mapping[str, int]] | None = None) -> PairData:
    """Split dev, map judgements and candidates to collection indices, tokenize the queries;
    ``teacher``: :func:`load_teacher`'s scores (None: no distillation); ``pseudo_qrels``: title
    pseudo-queries' judgements (:func:`ckqti.train.pseudo.title_pseudo_queries`), training only."""
    train_qrels, dev = split_dev(qrels, config.dev_fraction, config.seed, config.rel_level)
    if config.max_dev_queries is not None:
        dev = dict(list(dev.items())[: config.max_dev_queries])
    require_texts([*train_qrels, *dev], queries)
    index = {d: i for i, d in enumerate(docids)}
    pseudo_qrels = {q: j for q, j in (pseudo_qrels or {}).items() if q not in train_qrels and q not in dev}
    qids = list(train_qrels) + list(dev) + list(pseudo_qrels)
    q_rows = {q: text.ids(queries[q], max_query) for q in qids}
    # a title's own document is relevant (grade 1) at any level
    relevant = {**relevant_docs({**train_qrels, **dev}, index, config.rel_level), **relevant_docs(pseudo_qrels, index)}
    cands = candidate_indices({q: candidates.get(q, []) for q in qids}, index, max(config.depth, config.dev_depth))
    def usable(qs):  # a relevant document and a known term
        return sorted(q for q in qs if relevant.get(q) and (q_rows[q] > 1).any())

    return PairData(docids, doc_rows, q_rows, relevant, cands, usable(train_qrels), sorted(dev), dev, dict(teacher or {}),
                    usable(pseudo_qrels))


def epoch_qids(data: PairData, seed: int, epoch: int, pseudo_per_epoch: int | None = None) -> list[str]:
    """The epoch's training queries: every judged one, then ``pseudo_per_epoch`` title
    pseudo-queries (all when None) drawn without replacement; a function of ``(seed, epoch)``."""
    from ckqti.train.pseudo import draw_pseudo

    return list(data.train_qids) + draw_pseudo(data.pseudo_qids, pseudo_per_epoch, np.random.default_rng([seed, epoch, 3]))


def training_pools(data: PairData, depth: int, qids: Sequence[str] | None = None):
    """``(qid, relevant documents sorted, non-relevant candidates of the top depth)`` of each training
    query (``qids``, default ``data.train_qids``) that has both, in that order."""
    for qid in data.train_qids if qids is None else qids:
        rel = sorted(data.relevant[qid])
        negs = [d for d in data.candidates.get(qid, [])[:depth] if d not in data.relevant[qid]]
        if rel and negs:
            yield qid, rel, negs


def epoch_triples(data: PairData, depth: int, seed: int, epoch: int,
                  pseudo_per_epoch: int | None = None) -> list[tuple[str, int, int]]:
    """One ``(qid, relevant, non-relevant)`` triple per training query, shuffled; a function of ``(seed, epoch)``.

    The non-relevant document is drawn from the query's top ``depth`` candidates that are not
    judged relevant (queries without one are skipped).
    """
    rng = np.random.default_rng([seed, epoch])
    out = []
    for qid, rel, negs in training_pools(data, depth, epoch_qids(data, seed, epoch, pseudo_per_epoch)):
        out.append((qid, rel[int(rng.integers(len(rel)))], negs[int(rng.integers(len(negs)))]))
    return [out[i] for i in rng.permutation(len(out))]


def epoch_groups(data: PairData, depth: int, seed: int, epoch: int, negatives: int,
                 pseudo_per_epoch: int | None = None) -> list[tuple[str, int, tuple[int, ...]]]:
    """One ``(qid, relevant, (non-relevant, ...))`` group per training query, shuffled; a function of ``(seed, epoch)``.

    ``negatives`` distinct documents of the query's top ``depth`` candidates that are not judged
    relevant (drawn with replacement only when the query has fewer), so every group has the same size.
    """
    rng = np.random.default_rng([seed, epoch, negatives])
    out = []
    for qid, rel, negs in training_pools(data, depth, epoch_qids(data, seed, epoch, pseudo_per_epoch)):
        picked = rng.choice(len(negs), size=negatives, replace=len(negs) < negatives)
        out.append((qid, rel[int(rng.integers(len(rel)))], tuple(negs[int(i)] for i in picked)))
    return [out[i] for i in rng.permutation(len(out))]


# -- the generic pairwise loop ---------------------------------------------------------------

ScoreFn = Callable[[Tensor, Tensor], Tensor]  # query ids [B, Q], doc ids [B, L] -> scores [B]
LossFn = Callable[[Tensor, Tensor], Tensor]  # query ids [B, Q], doc ids [B, L] -> scalar (stage 3)


def pair_loss(pos: Tensor, neg: Tensor, config: RerankerTrainConfig) -> Tensor:
    """Margin ranking or RankNet loss of positive over negative scores (each ``[B]``) -> scalar."""
    if config.loss == "ranknet":
        return nn.functional.softplus(neg - pos).mean()
    return nn.functional.margin_ranking_loss(pos, neg, torch.ones_like(pos), margin=config.margin)


def triple_batch(data: PairData, batch: Sequence[tuple[str, int, int]], device: torch.device) -> tuple[Tensor, Tensor]:
    """Queries ``[2B, Q]`` and documents ``[2B, L]``: the B positives, then the B negatives."""
    q = pad_rows([data.queries[qid] for qid, _, _ in batch])
    d = pad_rows([data.docs[p] for _, p, _ in batch] + [data.docs[n] for _, _, n in batch])
    return q.repeat(2, 1).to(device), d.to(device)


def group_batch(data: PairData, batch: Sequence[tuple[str, int, tuple[int, ...]]],
                device: torch.device) -> tuple[Tensor, Tensor]:
    """Queries ``[B * G, Q]`` and documents ``[B * G, L]``, group by group: each relevant document
    followed by its ``G - 1`` negatives (``G`` = 1 + negatives)."""
    size = 1 + len(batch[0][2])
    q = pad_rows([data.queries[qid] for qid, _, _ in batch]).repeat_interleave(size, dim=0)
    d = pad_rows([data.docs[i] for _, pos, negs in batch for i in (pos, *negs)])
    return q.to(device), d.to(device)


def group_loss(scores: Tensor, size: int) -> Tensor:
    """Softmax cross-entropy of each group's first (relevant) document; ``[B * size] -> scalar``."""
    logits = scores.view(-1, size)  # [B, size]
    return nn.functional.cross_entropy(logits, torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device))


def teacher_batch(data: PairData, qids: Sequence[str], k: int, rng: np.random.Generator,
                  device: torch.device) -> tuple[Tensor, Tensor, Tensor] | None:
    """For each of ``qids`` the teacher scored, ``k`` of its scored documents (without replacement
    when it has ``k``): queries ``[B' * k, Q]``, documents ``[B' * k, L]`` query by query and the
    teacher's scores ``[B', k]``; None when the teacher scored none of them."""
    picked = [(q, rng.choice(len(data.teacher[q][0]), size=k, replace=len(data.teacher[q][0]) < k))
              for q in qids if q in data.teacher]
    if not picked:
        return None
    q = pad_rows([data.queries[qid] for qid, _ in picked]).repeat_interleave(k, dim=0)
    d = pad_rows([data.docs[int(i)] for qid, pick in picked for i in data.teacher[qid][0][pick]])
    t = torch.from_numpy(np.stack([data.teacher[qid][1][pick] for qid, pick in picked]).astype(np.float32))
    return q.to(device), d.to(device), t.to(device)


def train_epoch(score: ScoreFn | None, loss_fn: LossFn | None, model: nn.Module, optimizer, data: PairData,
                config: RerankerTrainConfig, epoch: int, device: torch.device) -> dict[str, float]:
    """One epoch of pairwise steps (``score``) or of a per-batch loss (``loss_fn``, IDCM stage 3),
    plus the teacher's distillation loss when ``data.teacher`` is set (``score`` only)."""
    from ckqti.progress import progress_bar
    from ckqti.train.losses import distill_loss, finite_loss

    rng = np.random.default_rng([config.seed, epoch, 2])  # the teacher's documents (drawn only with a teacher)
    listwise = config.loss == "lce" and loss_fn is None
    triples = (epoch_groups(data, config.depth, config.seed, epoch, config.negatives, config.pseudo_per_epoch)
               if listwise else epoch_triples(data, config.depth, config.seed, epoch, config.pseudo_per_epoch))
    starts = list(range(0, len(triples), config.batch_size))[: config.max_steps]
    model.train()
    losses = []
    for start in progress_bar(starts, desc=f"epoch {epoch + 1}", unit="step", show=config.progress, leave=False):
        part = triples[start: start + config.batch_size]
        if listwise:
            q, d = group_batch(data, part, device)
            loss = group_loss(score(q, d), 1 + config.negatives)
        elif loss_fn is not None:
            q, d = triple_batch(data, part, device)
            loss = loss_fn(q, d)
        else:
            q, d = triple_batch(data, part, device)
            s = score(q, d)  # [2B]
            half = s.shape[0] // 2
            loss = pair_loss(s[:half], s[half:], config)
        if data.teacher and loss_fn is None and config.distill_weight > 0:
            group = teacher_batch(data, [qid for qid, *_ in part], config.distill_docs, rng, device)
            if group is not None:
                tq, td, t_scores = group
                student = score(tq, td).view(t_scores.shape)  # [B', k]
                loss = loss + config.distill_weight * distill_loss(student, t_scores)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(finite_loss(loss, f"epoch {epoch + 1}, step {len(losses) + 1}"))
    return {"loss": float(np.mean(losses)) if losses else 0.0, "steps": len(losses)}


def rerank_scores(score: ScoreFn, data: PairData, qids: Sequence[str], depth: int, batch_size: int,
                  device: torch.device) -> dict[str, dict[str, float]]:
    """A run ``qid -> {docid: score}`` of the top ``depth`` candidates of ``qids`` (no gradients). A TK or TKL
    model as ``score`` encodes each candidate once for all the queries that rank it
    (:func:`~ckqti.models.reranker.score_encoded_pairs`), as a rerank does; another scores pair by pair."""
    if hasattr(score, "encode_document") and hasattr(score, "score_encoded"):
        return encoded_rerank_scores(score, data, qids, depth, batch_size, device)
    run: dict[str, dict[str, float]] = {}
    with torch.no_grad():
        for qid in qids:
            cands = data.candidates.get(qid, [])[:depth]
            order = sorted(cands, key=lambda i: len(data.docs[i]))
            scores: dict[str, float] = {}
            for start in range(0, len(order), batch_size):
                part = order[start: start + batch_size]
                d = pad_rows([data.docs[i] for i in part]).to(device)
                q = pad_rows([data.queries[qid]]).to(device).expand(len(part), -1)
                scores.update(zip((data.docids[i] for i in part), score(q, d).tolist()))
            run[qid] = scores
    return run


def encoded_rerank_scores(model: nn.Module, data: PairData, qids: Sequence[str], depth: int, batch_size: int,
                          device: torch.device) -> dict[str, dict[str, float]]:
    """:func:`rerank_scores` of a TK or TKL model, each distinct candidate encoded once for every dev query
    that ranks it (pair by pair, SciFact's validation of 81 dev queries' top 100 took 2-3 times as long)."""
    from ckqti.models.reranker import score_encoded_pairs

    cands = {qid: list(dict.fromkeys(data.candidates.get(qid, [])[:depth])) for qid in qids}
    docs = list(dict.fromkeys(d for ds in cands.values() for d in ds))  # distinct candidates
    at = {d: n for n, d in enumerate(docs)}
    pairs = np.array([(q, at[d]) for q, qid in enumerate(qids) for d in cands[qid]], dtype=np.int64).reshape(-1, 2)
    scores = score_encoded_pairs(model, [data.queries[qid] for qid in qids], [data.docs[d] for d in docs], pairs,
                                 device, batch_size).tolist()
    run: dict[str, dict[str, float]] = {qid: {} for qid in qids}
    for (q, d), s in zip(pairs.tolist(), scores):
        run[qids[q]][data.docids[docs[d]]] = s
    return run


def validate(score: ScoreFn, model: nn.Module, data: PairData, config: RerankerTrainConfig,
             device: torch.device) -> float:
    """Mean nDCG@10 of the dev queries reranking their top ``dev_depth`` candidates."""
    from ckqti.evaluate import evaluate

    was = model.training
    model.eval()
    try:
        run = rerank_scores(score, data, data.dev_qids, config.dev_depth, config.eval_batch_size, device)
    finally:
        model.train(was)
    return float(evaluate(run, data.dev_qrels, ["nDCG@10"]).mean["nDCG@10"])


@dataclass
class StageResult:
    best: float
    history: list[dict]


def fit_stage(stage: int, score: ScoreFn, loss_fn: LossFn | None, model: nn.Module, optimizer, data: PairData,
              config: RerankerTrainConfig, epochs: int, device: torch.device,
              on_best: Callable[[float, list[dict]], None] | None = None, state: StageState | None = None) -> StageResult:
    """Epochs with validation and early stopping; the model ends with its best epoch's weights.

    The model is validated before the first epoch too (history epoch 0), so a stage whose
    training does not beat its starting point on dev keeps its starting weights. With ``state``,
    each epoch's end is saved there, and a run that resumes continues after the saved epoch.
    """
    label = f"stage {stage} " if stage else ""  # TK and TKL train in one stage, numbered 0: no label
    progress = state.restore(model, optimizer) if state is not None else None
    if state is not None:
        show_state(state.note(progress, epochs, config.patience), config.progress)
    if progress is None:
        best = validate(score, model, data, config, device)
        history = [{"stage": stage, "epoch": 0, "loss": None, "steps": 0, "dev_ndcg10": best, "seconds": 0.0}]
        progress = StageProgress(0, best, 0, history, copy.deepcopy(model.state_dict()))
        if config.progress:
            print(f"{label}before training: dev nDCG@10 {best:.4f}", flush=True)
        if on_best is not None:
            on_best(best, history)
    for epoch in range(progress.epoch, epochs):
        if progress.since >= config.patience:
            break
        started = time.perf_counter()
        stats = train_epoch(None if loss_fn else score, loss_fn, model, optimizer, data, config, epoch, device)
        dev = validate(score, model, data, config, device)
        progress.history.append({"stage": stage, "epoch": epoch + 1, **stats, "dev_ndcg10": dev,
                                 "seconds": time.perf_counter() - started})
        progress.epoch = epoch + 1
        if config.progress:
            print(f"{label}epoch {epoch + 1}: loss {stats['loss']:.4f}, dev nDCG@10 {dev:.4f}", flush=True)
        if dev > progress.best:
            progress.best, progress.best_state, progress.since = dev, copy.deepcopy(model.state_dict()), 0
            if on_best is not None:
                on_best(dev, progress.history)
        else:
            progress.since += 1
        if state is not None:
            state.save(model, optimizer, progress)
    model.load_state_dict(progress.best_state)
    return StageResult(progress.best, progress.history)


# -- TK and TKL -------------------------------------------------------------------------------


def term_model_options(config: RerankerTrainConfig) -> dict[str, Any]:
    """TK/TKL config fields: 256-d embeddings (the skip-gram IN+OUT width) with 8 heads unless overridden."""
    return {"embedding_dim": 256, "num_heads": 8, **config.model_options}


def new_term_model(kind: str, text: TermText, collection, config: RerankerTrainConfig, init: bool = True) -> nn.Module:
    """A TK or TKL for the training vocabulary, embeddings initialised as ``config.embeddings`` asks
    (unless not ``init``: a resumed run loads its saved weights over them, so skip-gram is not trained again)."""
    from ckqti.train.loop import initial_embeddings

    model = build_model(kind, {**term_model_options(config), "vocab_size": len(text.vocab)})
    matrix = (initial_embeddings(collection, config.embeddings, model.config.embedding_dim, config.seed, config.progress)
              if init else None)
    if matrix is not None:
        with torch.no_grad():
            model.embedding.weight.copy_(torch.as_tensor(matrix, dtype=torch.float32))
            model.embedding.weight[0].zero_()
    if config.init == "match":
        match_init(model)
    model.set_collection(text.vocab)  # idf term weights (term_weights="idf"), else nothing
    return model


def train_term_model(data: PairData, text: TermText, collection, config: RerankerTrainConfig, out: Path,
                     meta: dict, device: torch.device, state: StageState) -> tuple[Checkpoint | None, StageResult]:
    """Train TK or TKL; each epoch better than the last is written to ``out``, and the best model
    (the start, if no epoch beat it) at the end if no epoch of this call did (so a run interrupted
    before it improves leaves ``out`` as it was). Each epoch's end is saved to ``state``."""
    resuming = state.resume and state.path.is_file()
    model = new_term_model(config.kind, text, collection, config, init=not resuming).to(device)
    optimizer = torch.optim.Adam(model.parameter_groups(config.lr_encoder, config.lr_rest))
    saved: list[Checkpoint] = []

    def on_best(dev: float, history: list[dict]) -> None:
        if len(history) > 1:  # a trained epoch (history[0] is the validation before training)
            saved.append(save_reranker(out, model, config.kind, text, {**meta, "dev_ndcg10": dev, "history": history}))

    result = fit_stage(0, model, None, model, optimizer, data, config, config.epochs, device, on_best, state)
    if not saved:  # no epoch of this call beat the best: fit_stage restored it
        saved.append(save_reranker(out, model, config.kind, text,
                                   {**meta, "dev_ndcg10": result.best, "history": result.history}))
    return saved[-1], result


# -- IDCM -------------------------------------------------------------------------------------


def idcm_stage_setup(model: nn.Module, stage: int, config: RerankerTrainConfig) -> tuple[ScoreFn, LossFn | None, Any]:
    """Scoring function, optional loss and optimizer of one IDCM stage."""
    if stage == 3:
        params = [*model.conv.parameters(), model.kernel_scale, *model.bin_weights.parameters()]
        return (model, (lambda q, d: selector_distillation_loss(model, q, d, config.selector_loss)),
                torch.optim.Adam(params, lr=config.lr_rest))
    groups = [{"params": list(model.bert.parameters()), "lr": config.lr_encoder},
              {"params": [*model.classifier.parameters(), model.top_k_weights], "lr": config.lr_rest}]
    if stage == 1:
        head = model.config.window_length
        return (lambda q, d: model.cross_encoder(q, d[:, :head])), None, torch.optim.Adam(groups)
    return model.forward_all_windows, None, torch.optim.Adam(groups)


def train_idcm(data: PairData, text: WordPieceText, config: RerankerTrainConfig, out: Path, work: Path, meta: dict,
               device: torch.device, resume: bool = False, fingerprint: str = "") -> tuple[Checkpoint | None, list[dict], float]:
    """Run the IDCM stages in order, resuming after the last stage checkpoint found in ``work``, and
    with ``resume`` within the first unfinished stage from its state (``fingerprint``: what the run's
    settings and data must match, :mod:`ckqti.train.stage_state`)."""
    from ckqti.models.idcm import IDCM, IDCMConfig

    options = dict(config.model_options)
    if "bert" in options:  # a randomly initialised BERT of this shape (tests, ablations)
        model = IDCM(IDCMConfig(**options)).to(device)
    else:
        model = IDCM.from_minilm(IDCMConfig(**options), device=device)
    history: list[dict] = []
    best, ckpt = -1.0, None
    for stage in config.stages:
        path = work / f"stage{stage}.pt"
        inputs = meta["inputs"] if stage < 3 else inputs_digest(meta["inputs"], {k: getattr(config, k) for k in STAGE3_SETTINGS})
        done = load_checkpoint(path) if path.is_file() else None
        if done is not None and done.meta.get("inputs") != inputs:
            for old in (work / f"stage{s}.pt" for s in config.stages if s >= stage):
                old.unlink(missing_ok=True)
            print(f"note: IDCM stage checkpoints in {work} are of other inputs or settings: training stage {stage} "
                  "on", file=sys.stderr, flush=True)
            done = None
        if done is not None:
            (work / f"stage{stage}.state.pt").unlink(missing_ok=True)  # left by a run stopped before it removed it
            ckpt = done
            model.load_state_dict(ckpt.state_dict)
            history, best = list(ckpt.meta.get("history", [])), float(ckpt.meta.get("dev_ndcg10", -1.0))
            continue
        # a later stage's saved epochs began from this stage's model as it was: trained again (more epochs, another
        # patience), it may end elsewhere, and those epochs resumed on top of it would mix two runs
        for later in range(stage + 1, 4):
            (work / f"stage{later}.state.pt").unlink(missing_ok=True)
        # each stage's own seed: a run that reuses the stages before it (interrupted, or a stage-3 setting
        # changed) draws the dropout of an uninterrupted run, not the torch RNG as it was after the model's start
        torch.manual_seed(int(np.random.SeedSequence([config.seed, stage]).generate_state(1)[0]))
        score, loss_fn, optimizer = idcm_stage_setup(model, stage, config)
        epochs = config.distill_epochs if stage == 3 else config.epochs
        stage3 = {k: getattr(config, k) for k in STAGE3_SETTINGS if k != "distill_epochs"} if stage == 3 else {}
        start = ckpt.id if ckpt is not None else ""  # the model the stage began from: the stage before's
        state = StageState(work / f"stage{stage}.state.pt", inputs_digest(fingerprint, stage, stage3, start), resume)
        result = fit_stage(stage, score, loss_fn, model, optimizer, data, config, epochs, device, state=state)
        history += result.history
        best = result.best
        ckpt = save_reranker(path, model, "idcm", text, {**meta, "inputs": inputs, "stage": stage, "dev_ndcg10": best,
                                                         "history": history})
        state.path.unlink(missing_ok=True)  # the stage's checkpoint supersedes its epochs' state
    if ckpt is not None:
        ckpt = save_reranker(out, model, "idcm", text, {**dict(ckpt.meta), **meta, "dev_ndcg10": best, "history": history})
    return ckpt, history, best


# -- the API ----------------------------------------------------------------------------------


def train_reranker(
    kind: str,
    corpus: str | Path,
    queries: str | Path | Mapping[str, str],
    qrels: str | Path | Mapping[str, Mapping[str, int]],
    out: str | Path,
    config: RerankerTrainConfig | None = None,
    *,
    candidates: Mapping[str, Sequence[str]] | None = None,
    fmt: str | None = None,
    qrels_format: str | None = None,
    work_dir: str | Path | None = None,
    orcas: str | Path | None = None,
    resume: bool = False,
) -> RerankerTrainResult:
    """Train a TK, TKL or IDCM re-ranker and write it as a checkpoint at ``out``.

    Args:
        kind: ``"tk"``, ``"tkl"`` or ``"idcm"`` (overrides ``config.kind``).
        corpus: corpus file (any format ``ckqti index`` reads).
        queries, qrels: files (or loaded mappings) of the training queries and judgements;
            ``config.dev_fraction`` of the judged queries is carved out as dev.
        out: checkpoint to write.
        config: see :class:`RerankerTrainConfig`.
        candidates: ``qid -> ranked docids`` for every judged query; None runs Pyserini BM25
            (Java, in a child process) over the corpus, its index kept in the work folder.
        fmt: corpus format (None: from the file name or content).
        qrels_format: the ``qrels`` file's format, ``"trec"``, ``"beir"`` or ``"cranfield"`` (None:
            detected, :func:`indexer.readers.read_qrels`).
        work_dir: work folder (default ``<out>.work``): BM25 index, IDCM stage checkpoints, the epochs' states.
        orcas: an ORCAS file (``docid<TAB>query``) whose clicked queries lead each document's text
            as ``ckqti index --orcas`` stores it (the documents trained on and validated, and TK/TKL's
            vocabulary and idf); BM25 candidates still come from the plain corpus (as ``ckqti rerank --orcas``).
        resume: continue from the state the last epoch of an interrupted run left in the work folder
            (TK/TKL ``state.pt``, IDCM ``stage<N>.state.pt``; same settings and data, epochs and patience
            may change), ending with the uninterrupted run's weights; without it a new run replaces
            that state. IDCM reuses its finished stages either way.

    Raises:
        InputError: unreadable inputs, judged queries without text, no usable training query.
    """
    config = replace(config or RerankerTrainConfig(), kind=kind)
    out = Path(out)
    # made by its first writer (BM25's index, IDCM's stages): a run refused for its inputs leaves no folder
    work = Path(work_dir) if work_dir is not None else out.with_name(out.name + ".work")
    device = pick_device(config.device)
    q_texts, qrels_map = read_training_inputs(queries, qrels, qrels_format)
    require_texts(list(qrels_map), q_texts, queries if isinstance(queries, (str, Path)) else None)
    # the training split, before any corpus or BM25 work: too few queries to carve dev from fail at once
    judged = split_dev(qrels_map, config.dev_fraction, config.seed, config.rel_level,
                       qrels if isinstance(qrels, (str, Path)) else None,
                       hint="; TK, TKL and IDCM carve dev from these judgements only (NDRM also takes --dev-qrels)")[0]
    clicks = load_clicks(orcas)
    text, docids, doc_texts, collection = build_text(kind, corpus, config, fmt, clicks)  # before BM25's work folder
    doc_index = {d: i for i, d in enumerate(docids)}
    notes = tuple(clicks_notes(clicks) + judgement_notes(qrels_map, doc_index, config.rel_level))
    if config.progress:
        show_notes(notes)
    model_defaults = _config_defaults(kind, config)
    max_q, max_d = model_defaults
    doc_rows = (text.ids_many(doc_texts, max_d) if doc_texts is not None
                else [np.asarray(collection.doc(i)[:max_d], dtype=np.int64) for i in range(len(collection))])
    p_queries, p_qrels = {}, {}
    if config.weak_supervision == "titles":
        from ckqti.train.pseudo import title_pseudo_queries

        p_queries, p_qrels = title_pseudo_queries(collection.docids, collection.titles, collection.analyzer)
    if not p_qrels and not any(relevant_docs(judged, doc_index, config.rel_level).values()):  # before BM25 too
        raise InputError("no training query has a relevant document in the corpus (are the qrels and the corpus of "
                         "one collection?)", qrels if isinstance(qrels, (str, Path)) else None)
    teacher = load_teacher(config, docids, qrels_map, p_qrels)  # before BM25 starts Java: a bad file fails at once
    texts = {q: q_texts[q] for q in qrels_map if q in q_texts}
    missing = {**texts, **p_queries} if candidates is None else {q: t for q, t in p_queries.items()
                                                                  if q not in candidates}
    if missing:
        from ckqti.bm25 import bm25_candidates

        depth = max(config.depth, config.dev_depth)
        show_step(bm25_step(len(missing), depth), config.progress)
        found = bm25_candidates(corpus, missing, work, depth, fmt)
        candidates = {**(candidates or {}), **found}
    data = prepare_pairs(text, docids, doc_rows, {**q_texts, **p_queries}, qrels_map, candidates, config, max_q, teacher,
                         p_qrels)
    if not data.train_qids:
        raise InputError("no training query has a relevant document and a known term",
                         qrels if isinstance(qrels, (str, Path)) else None)
    wordless = wordless_notes([q for q in judged if data.relevant.get(q)], data.queries)
    if config.progress:
        show_notes(wordless)
    notes += tuple(wordless)
    read = (docids, doc_rows, {**q_texts, **p_queries}, qrels_map, candidates, Path(config.teacher) if config.teacher else None)
    meta = {"trained_by": "ckqti.train.rerankers", "config": config.to_dict(), "corpus": Path(corpus).name,
            **({"orcas": Path(orcas).name} if orcas else {}), "documents": len(docids),
            "train_queries": len(data.train_qids), "dev_queries": len(data.dev_qids), "pseudo_queries": len(data.pseudo_qids),
            # what IDCM's stage checkpoints must share to be reused: the data read and the settings, but those a
            # resume may change too (device, progress bars, validation's batch size) and the stages run
            "inputs": inputs_digest({k: v for k, v in config.to_dict().items()
                                     if k not in ("device", "progress", "eval_batch_size", "stages", *STAGE3_SETTINGS)},
                                    *read)}
    # what a resumed run must share with the saved one: as the stages', but epochs and patience may change
    fingerprint = inputs_digest(resume_settings(config.to_dict(), STAGE3_SETTINGS), *read)
    cuda = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(config.seed)
        if kind == "idcm":
            ckpt, history, best = train_idcm(data, text, config, out, work, meta, device, resume, fingerprint)
        else:
            state = StageState(work / "state.pt", fingerprint, resume)
            ckpt, result = train_term_model(data, text, collection, config, out, meta, device, state)
            history, best = result.history, result.best
    if ckpt is None:
        raise CkqtiError("training produced no model (no epoch ran)", out)
    return RerankerTrainResult(out, ckpt.id, best, tuple(history), work, notes)


def _config_defaults(kind: str, config: RerankerTrainConfig) -> tuple[int, int]:
    """The query and document caps of the model ``config.model_options`` will build."""
    if kind == "idcm":
        from ckqti.models.idcm import IDCMConfig

        c = IDCMConfig(**config.model_options)
        return c.max_query_length, c.max_doc_length
    from ckqti.models.tk import TKConfig
    from ckqti.models.tkl import TKLConfig

    cls = TKConfig if kind == "tk" else TKLConfig
    c = cls(vocab_size=2, **term_model_options(config))
    return c.max_query_length, c.max_doc_length


__all__ = [
    "RerankerTrainConfig",
    "RerankerTrainResult",
    "match_init",
    "train_reranker",
]
