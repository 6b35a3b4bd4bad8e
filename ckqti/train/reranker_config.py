"""The settings (:class:`RerankerTrainConfig`) and the result (:class:`RerankerTrainResult`) of a TK, TKL or IDCM run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ckqti.models.reranker import RERANKER_KINDS
from ckqti.train.embedding_init import check_embedding_start
from ckqti.train.losses_idcm import SELECTOR_LOSSES
from ckqti.train.options import MODEL_INITS, WEAK_SUPERVISION, check_seed

LOSSES = ("margin", "ranknet", "lce")
# Settings only IDCM's stage 3 reads: a change retrains the selector, not the cross-encoder (stages 1-2)
STAGE3_SETTINGS = ("distill_epochs", "selector_loss")


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
        init: ``"match"`` (see :mod:`ckqti.train.rerankers`) or ``"paper"``.
        min_df: TK/TKL vocabulary bound (rarer terms -> unknown).
        eval_batch_size: documents scored at once when validating.
        teacher: TK/TKL only: a file of a teacher's scores of training queries' documents
            (``{"teacher": id, "scores": {qid: {docid: score}}}``, ``.json`` or ``.json.gz``, as
            :func:`ckqti.train.teacher.read_teacher` reads for NDRM; dev queries' are never used;
            title pseudo-queries' ``title:<docid>`` are used with ``weak_supervision="titles"``).
            Each step then adds ``distill_weight`` times a listwise distillation loss: for every
            query of the batch the teacher scored, ``distill_docs`` of its scored documents drawn
            at random, the cross-entropy between the teacher's softmax over them and the
            student's (:func:`ckqti.train.losses.distill_loss`).
        distill_docs, distill_weight: see ``teacher``.
        weak_supervision: None, or ``"titles"`` (TK and TKL: documents' titles as pseudo-queries
            for their own documents, see :mod:`ckqti.train.rerankers`).
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
        checks = {"kind": RERANKER_KINDS, "loss": LOSSES, "init": MODEL_INITS, "selector_loss": SELECTOR_LOSSES}
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
    """What :func:`~ckqti.train.rerankers.train_reranker` produced.

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
