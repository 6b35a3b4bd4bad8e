"""NDRM training data (:class:`TrainingData`): dev split, title pseudo-queries, candidates, a teacher's scores."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ckqti.errors import InputError
from ckqti.terminal import counted
from ckqti.train import pseudo
from ckqti.train.data import Collection, analyze_queries, candidate_indices, relevant_docs, require_texts, split_dev
from ckqti.train.ndrm_config import TrainConfig
from ckqti.train.sampling import docs_per_example
from ckqti.train.teacher import read_teacher


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
    from ckqti.models.ndrm_config import NDRMConfig

    max_q = config.model_options.get("max_query_terms", NDRMConfig.max_query_terms)
    query_ids = analyze_queries(texts, collection.analyzer, collection.vocab, max_q)
    usable = {q for q, ids in query_ids.items() if (ids > 1).any()}
    if not any(q in usable for q in train_qrels):  # before BM25 (Java, minutes on a large corpus), as the checks above
        raise InputError("no training query has a term in the corpus vocabulary", qrels_path)
    if candidates is None:
        if bm25 is None:
            raise ValueError("give candidates or a bm25 function")
        candidates = bm25(texts)
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
