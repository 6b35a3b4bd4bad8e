"""What the index costs in effectiveness: its top-k against exhaustive float scoring.

The reference is the same model scoring every document of the corpus for every query
in float precision (under QTI: the sum over query terms of ``s(t, d)``, every pair,
no pruning, no quantization). The index's run differs by quantization, by the pairs it
does not store, and (latent models) by clipping scores under the per-term offset.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import torch

from ckqti.progress import progress_bar
from indexer.analyze import analyze_corpus
from indexer.impacts import length_batches, model_device, pad_batch


@dataclass
class FidelityReport:
    queries: int
    overlap_at_k: float
    k: int
    ndcg10_index: float
    ndcg10_exhaustive: float
    resolution: int = 0  # the searcher's query weight resolution

    @property
    def delta_ndcg10(self) -> float:
        return self.ndcg10_index - self.ndcg10_exhaustive


@torch.no_grad()
def exhaustive_term_scores(model, documents: list[np.ndarray], terms: np.ndarray, batch_size: int = 32, max_len: int = 4000, progress: bool = False) -> np.ndarray:
    """Float ``s(t, d)`` for every document and every term of ``terms``: ``[N, T]``."""
    dev = model_device(model)
    t = torch.from_numpy(terms.astype(np.int64)).to(dev)
    out = np.zeros((len(documents), len(terms)), dtype=np.float32)
    batches = list(length_batches([min(len(d), max_len) for d in documents], batch_size))
    for batch in progress_bar(batches, show=progress, desc="exhaustive"):
        ids, lengths = pad_batch([documents[j] for j in batch], max_len, dev)
        out[batch] = model.score_encoded(t, model.encode_documents(ids, lengths)).float().cpu().numpy()
    return out


@dataclass
class ExhaustiveReference:
    """The queries, judgements and the exhaustive float run (top ``k``) that index runs are compared with."""

    queries: dict[str, str]
    qrels: dict
    run: dict[str, dict[str, float]]
    ndcg10: float
    k: int


def exhaustive_reference(searcher, corpus_path, model_spec, queries_path, qrels_path, k: int = 100, fmt=None,
                         progress=False) -> ExhaustiveReference:
    """Score every document for every judged query with the model in float precision."""
    from ckqti.evaluate import evaluate
    from ckqti.models.loading import load_qti_model
    from indexer.readers import read_qrels, read_queries

    corpus = analyze_corpus(corpus_path, searcher.index.analyzer, fmt=fmt)
    if corpus.vocab.terms != searcher.index.terms:
        raise ValueError(f"{corpus_path} is not the corpus {searcher.index.path} was built from")
    factory, _ = load_qti_model(model_spec)
    model = factory(corpus.vocab)
    qrels = read_qrels(qrels_path)
    queries = {q: t for q, t in read_queries(queries_path).items() if q in qrels}
    parsed = {q: searcher.parse(t) for q, t in queries.items()}
    vocab_terms = np.unique(np.concatenate([p.terms for p in parsed.values()] + [np.zeros(0, np.int64)]))
    col = {t: i for i, t in enumerate(vocab_terms)}
    matrix = exhaustive_term_scores(model, corpus.token_lists(0, len(corpus)), vocab_terms, progress=progress)
    run = top_k_run(matrix, col, {q: (p.terms, p.weights) for q, p in parsed.items()}, corpus.docs["docid"], k)
    return ExhaustiveReference(queries, qrels, run, float(evaluate(run, qrels).mean["nDCG@10"]), k)


def top_k_run(matrix: np.ndarray, col: Mapping[int, int], queries: Mapping[str, tuple], docids, k: int):
    """Top-``k`` run ``{qid: {docid: score}}`` from per-term document scores.

    Shape:
        matrix: [N, T] float s(t, d); ``col`` maps a term id to its column; ``queries`` maps a
        query id to ``(term ids, weights)``; ``docids``: [N].
    """
    run = {}
    for q, (terms, weights) in queries.items():
        scores = matrix[:, [col[int(t)] for t in terms]] @ np.asarray(weights, dtype=np.float32)
        top = np.argsort(-scores, kind="stable")[:k]
        run[q] = {docids[i]: float(scores[i]) for i in top}
    return run


def overlap_at_k(found: Iterable[str], reference: Iterable[str], k: int) -> float | None:
    """The share of ``reference``'s top ``k`` (docids, best first) that ``found``'s top ``k`` holds.

    Divided by ``min(k, len(reference))``, not ``k``: a collection of fewer than ``k`` documents, or a
    reference ranking cut short, is matched in full at 1. ``None`` when the reference ranks nothing.
    """
    top = list(itertools.islice(reference, k))
    if not top:
        return None
    return len(set(itertools.islice(found, k)) & set(top)) / len(top)


def mean_overlap_at_k(found: Mapping[str, Iterable[str]], reference: Mapping[str, Iterable[str]], k: int) -> float:
    """Mean :func:`overlap_at_k` over the queries of ``found``, leaving out those the reference ranks
    nothing for (``nan`` when that is all of them)."""
    overlaps = [o for q, docs in found.items() if (o := overlap_at_k(docs, reference[q], k)) is not None]
    return float(np.mean(overlaps)) if overlaps else float("nan")


def index_report(searcher, ref: ExhaustiveReference) -> FidelityReport:
    """Overlap@k and nDCG@10 of ``searcher``'s run against the exhaustive one."""
    from ckqti.evaluate import evaluate

    run = {q: {h.docid: h.score for h in searcher.search(text, ref.k).hits} for q, text in ref.queries.items()}
    nd = evaluate(run, ref.qrels).mean["nDCG@10"]
    return FidelityReport(len(ref.queries), mean_overlap_at_k(run, ref.run, ref.k), ref.k, float(nd), ref.ndcg10,
                          searcher.resolution)


def measure_fidelity(index_path, corpus_path, model_spec, queries_path, qrels_path, k: int = 100, fmt=None, progress=False,
                     resolution: int | None = None) -> FidelityReport:
    """Overlap@k and nDCG@10 of the index's run against exhaustive scoring by the same model
    (``resolution``: the searcher's query weight resolution, default :data:`retriever.query.RESOLUTION`)."""
    return resolution_sweep(index_path, corpus_path, model_spec, queries_path, qrels_path, [resolution], k, fmt, progress)[0]


def resolution_sweep(index_path, corpus_path, model_spec, queries_path, qrels_path, resolutions, k: int = 100, fmt=None,
                     progress=False) -> list[FidelityReport]:
    """:func:`measure_fidelity` for several query weight resolutions, scoring exhaustively once."""
    from retriever.index import Index
    from retriever.query import RESOLUTION
    from retriever.search import Searcher

    index = Index(index_path)
    searchers = [Searcher(index, resolution=r or RESOLUTION) for r in resolutions]
    ref = exhaustive_reference(searchers[0], corpus_path, model_spec, queries_path, qrels_path, k, fmt, progress)
    return [index_report(s, ref) for s in searchers]
