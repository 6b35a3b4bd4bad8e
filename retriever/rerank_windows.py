"""Queries reranked a window at a time: what scoring holds is bounded by the window, not the query set."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from retriever.rerank_scoring import rerank_candidates

if TYPE_CHECKING:
    from ckqti.models.reranker import Reranker

# Candidates scored at once (:func:`rerank_windows`): a document ranked by queries of two windows is encoded
# in each. SciFact's 1,109 claims x BM25's top 100 fit one; MS MARCO dev's 6,980 x 1,000, 35 windows of 200 queries.
WINDOW_PAIRS = 200_000


@dataclass
class Tally:
    """What :func:`rerank_windows` has scored so far: the queries ranked, pairs, and seconds of scoring."""

    reranked: set[str] = field(default_factory=set)
    pairs: int = 0
    seconds: float = 0.0


def query_windows(queries: Iterable[str], candidates: Mapping[str, Sequence[str]], pairs: int) -> Iterator[list[str]]:
    """The queries with candidates, in order, in windows of at least ``pairs`` candidates (the last: the rest)."""
    window: list[str] = []
    size = 0
    for qid in queries:
        if docs := candidates.get(qid):
            window.append(qid)
            size += len(docs)
            if size >= pairs:
                yield window
                window, size = [], 0
    if window:
        yield window


def rerank_windows(
    reranker: Reranker, queries: Mapping[str, str], candidates: Mapping[str, Sequence[str]], texts: Mapping[str, str],
    batch_size: int = 32, progress: bool = False, skipped: dict[str, str] | None = None,
    pairs: int | None = None, tally: Tally | None = None,
) -> Iterator[tuple[str, list[tuple[str, float]]]]:
    """:func:`retriever.rerank_scoring.rerank_candidates`' ``(qid, ranking)`` pairs in query order, a window of queries
    of about ``pairs`` candidates (default :data:`WINDOW_PAIRS`) at a time: a window is scored when the one before it
    has been consumed (:func:`retriever.run_writer.write_run` writes as it goes), so memory is bounded by the window.
    Within a window each distinct document is encoded once; ``tally`` counts what was scored."""
    tally = Tally() if tally is None else tally
    for window in query_windows(queries, candidates, WINDOW_PAIRS if pairs is None else pairs):
        started = time.perf_counter()
        ranked = rerank_candidates(reranker, {q: queries[q] for q in window}, {q: candidates[q] for q in window},
                                   texts, batch_size, progress, skipped)
        tally.seconds += time.perf_counter() - started
        tally.reranked.update(ranked)
        tally.pairs += sum(map(len, ranked.values()))
        yield from ranked.items()
        del ranked
