"""A query set searched into a TREC run (``ckqti run``, :func:`ckqti.api.run`): a chunk of queries
at a time, each chunk written as it comes, with what was searched, skipped and retrieved counted
in :class:`RunStats`.

Imports nothing heavy at module level (:mod:`ckqti.api` names :class:`RunStats` without loading
numpy); the run writer is imported when a run is written.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ckqti.errors import QueryError

if TYPE_CHECKING:
    from retriever.search import Searcher

RUN_CHUNK = 4096  # queries ckqti run searches at a time (one search_many call) before writing them


@dataclass
class RunStats:
    queries: int
    searched: int
    skipped: list[str] = field(default_factory=list)
    oov_terms: int = 0
    seconds: float = 0.0
    documents: int = 0  # lines written: retrieved documents over all queries
    reasons: dict[str, str] = field(default_factory=dict)  # skipped query -> why it could not be searched
    empty: dict[str, str] = field(default_factory=dict)  # searched query that retrieved nothing -> why

    @property
    def qps(self) -> float:
        return self.searched / self.seconds if self.seconds > 0 else float("inf")


def write_searched_run(searcher: Searcher, qs: Mapping[str, str], out: str | Path, k: int, threads: int,
                       tag: str) -> RunStats:
    """Search every query of ``qs`` (qid -> text) with ``searcher`` and write the rankings to the TREC run
    ``out``, :data:`RUN_CHUNK` queries at a time; a query that cannot be searched is skipped (its reason in
    :attr:`RunStats.reasons`), one that retrieves nothing is counted, with why, in :attr:`RunStats.empty`."""
    from retriever.run_writer import write_ranked_run  # numpy and pyarrow: loaded when a run is written

    stats = RunStats(queries=len(qs), searched=0)

    def rankings():
        """Each query's ranking, searched a chunk of queries at a time and written as it comes: the
        run is never held whole (100,000 queries at k = 1,000 would be ~37 GB of hits)."""
        qids = list(qs)
        for lo in range(0, len(qids), RUN_CHUNK):
            chunk = qids[lo:lo + RUN_CHUNK]
            t0 = time.perf_counter()
            found = searcher.topk_columns([qs[q] for q in chunk], k, threads=threads)
            stats.seconds += time.perf_counter() - t0
            for qid, res in zip(chunk, found):
                if isinstance(res, QueryError):
                    stats.skipped.append(qid)
                    stats.reasons[qid] = res.message
                    continue
                stats.searched += 1
                stats.oov_terms += len(res.oov)
                stats.documents += len(res.docids)
                if not len(res.docids):  # no line in the run: say why, as search does
                    stats.empty[qid] = res.why_empty()
                    continue
                yield qid, res.docids, res.scores

    write_ranked_run(out, rankings(), tag)
    return stats
