"""Re-ranker training data (:class:`PairData`): documents and queries as token ids, judgements, candidates, a teacher."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ckqti.models.inputs import TermText, WordPieceText
from ckqti.train.data import candidate_indices, relevant_docs, require_texts, split_dev
from ckqti.train.reranker_config import RerankerTrainConfig
from ckqti.train.teacher import read_teacher

if TYPE_CHECKING:
    from indexer.readers import Clicks


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
    ``pseudo_qrels`` (dev queries' never), as :func:`ckqti.train.teacher.read_teacher` reads them;
    ``{}`` without a teacher."""
    if not config.teacher:
        return {}
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
