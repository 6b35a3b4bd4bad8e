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
(2) the cross-encoder on all windows of documents (:meth:`ckqti.models.idcm.IDCM.forward_all_windows`, best 3
windows combined); (3) the kernel selector distilled from the frozen cross-encoder's window
scores (:func:`ckqti.train.losses_idcm.selector_distillation_loss`, LambdaLoss), only the
selector's parameters trained.
Validation uses each stage's own scoring (stage 1: passage score of the first window; stage 2:
all windows; stage 3: the cascade of :meth:`ckqti.models.idcm.IDCM.forward`). A stage's best model is saved
to ``<work>/stage<N>.pt`` so an interrupted run resumes after its last finished stage; each stage
seeds torch from ``(seed, stage)``, so it ends with an uninterrupted run's weights.

``init="match"`` (the default) starts TK and TKL from a model that already ranks by exact
matches, as the NDRM trainer's option does (the papers train for days on MS MARCO; a few
hundred CPU steps on SciFact barely move a random ``K -> 1`` layer, whose sign may rank
against matching): the hybrid mix takes the raw embedding only (``alpha = 1``: a term's cosine
with itself is 1), and the ``K -> 1`` layer weights the exact-match kernel (``mu = 1``) by 1 and
the others by 0. Every weight stays trainable.

The parts, each in its module: the settings and result (:mod:`ckqti.train.reranker_config`), the
data (:mod:`ckqti.train.reranker_data`) and each epoch's draw from it
(:mod:`ckqti.train.reranker_sampling`), an epoch (:mod:`ckqti.train.reranker_epoch`), validation
(:mod:`ckqti.train.reranker_validation`), a stage of epochs (:mod:`ckqti.train.reranker_stage`),
TK and TKL (:mod:`ckqti.train.reranker_tk`, with :func:`~ckqti.train.reranker_tk.match_init`) and
IDCM's stages (:mod:`ckqti.train.reranker_idcm`); this module runs them: :func:`train_reranker`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from ckqti.errors import CkqtiError, InputError
from ckqti.models.loading import pick_device
from ckqti.train.data import (
    bm25_step,
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
from ckqti.train.reranker_config import STAGE3_SETTINGS, RerankerTrainConfig, RerankerTrainResult
from ckqti.train.reranker_data import build_text, load_teacher, prepare_pairs
from ckqti.train.reranker_idcm import train_idcm
from ckqti.train.reranker_tk import term_model_options, train_term_model
from ckqti.train.stage_state import StageState, resume_settings


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
    queries_format: str | None = None,
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
        queries_format: the ``queries`` file's format, ``"tsv"``, ``"jsonl"``, ``"trec"`` or ``"smart"`` (None:
            detected, :func:`indexer.readers.read_queries`).
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
    q_texts, qrels_map = read_training_inputs(queries, qrels, qrels_format, queries_format)
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
    relevant = relevant_docs(judged, doc_index, config.rel_level)
    if not p_qrels and not any(relevant.values()):  # before BM25 too
        raise InputError("no training query has a relevant document in the corpus (are the qrels and the corpus of "
                         "one collection?)", qrels if isinstance(qrels, (str, Path)) else None)
    if not any(relevant.get(q) and (text.ids(q_texts[q], max_q) > 1).any() for q in judged):  # prepare_pairs' train_qids
        raise InputError("no training query has a relevant document and a known term",
                         qrels if isinstance(qrels, (str, Path)) else None)
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
    "train_reranker",
]
