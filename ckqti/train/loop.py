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

The parts, each in its module: the settings and result (:mod:`ckqti.train.ndrm_config`), the data
(:mod:`ckqti.train.ndrm_data`, a teacher's scores :mod:`ckqti.train.teacher`), the model's start
(:mod:`ckqti.train.ndrm_start`, initial embeddings :mod:`ckqti.train.embedding_init`), an epoch and
its validation (:mod:`ckqti.train.ndrm_epoch`) and the resumable state (:mod:`ckqti.train.ndrm_state`);
this module runs them: :func:`fit` (the epochs) and :func:`train`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ckqti.bm25 import bm25_candidates
from ckqti.errors import CkqtiError
from ckqti.models.checkpoint import Checkpoint, save_checkpoint
from ckqti.models.loading import pick_device
from ckqti.train.data import (
    bm25_step,
    clicks_notes,
    inputs_digest,
    judgement_notes,
    load_clicks,
    load_collection,
    read_training_inputs,
    require_texts,
    show_notes,
    show_step,
    wordless_notes,
)
from ckqti.train.ndrm_config import TrainConfig, TrainResult
from ckqti.train.ndrm_data import TrainingData, prepare_data
from ckqti.train.ndrm_epoch import run_epoch, validate
from ckqti.train.ndrm_start import build_model, parameter_groups
from ckqti.train.ndrm_state import (
    RunState,
    fingerprint,
    load_state,
    resume_notes,
    save_state,
    saved_id,
    saved_run,
    trains_more,
)


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
    queries_format: str | None = None,
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
        queries_format: the ``queries`` file's format, ``"tsv"``, ``"jsonl"``, ``"trec"`` or ``"smart"`` (None:
            detected, :func:`indexer.readers.read_queries`).
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
    q_texts, qrels_map = read_training_inputs(queries, qrels, qrels_format, queries_format)
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
