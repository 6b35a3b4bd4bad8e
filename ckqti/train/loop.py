"""Training NDRM1/2/3 with RankNet: data preparation, epochs, validation, early stopping, resume.

:func:`train` is the API behind ``ckqti train``. One epoch samples one example per training
query (:mod:`ckqti.train.sampling`: the published 1 relevant + 1 top-100 candidate + 2 random
documents; ``negatives`` draws more top-100 candidates), plus title pseudo-queries when weak
supervision is on (:mod:`ckqti.train.pseudo`), and takes one Adam step per ``batch_size`` queries
on the mean RankNet loss of their pairs (or, with ``loss="lce"``, the listwise loss of their
relevant documents).
After every epoch the model reranks the dev queries' BM25 candidates; nDCG@10 on dev selects
the model (the best epoch is written to ``out``) and stops training after ``patience`` epochs
without improvement.

Work files live in ``<out>.work/`` (or ``work_dir``): the Pyserini BM25 index of the corpus,
``last.pt`` (the last epoch's model, a checkpoint like ``out``) and ``state.pt`` (model,
optimizer, torch RNG, epoch, best score, history), both rewritten atomically after every
epoch. A new best epoch is written beside ``out`` (``.<out>.best``) and moved onto ``out`` once
``state.pt`` names it, so a run stopped at any moment can be resumed. ``resume=True`` continues
from ``state.pt``; since each epoch's examples are drawn
from a generator seeded by ``(seed, epoch)`` and the torch RNG is saved, a resumed run
reaches the same weights as an uninterrupted one.

Reproducibility: the torch RNG is forked for the run (the caller's RNG state is untouched)
and seeded with ``seed``; skip-gram training uses one gensim worker and the same seed.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from ckqti.bm25 import bm25_candidates
from ckqti.errors import CkqtiError, InputError
from ckqti.files import save_torch
from ckqti.models.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from ckqti.models.inputs import pad_rows
from ckqti.models.loading import pick_device
from ckqti.terminal import counted
from ckqti.train import pseudo
from ckqti.train.data import (
    Collection,
    analyze_queries,
    bm25_step,
    candidate_indices,
    clicks_notes,
    inputs_digest,
    judgement_notes,
    load_clicks,
    load_collection,
    read_training_inputs,
    relevant_docs,
    require_texts,
    show_notes,
    show_step,
    split_dev,
    wordless_notes,
)
from ckqti.train.losses import distill_loss, finite_loss, listwise_loss, ranknet_loss
from ckqti.train.options import check_seed
from ckqti.train.sampling import LABELS_WITH_RELEVANT, Example, docs_per_example, sample_epoch
from ckqti.train.scoring import as_run, encode_by_length, score_pairs
from ckqti.train.stage_state import fresh_note, restore_rng, rng_state, stop_epoch, what_is_left

EMBEDDING_INITS = ("skipgram", "minilm", "random")  # or a checkpoint file (``.pt``): its word vectors
MODEL_INITS = ("paper", "match")
WEAK_SUPERVISION = ("titles",)
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
            model that already ranks sensibly (:func:`match_init`), for short training runs.
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
            teacher's softmax over them and the student's (:func:`distill_loss`).
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
        from ckqti.models.ndrm import VARIANTS

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


@dataclass
class TrainingData:
    """Everything sampling and validation need, in collection indices and term ids."""

    collection: Collection
    query_ids: dict[str, np.ndarray]
    relevant: dict[str, frozenset[int]]
    candidates: dict[str, list[int]]
    train_qids: list[str]
    pseudo_qids: list[str]
    dev_qids: list[str]
    dev_qrels: dict[str, dict[str, int]]
    teacher: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # qid -> (doc indices, scores)


@dataclass
class RunState:
    """The resumable part of a run besides model and optimizer."""

    epoch: int = 0
    best: float = -1.0
    best_epoch: int = 0
    since_best: int = 0
    history: list[dict] = field(default_factory=list)
    best_id: str = ""


def prepare_data(
    collection: Collection,
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    config: TrainConfig,
    dev_qrels: Mapping[str, Mapping[str, int]] | None = None,
    candidates: Mapping[str, Sequence[str]] | None = None,
    bm25=None,
    qrels_path: str | Path | None = None,
    dev_qrels_path: str | Path | None = None,
    corpus_path: str | Path | None = None,
) -> TrainingData:
    """Split dev, add pseudo-queries, fetch candidates (given, or from ``bm25(queries) -> candidates``);
    ``qrels_path``, ``dev_qrels_path``, ``corpus_path``: the files ``qrels``, ``dev_qrels`` and the
    collection were read from, named by an error about them."""
    if dev_qrels is None:
        train_qrels, dev = split_dev(qrels, config.dev_fraction, config.seed, config.rel_level, qrels_path,
                                     hint="; or give dev judgements of other queries (--dev-qrels)")
    else:
        train_qrels, dev = dict(qrels), {q: dict(j) for q, j in dev_qrels.items()}
        both = sorted(set(train_qrels) & set(dev))
        if both:
            raise InputError(f"{counted(len(both), 'query', 'queries')} judged in both the training and the dev qrels (first: "
                             f"{both[0]!r}): dev would choose the model on queries it trained on", dev_qrels_path)
    require_texts([*train_qrels, *dev], queries)
    texts = {q: queries[q] for q in [*train_qrels, *dev]}
    p_qrels: dict[str, dict[str, int]] = {}
    if config.weak_supervision == "titles":
        p_queries, p_qrels = pseudo.title_pseudo_queries(collection.docids, collection.titles, collection.analyzer)
        texts.update(p_queries)
    pseudo_qids = list(p_qrels)
    index = collection.index()
    # a title's own document is relevant (grade 1) at any level
    relevant = {**relevant_docs({**train_qrels, **dev}, index, config.rel_level), **relevant_docs(p_qrels, index)}
    if not any(relevant.get(q) for q in [*train_qrels, *pseudo_qids]):
        raise InputError("no training query has a relevant document in the corpus (are the qrels and the corpus of "
                         "one collection?)", qrels_path)
    if dev_qrels is not None and not any(relevant.get(q) for q in dev):  # dev nDCG@10 0 at every epoch
        raise InputError(f"no dev query has a relevant document (grade >= {config.rel_level}) in the corpus: dev could "
                         "not choose an epoch; give dev judgements of this corpus, or carve dev from --qrels (no "
                         "--dev-qrels)", dev_qrels_path)
    check_sampleable([*train_qrels, *pseudo_qids], relevant, len(collection), config.negatives, corpus_path)
    # training claims' and title pseudo-queries' scores (dev claims' never); before BM25: a bad file fails at once
    teacher = read_teacher(config.teacher, index, {**p_qrels, **train_qrels}) if config.teacher else {}
    if candidates is None:
        if bm25 is None:
            raise ValueError("give candidates or a bm25 function")
        candidates = bm25(texts)
    from ckqti.models.ndrm import NDRMConfig

    max_q = config.model_options.get("max_query_terms", NDRMConfig.max_query_terms)
    query_ids = analyze_queries(texts, collection.analyzer, collection.vocab, max_q)
    usable = {q for q, ids in query_ids.items() if (ids > 1).any()}
    return TrainingData(
        collection=collection,
        query_ids=query_ids,
        relevant=relevant,
        candidates=candidate_indices(candidates, index, max(config.depth, config.dev_depth)),
        train_qids=sorted(q for q in train_qrels if q in usable),
        pseudo_qids=sorted(q for q in pseudo_qids if q in usable),
        dev_qids=sorted(dev),
        dev_qrels=dev,
        teacher=teacher,
    )


def check_sampleable(qids: Sequence[str], relevant: Mapping[str, frozenset[int]], num_docs: int, negatives: int,
                     corpus_path: str | Path | None = None) -> None:
    """Each training query's example draws up to ``negatives + 3`` documents not relevant to it (the
    BM25 candidates and the random ones, :mod:`ckqti.train.sampling`): a corpus with fewer was a
    traceback from the first epoch's sampling, after BM25."""
    need = docs_per_example(negatives)  # an example without a relevant document draws every one non-relevant
    short = next((q for q in qids if num_docs - len(relevant.get(q, ())) < need), None)
    if short is not None:
        others = num_docs - len(relevant.get(short, ()))
        raise InputError(f"the corpus has {counted(num_docs, 'document')}, {others:,} of them not relevant to training "
                         f"query {short!r}: NDRM's sampling draws up to {need} of those for each query (--negatives "
                         f"{negatives} and 2 or 3 random documents); train on a larger corpus", corpus_path)


def read_teacher(path: str | Path, index: Mapping[str, int], train_qrels: Mapping[str, Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Teacher scores of training queries only (a dev query's never reach training): ``qid -> (indices, scores)``.

    Raises:
        InputError: an unreadable file, a query whose scores are not a ``{docid: number}`` object, a
            score that is not a finite float32 (NaN, or 1e300, would train a NaN model), or no training query
            with two scored documents.
    """
    from indexer.readers.formats import open_binary

    try:
        with open_binary(path) as raw:  # gzip by its magic bytes, whatever the name
            scores = json.loads(raw.read().decode("utf-8-sig"))["scores"]  # a leading BOM (Windows tools) is no text
        items = scores.items()
    except (EOFError, zlib.error) as err:  # a gzip stream cut short (click would show EOFError as "Aborted!")
        raise InputError(f"corrupt gzip data ({err})", path) from None
    except RecursionError:  # "[[[[..." thousands deep
        raise InputError("not a teacher scores file (JSON nested too deeply)", path) from None
    except (KeyError, TypeError, AttributeError):  # JSON of another shape: a message such as "list indices must be integers"
        raise InputError('not a teacher scores file: expected a JSON object {"scores": {qid: {docid: score}}}, '
                         "as scripts/teacher_scores.py writes", path) from None
    except (OSError, ValueError) as err:
        raise InputError(f"not a teacher scores file ({err})", path) from err
    out = {}
    for qid, docs in items:
        if not isinstance(docs, dict):
            raise InputError(f"query {qid!r}: scores must be an object of docid -> score, found {type(docs).__name__}", path)
        bad = next(((d, s) for d, s in docs.items() if not _teacher_score(s)), None)
        if bad is not None:
            raise InputError(f"query {qid!r}, document {_short(bad[0])}: score {_short(bad[1])} is not a finite "
                             "number of at most 3.4e38 in size (training holds float32 scores)", path)
        known = [(index[d], float(s)) for d, s in docs.items() if d in index]
        if qid in train_qrels and len(known) >= 2:
            out[qid] = (np.array([i for i, _ in known], dtype=np.int64), np.array([s for _, s in known], np.float32))
    if not out:
        raise InputError("the teacher scored no training query of this corpus", path)
    return out


FLOAT32_MAX = float(np.finfo(np.float32).max)


def _teacher_score(value: Any) -> bool:
    """Whether ``value`` is a number that training can hold: finite as a 32-bit float (``1e300`` is
    finite in JSON but infinite as the ``float32`` scores train on; an integer of 40 digits is no
    float at all)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return abs(float(value)) <= FLOAT32_MAX  # False for NaN too
    except OverflowError:
        return False


def _short(value: Any) -> str:
    """``repr(value)``, cut to 40 characters (a teacher's score may be an integer of thousands of digits)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_embedding_start(method: str) -> None:
    """Raise ValueError unless ``method`` is one of :data:`EMBEDDING_INITS` or a ``.pt`` checkpoint file name."""
    if method not in EMBEDDING_INITS and not str(method).endswith(".pt"):
        raise ValueError(f"embeddings must be one of {EMBEDDING_INITS} or a checkpoint file (.pt), got {method!r}")


def initial_embeddings(collection: Collection, method: str, dim: int, seed: int, show: bool = False) -> np.ndarray | None:
    """``[len(vocab), dim]`` initial embeddings, or None for the model's random initialisation.

    ``method`` is one of :data:`EMBEDDING_INITS` or a checkpoint file whose word vectors start the
    model (:func:`ckqti.models.checkpoint.checkpoint_embeddings`)."""
    from ckqti import embeddings

    vocab = collection.vocab
    if method == "random":
        return None
    if method.endswith(".pt"):
        from ckqti.models.checkpoint import checkpoint_embeddings

        return checkpoint_embeddings(method, vocab, dim)
    if method == "minilm":
        return embeddings.minilm_embeddings(vocab, dim)
    if dim % 2:
        raise ValueError(f"skip-gram IN+OUT embeddings need an even dim, got {dim}")
    docs = [[vocab.terms[i] for i in collection.doc(d) if i > 1] for d in range(len(collection))]
    config = embeddings.SkipGramConfig(dim=dim // 2, seed=seed)
    show_step(f"skip-gram word vectors (gensim, {config.epochs} epochs) on {len(docs):,} documents ...", show)
    return embeddings.skipgram_embeddings(docs, vocab, config)


def build_model(
    data: TrainingData, config: TrainConfig, device: torch.device, init: bool, matrix: np.ndarray | None = None
) -> nn.Module:
    """A fresh model for the training vocabulary; embeddings initialised when ``init`` (from ``matrix`` if given)."""
    from ckqti.models.ndrm import NDRMConfig, build_ndrm

    vocab = data.collection.vocab
    model_config = NDRMConfig(vocab_size=len(vocab), variant=config.model, **dict(config.model_options))
    model = build_ndrm(model_config, vocab)
    if init and config.model != "ndrm2":
        if matrix is None:
            matrix = initial_embeddings(data.collection, config.embeddings, model_config.dim, config.seed,
                                        config.progress)
        if matrix is not None:
            model.load_embeddings(torch.as_tensor(matrix))
    if init and config.init == "match":
        match_init(model)
    return model.to(device)


def match_init(model: nn.Module) -> None:
    """Start NDRM1/NDRM3 from a model that ranks like its explicit part and matches terms by embedding.

    The paper trains from a random initialisation for many steps on MS MARCO; a few hundred
    steps on a small collection barely move a random query projection or NDRM3's random
    ``Linear(2, 1)``, whose sign may even rank against the explicit score. So:

    * NDRM1's query projection is the identity and the document mix takes the raw embedding
      only (``w_emb = 1, w_ctx = 0``): a query term's cosine with a document term is the
      embeddings' cosine (1 for the same term), so the kernels see exact and skip-gram-similar
      matches from the first step; the Conformer's share grows from 0 as training finds it useful;
    * NDRM3's combination weights are ``(latent 0, explicit 1)``, bias 0: at step 0 the model
      ranks exactly as NDRM2 (a BM25-like scorer), and the latent weight grows from 0 as far as
      the latent score helps.
    """
    latent = getattr(model, "latent", model)
    with torch.no_grad():
        if hasattr(latent, "query_proj"):
            nn.init.eye_(latent.query_proj.weight)
            nn.init.zeros_(latent.query_proj.bias)
            latent.mix.weight[0].fill_(1.0)
            latent.mix.weight[1].fill_(0.0)
            latent.mix.bias.zero_()
        if hasattr(model, "combine"):
            model.combine.linear.weight.copy_(torch.tensor([[0.0, 1.0]]))
            model.combine.linear.bias.zero_()


HEAD_PREFIXES = ("pooling.", "latent.pooling.", "combine.", "explicit.", "length_")


def parameter_groups(model: nn.Module, lr: float, head_lr: float | None) -> list[dict]:
    """Adam parameter groups: the scoring head (:data:`HEAD_PREFIXES`) at ``head_lr``, the rest at ``lr``."""
    head, body = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:  # a fixed explicit channel's two parameters are not trained
            (head if name.startswith(HEAD_PREFIXES) else body).append(p)
    groups = [{"params": body, "lr": lr}, {"params": head, "lr": head_lr if head_lr is not None else lr}]
    return [g for g in groups if g["params"]]


def epoch_examples(data: TrainingData, config: TrainConfig, epoch: int) -> list[Example]:
    """The examples of one epoch, a function of ``(seed, epoch)`` only."""
    rng = np.random.default_rng([config.seed, epoch])
    qids = list(data.train_qids) + pseudo.draw_pseudo(data.pseudo_qids, config.pseudo_per_epoch, rng)
    cands = {q: data.candidates.get(q, [])[: config.depth] for q in qids}
    return sample_epoch(qids, data.relevant, cands, len(data.collection), rng, config.negatives)


def _score_groups(model: nn.Module, data: TrainingData, qids: Sequence[str], docs: Sequence[int], per_query: int,
                  doc_terms: int, device: torch.device) -> Tensor:
    """Scores of ``per_query`` documents for each query, documents listed query by query -> ``[len(qids), per_query]``."""
    coll = data.collection
    query = pad_rows([data.query_ids[q] for q in qids]).to(device).repeat_interleave(per_query, dim=0)  # [B * k, Q]
    lengths = torch.tensor([len(coll.doc(d)) for d in docs], dtype=torch.float32, device=device)  # [B * k]
    enc = encode_by_length(model, [coll.doc(d)[:doc_terms] for d in docs], lengths, device)  # [B * k, L]
    # scored in one call: NDRM2's tf and length means and NDRM3's BatchNorm take the whole batch's statistics
    return model.encoded_term_scores(query, enc).sum(-1).view(len(qids), per_query)


def teacher_group(data: TrainingData, batch: Sequence[Example], k: int,
                  rng: np.random.Generator) -> tuple[list[str], list[int], np.ndarray]:
    """For each example whose query the teacher scored: ``k`` of its scored documents (without replacement
    when it has ``k``); returns ``(qids, documents query by query, teacher scores [B', k])``."""
    qids, docs, scores = [], [], []
    for ex in batch:
        if ex.qid not in data.teacher:
            continue
        idx, sc = data.teacher[ex.qid]
        pick = rng.choice(len(idx), size=k, replace=len(idx) < k)
        qids.append(ex.qid)
        docs += [int(i) for i in idx[pick]]
        scores.append(sc[pick])
    return qids, docs, np.asarray(scores, dtype=np.float32).reshape(len(qids), k)


def train_step(
    model: nn.Module, optimizer: torch.optim.Optimizer, batch: Sequence[Example], data: TrainingData,
    doc_terms: int, device: torch.device, config: TrainConfig | None = None, rng: np.random.Generator | None = None,
) -> float:
    """One Adam step on the ranking loss of a batch of examples (``config.loss``, RankNet without a config;
    plus the teacher's distillation loss when ``data.teacher`` and ``config.distill_weight`` are set);
    returns the loss."""
    docs = [d for ex in batch for d in ex.docs]
    per_query = len(batch[0].docs)
    scores = _score_groups(model, data, [ex.qid for ex in batch], docs, per_query, doc_terms, device)  # [B, n + 3]
    labels = torch.tensor([ex.labels for ex in batch], device=device)  # [B, n + 3]
    if config is not None and config.loss == "lce":  # examples without a relevant document (label 2) add nothing
        loss = listwise_loss(scores, labels, relevant=LABELS_WITH_RELEVANT[0])
    else:
        loss = ranknet_loss(scores, labels)
    if data.teacher and config is not None and config.distill_weight > 0:
        qids, t_docs, t_scores = teacher_group(data, batch, config.distill_docs, rng or np.random.default_rng(0))
        if qids:
            student = _score_groups(model, data, qids, t_docs, config.distill_docs, doc_terms, device)  # [B', k]
            loss = loss + config.distill_weight * distill_loss(student, torch.from_numpy(t_scores).to(device))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def run_epoch(
    model: nn.Module, optimizer: torch.optim.Optimizer, data: TrainingData, config: TrainConfig, epoch: int,
    device: torch.device,
) -> dict[str, float]:
    """Train one epoch (0-based ``epoch``); returns its mean loss and example count."""
    from ckqti.progress import progress_bar

    examples = epoch_examples(data, config, epoch)
    rng = np.random.default_rng([config.seed, epoch, 1])  # the teacher's documents (only drawn with a teacher)
    doc_terms = config.train_doc_terms or model.config.max_doc_terms
    model.train()
    losses = []
    steps = range(0, len(examples), config.batch_size)[: config.max_steps]
    bar = progress_bar(steps, desc=f"epoch {epoch + 1}/{config.epochs}", unit="step", show=config.progress)
    for start in bar:
        loss = train_step(model, optimizer, examples[start : start + config.batch_size], data, doc_terms, device, config,
                          rng)
        losses.append(finite_loss(loss, f"epoch {epoch + 1}, step {len(losses) + 1}"))
        bar.set_postfix(loss=f"{np.mean(losses[-20:]):.4f}")
    return {"loss": float(np.mean(losses)) if losses else 0.0, "examples": len(examples)}


def validate(model: nn.Module, data: TrainingData, config: TrainConfig, device: torch.device) -> float:
    """Mean nDCG@10 of the dev queries, reranking their top ``dev_depth`` candidates."""
    from ckqti.evaluate import evaluate

    cands = {q: data.candidates.get(q, [])[: config.dev_depth] for q in data.dev_qids}
    scores = score_pairs(model, data.query_ids, data.collection, cands, config.eval_batch_size,
                         model.config.max_doc_terms, device, progress=config.progress)
    run = as_run(scores, data.collection.docids)
    return float(evaluate(run, data.dev_qrels, ["nDCG@10"]).mean["nDCG@10"])


def fingerprint(config: TrainConfig, sources: Mapping[str, Any]) -> str:
    """What a resumed run must share with the saved one (epochs, patience and progress may change)."""
    d = config.to_dict()
    for key in ("epochs", "patience", "progress", "device", "eval_batch_size"):
        d.pop(key)
    if d["max_steps"] is None:  # as states saved before the option were fingerprinted
        d.pop("max_steps")
    return json.dumps({"config": d, "sources": dict(sources)}, sort_keys=True, default=str)


def save_state(path: Path, model: nn.Module, optimizer, state: RunState, fp: str) -> None:
    payload = {
        "fingerprint": fp,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        **rng_state(model),
        "run": asdict(state),
    }
    save_torch(payload, path)


def saved_id(path: Path) -> str | None:
    """The id of the checkpoint at ``path``, or None when there is none to read."""
    try:
        return load_checkpoint(path).id if path.is_file() else None
    except CkqtiError:
        return None


def saved_run(path: Path) -> RunState | None:
    """The run state saved at ``path`` (read again and checked by :func:`load_state`), or None when there is
    none to read."""
    try:
        return RunState(**torch.load(path, map_location="cpu", weights_only=True)["run"]) if path.is_file() else None
    except Exception:  # a damaged file raises many types: load_state names it
        return None


def trains_more(state: RunState | None, config: TrainConfig) -> bool:
    """Whether a run from ``state`` (None: a new run) has an epoch left to train: fewer than ``config.epochs``
    done and patience not run out."""
    return state is None or (state.epoch < config.epochs and state.since_best < config.patience)


def load_state(path: Path, model: nn.Module, optimizer, fp: str) -> RunState:
    """Restore model, optimizer and RNG from ``path``; returns the run state."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a damaged file raises many types
        raise CkqtiError(f"cannot read the training state ({type(err).__name__}); rerun without --resume", path) from None
    if payload.get("fingerprint") != fp:
        raise CkqtiError("the saved training state has other settings or data; rerun without --resume", path)
    try:
        model.load_state_dict(payload["model"])
        optimizer.load_state_dict(payload["optimizer"])
    except (RuntimeError, ValueError, KeyError):  # a state of another vocabulary or model shape
        raise CkqtiError("the saved training state has other settings or data; rerun without --resume", path) from None
    restore_rng(payload, model)
    return RunState(**payload["run"])


def resume_notes(resume: bool, resuming: bool, state: RunState, path: Path, config: TrainConfig) -> list[str]:
    """What a run does with the saved state at ``path``, in one line: ``--resume`` printed nothing, so
    a resumed run looked like a new one until its next epoch ended, ``--resume`` without a state
    started over silently, and a run without ``--resume`` silently replaced an interrupted run's state."""
    if resuming:
        best = f"best dev nDCG@10 {state.best:.4f} at epoch {state.best_epoch}" if state.best_epoch else "no best yet"
        stop = stop_epoch(state.history, config.epochs, config.patience, RunState.best, state.epoch)
        left = what_is_left(state.epoch, state.since_best, state.best_epoch, stop, config.epochs, config.patience)
        return [f"resuming from {path} after epoch {state.epoch} ({best}): {left}"]
    return [note] if (note := fresh_note(path, resume)) else []

def _save_model(path: Path, model: nn.Module, data: TrainingData, config: TrainConfig, meta: dict) -> Checkpoint:
    return save_checkpoint(path, model, config.model, model.config.to_dict(), data.collection.vocab,
                           data.collection.analyzer, meta, config.embedding_dtype, config.fallback)


def fit(
    model: nn.Module, optimizer, data: TrainingData, config: TrainConfig, state: RunState, paths: dict[str, Path],
    fp: str, meta: dict, device: torch.device,
) -> RunState:
    """Epochs from ``state.epoch`` on: train, validate, keep the best in ``paths["out"]``, save state each epoch."""
    for epoch in range(state.epoch, config.epochs):
        if state.since_best >= config.patience:
            break
        started = time.perf_counter()
        stats = run_epoch(model, optimizer, data, config, epoch, device)
        dev = validate(model, data, config, device)
        state.epoch = epoch + 1
        state.history.append({"epoch": epoch + 1, **stats, "dev_ndcg10": dev, "seconds": time.perf_counter() - started})
        epoch_meta = {**meta, "epoch": epoch + 1, "dev_ndcg10": dev, "history": state.history}
        better = dev > state.best
        if better:  # written beside the state first, moved to --out once the state names it: a kill in between
            state.best, state.best_epoch, state.since_best = dev, epoch + 1, 0  # leaves a state --resume can finish
            state.best_id = _save_model(paths["best"], model, data, config, epoch_meta).id
        else:
            state.since_best += 1
        _save_model(paths["last"], model, data, config, epoch_meta)
        save_state(paths["state"], model, optimizer, state, fp)
        if better:
            os.replace(paths["best"], paths["out"])
        if config.progress:
            print(f"epoch {epoch + 1}: loss {stats['loss']:.4f}, dev nDCG@10 {dev:.4f} (best {state.best:.4f} at epoch "
                  f"{state.best_epoch})", flush=True)
    return state


def train(
    corpus: str | Path,
    queries: str | Path | Mapping[str, str],
    qrels: str | Path | Mapping[str, Mapping[str, int]],
    out: str | Path,
    config: TrainConfig = TrainConfig(),
    *,
    dev_qrels: str | Path | Mapping[str, Mapping[str, int]] | None = None,
    candidates: Mapping[str, Sequence[str]] | None = None,
    fmt: str | None = None,
    qrels_format: str | None = None,
    resume: bool = False,
    work_dir: str | Path | None = None,
    init_embeddings: np.ndarray | None = None,
    orcas: str | Path | None = None,
) -> TrainResult:
    """Train an NDRM model and write its best epoch (by dev nDCG@10) as a checkpoint at ``out``.

    Args:
        corpus: corpus file (any format ``ckqti index`` reads).
        queries, qrels: files (or loaded mappings) of the training queries and judgements.
        out: checkpoint to write (see :mod:`ckqti.models.checkpoint`).
        config: see :class:`TrainConfig`.
        dev_qrels: judgements of dev queries (texts in ``queries``); None carves
            ``config.dev_fraction`` of ``qrels`` out as dev.
        candidates: ``qid -> ranked docids`` first-stage candidates for every training, dev
            (and pseudo) query; None runs Pyserini BM25 (Java) over the corpus.
        fmt: corpus format (None: from the file name or content).
        qrels_format: ``qrels`` and ``dev_qrels`` files' format, ``"trec"``, ``"beir"`` or
            ``"cranfield"`` (None: detected, :func:`indexer.readers.read_qrels`).
        resume: continue from the work folder's saved state when there is one (a run with no epoch left
            fetches no BM25 candidates: it checks the state and returns its result).
        work_dir: work folder (default ``<out>.work``).
        init_embeddings: a ready ``[len(vocabulary), dim]`` initial embedding matrix for the
            corpus vocabulary (e.g. skip-gram vectors trained once for several runs); None
            computes ``config.embeddings``.
        orcas: an ORCAS file (``docid<TAB>query``, :func:`indexer.readers.load_orcas`) whose clicked
            queries lead each document's text as ``ckqti index --orcas`` stores it: the documents
            trained on and validated, the vocabulary, statistics and skip-gram vectors read them;
            BM25 candidates still come from the plain corpus (as ``ckqti rerank --orcas``).

    Raises:
        InputError: unreadable inputs, judged queries without text, fewer than 2 judged queries.
        CkqtiError: a saved state that does not match these settings (with ``resume``).
    """
    from indexer.readers import read_qrels

    out = Path(out)
    # made by its first writer (BM25's index, the state): a run refused for its inputs leaves no folder
    work = Path(work_dir) if work_dir is not None else out.with_name(out.name + ".work")
    device = pick_device(config.device)
    q_texts, qrels_map = read_training_inputs(queries, qrels, qrels_format)
    dev_map = read_qrels(dev_qrels, qrels_format) if isinstance(dev_qrels, (str, Path)) else dev_qrels
    require_texts([*qrels_map, *(dev_map or {})], q_texts, queries if isinstance(queries, (str, Path)) else None)
    clicks = load_clicks(orcas)
    collection = load_collection(corpus, fmt=fmt, min_df=config.min_df, orcas=clicks)  # before BM25's work folder
    notes = tuple(clicks_notes(clicks)
                  + judgement_notes({**qrels_map, **(dev_map or {})}, collection.index(), config.rel_level))
    if config.progress:
        show_notes(notes)
    depth = max(config.depth, config.dev_depth)
    # the best epoch waits beside --out (one rename from it, whatever folder work is in) until the state names it
    paths = {"out": out, "best": out.with_name(f".{out.name}.best"), "last": work / "last.pt", "state": work / "state.pt"}
    # a run with no epoch left trains nothing: BM25 (most of the start) is skipped, its state still checked below
    finished = resume and not trains_more(saved_run(paths["state"]), config)

    def bm25(texts: Mapping[str, str]) -> dict[str, list[str]]:
        if finished:
            return {}
        show_step(bm25_step(len(texts), depth), config.progress)
        return bm25_candidates(corpus, texts, work, depth, fmt)

    data = prepare_data(collection, q_texts, qrels_map, config, dev_map, candidates, bm25=bm25,
                        qrels_path=qrels if isinstance(qrels, (str, Path)) else None,
                        dev_qrels_path=dev_qrels if isinstance(dev_qrels, (str, Path)) else None, corpus_path=corpus)
    if not data.train_qids:
        raise InputError("no training query has a term in the corpus vocabulary", qrels if isinstance(qrels, (str, Path)) else None)
    wordless = wordless_notes([q for q in qrels_map if q not in set(data.dev_qids)], data.query_ids)
    if config.progress:
        show_notes(wordless)
    notes += tuple(wordless)
    sources = {"corpus": str(Path(corpus).resolve()), "documents": len(collection), "train_queries": data.train_qids,
               "dev_queries": data.dev_qids, "pseudo_queries": len(data.pseudo_qids),
               "candidates": "given" if candidates is not None else "pyserini-bm25",
               "data": inputs_digest(collection.docids, collection.titles, collection.tokens, q_texts, qrels_map,
                                     dev_map, Path(config.teacher) if config.teacher else None)}
    if orcas:  # a key only then: states saved without clicks keep their fingerprint
        sources["orcas"] = str(Path(orcas).resolve())
    fp = fingerprint(config, sources)
    meta = {"trained_by": "ckqti train", "config": config.to_dict(), "corpus": Path(corpus).name,
            **({"orcas": Path(orcas).name} if orcas else {}), "documents": len(collection),
            "train_queries": len(data.train_qids), "dev_queries": len(data.dev_qids), "pseudo_queries": len(data.pseudo_qids), "dev_qids": data.dev_qids}
    resuming = resume and paths["state"].is_file()
    cuda = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(config.seed)
        model = build_model(data, config, device, init=not resuming, matrix=init_embeddings)
        optimizer = torch.optim.Adam(parameter_groups(model, config.lr, config.head_lr))
        state = load_state(paths["state"], model, optimizer, fp) if resuming else RunState()
        if config.progress:
            show_notes(resume_notes(resume, resuming, state, paths["state"], config))
        if resuming and state.best_id and saved_id(out) != state.best_id:
            if saved_id(paths["best"]) != state.best_id:
                raise CkqtiError(f"the best epoch's checkpoint ({state.best_id}, epoch {state.best_epoch}) is no longer "
                                 "at --out, and resuming cannot restore it: put it back, or rerun without --resume", out)
            os.replace(paths["best"], out)  # stopped after saving the state, before moving its best to --out
        paths["best"].unlink(missing_ok=True)  # an epoch written before a kill and never named by the state
        state = fit(model, optimizer, data, config, state, paths, fp, meta, device)
    return TrainResult(out, state.best_id, state.best_epoch, state.best, state.epoch,
                       state.since_best >= config.patience and state.epoch < config.epochs,
                       tuple(state.history), work, notes)
