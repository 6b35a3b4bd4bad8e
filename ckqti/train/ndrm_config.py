"""The settings (:class:`TrainConfig`) and the result (:class:`TrainResult`) of an NDRM training run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ckqti.train.embedding_init import check_embedding_start
from ckqti.train.options import MODEL_INITS, WEAK_SUPERVISION, check_seed

LOSSES = ("ranknet", "lce")


@dataclass(frozen=True)
class TrainConfig:
    """Settings of one training run (defaults: the NDRM paper's where it has one).

    Args:
        model: ``"ndrm1"``, ``"ndrm2"`` or ``"ndrm3"``.
        epochs: most epochs; ``patience`` epochs without a better dev nDCG@10 stop earlier.
        batch_size: queries per optimizer step (each brings 4 documents).
        lr: Adam learning rate.
        head_lr: learning rate of the scoring head (the window MLP, NDRM2's two parameters and
            NDRM3's combination); None: ``lr``. As TK's 1e-4 / 1e-3 split, small parts that
            read features can move faster than embeddings and encoder.
        seed: seeds sampling, initialisation, dropout, skip-gram and the dev split.
        dev_fraction: share of the judged training queries carved out as dev (when no dev qrels are given).
        rel_level: the grade from which a judged document is relevant (``ckqti train --rel-level``;
            TREC DL passages: 2): the positives sampled and the queries a dev split may take.
            Lower grades are non-relevant (a top-100 one may be drawn as the non-relevant candidate);
            dev nDCG@10 keeps every grade's gain. Title pseudo-queries' documents are always relevant.
        depth: first-stage (BM25) candidates per query for sampling (top-100).
        dev_depth: candidates reranked per dev query for validation.
        weak_supervision: None, or ``"titles"`` (titles as pseudo-queries for their own documents).
        pseudo_per_epoch: title pseudo-queries sampled per epoch (None: all of them).
        embeddings: initial term embeddings: ``"skipgram"`` (gensim, IN+OUT), ``"minilm"``
            (all-MiniLM-L6-v2 WordPiece compositions), ``"random"``, or a checkpoint file (``.pt``)
            whose word vectors of the same width start the model.
        init: ``"paper"`` keeps the model's own initialisation; ``"match"`` starts from a
            model that already ranks sensibly (:func:`~ckqti.train.ndrm_start.match_init`), for short training runs.
        min_df: training vocabulary bound: terms in fewer documents map to the unknown id.
        train_doc_terms: document truncation in training batches (None: the model's ``max_doc_terms``).
        max_steps: optimizer steps per epoch at most (None: every training example), for a quick trial.
        eval_batch_size: documents encoded at once when validating.
        embedding_dtype: ``"float32"`` or ``"float16"`` for embedding matrices in saved checkpoints.
        fallback: how unseen words get embedding rows when the checkpoint meets a new corpus.
        teacher: a JSON file (or ``.json.gz``) of a teacher's scores, ``{"teacher": id, "scores": {qid: {docid: score}}}``
            (e.g. IDCM's over each training query's BM25 top 100); None trains on labels alone.
            Each step then adds ``distill_weight`` times a listwise distillation loss: for every
            training query (or title pseudo-query, with ``weak_supervision``) of the batch the
            teacher scored (dev queries never), ``distill_docs``
            of its teacher-scored documents drawn at random, the cross-entropy between the
            teacher's softmax over them and the student's (:func:`~ckqti.train.losses.distill_loss`).
        distill_docs, distill_weight: see ``teacher``.
        negatives: first-stage non-relevant candidates in each query's example (1: the published
            sampling; :mod:`ckqti.train.sampling`).
        loss: ``"ranknet"`` (the paper's, every ordered pair of the example) or ``"lce"`` (listwise:
            softmax cross-entropy of the relevant document against the example's other documents;
            examples without a relevant document in the top-``depth`` then add nothing).
        model_options: NDRMConfig fields other than ``vocab_size`` and ``variant`` (e.g. ``dim``).
        device: torch device; None: CUDA when available, else CPU.
        progress: show progress bars.
    """

    model: str = "ndrm3"
    epochs: int = 10
    batch_size: int = 32
    lr: float = 1e-4
    head_lr: float | None = None
    seed: int = 0
    patience: int = 3
    dev_fraction: float = 0.1
    rel_level: int = 1
    depth: int = 100
    dev_depth: int = 100
    weak_supervision: str | None = None
    pseudo_per_epoch: int | None = None
    embeddings: str = "skipgram"
    init: str = "paper"
    min_df: int = 1
    train_doc_terms: int | None = None
    eval_batch_size: int = 64
    max_steps: int | None = None
    embedding_dtype: str = "float32"
    fallback: str = "minilm"
    teacher: str | None = None
    distill_docs: int = 8
    distill_weight: float = 1.0
    negatives: int = 1
    loss: str = "ranknet"
    model_options: Mapping[str, Any] = field(default_factory=dict)
    device: str | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        from ckqti.models.ndrm_config import VARIANTS

        choices = {"model": VARIANTS, "init": MODEL_INITS, "loss": LOSSES}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        check_embedding_start(self.embeddings)
        check_seed(self.seed)
        for name in ("epochs", "batch_size", "patience", "depth", "dev_depth", "min_df", "eval_batch_size",
                     "distill_docs", "negatives", "rel_level"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.lr <= 0 or (self.head_lr is not None and self.head_lr <= 0) or not 0.0 < self.dev_fraction < 1.0:
            raise ValueError("lr must be positive and dev_fraction in (0, 1)")
        if self.weak_supervision not in (None, *WEAK_SUPERVISION):
            raise ValueError(f"weak_supervision must be None or one of {WEAK_SUPERVISION}")
        for name in ("pseudo_per_epoch", "train_doc_terms", "max_steps"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be None or >= 1")
        if self.distill_weight < 0:
            raise ValueError("distill_weight must be >= 0")
        if {"vocab_size", "variant"} & set(self.model_options):
            raise ValueError("model_options must not set vocab_size or variant")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["model_options"] = dict(self.model_options)
        return d


@dataclass(frozen=True)
class TrainResult:
    """What a training run produced.

    Attributes:
        out: the best epoch's checkpoint.
        model_id: its id (``<kind>-<hash prefix>``).
        best_epoch: 1-based epoch of the best dev nDCG@10.
        best_dev_ndcg10: that score (rerank of the dev queries' BM25 top ``dev_depth``).
        epochs_run: epochs completed in total (including before a resume).
        stopped_early: whether patience ran out before ``epochs``.
        history: per epoch: ``epoch``, ``loss``, ``examples``, ``dev_ndcg10``, ``seconds``.
        work_dir: the work folder (BM25 index, last epoch, resumable state).
        notes: what training could not use of the judgements (:func:`~ckqti.train.data.judgement_notes`;
            shown on stderr before the first epoch when ``config.progress``).
    """

    out: Path
    model_id: str
    best_epoch: int
    best_dev_ndcg10: float
    epochs_run: int
    stopped_early: bool
    history: tuple[dict, ...]
    work_dir: Path
    notes: tuple[str, ...] = ()
