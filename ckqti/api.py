"""The Python API; every CLI command is a thin call into one function here."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ckqti.errors import QueryError


def index(
    corpus: str | Path,
    out: str | Path,
    model: str | None = None,
    fmt: str | None = None,
    orcas: str | Path | None = None,
    shard_size: int = 100_000,
    batch_size: int = 32,
    force: bool = False,
    resume: bool = True,
    device: str | None = None,
    progress: bool = True,
):
    """Build a learned impact index of ``corpus`` at ``out``; returns its manifest."""
    from ckqti.models.loading import load_qti_model
    from indexer.build import BuildConfig, build_index
    from indexer.impacts import ImpactConfig

    factory, info = load_qti_model(model, device)
    config = BuildConfig(shard_size=shard_size, impacts=ImpactConfig(batch_size=batch_size))
    return build_index(corpus, out, factory, info, config, fmt=fmt, orcas=orcas, force=force, resume=resume, progress=progress)


def open_searcher(index_path: str | Path, mode: str = "exact", budget: int = 200_000, model: str | None = None, verify: bool = True):
    from retriever.index import Index
    from retriever.search import Searcher

    idx = Index(index_path, verify=verify)
    if model is not None:
        from ckqti.models.loading import load_qti_model

        idx.check_compatible(model_id=load_qti_model(model)[1]["id"])
    return Searcher(idx, mode=mode, budget=budget)


def search(query: str, index_path: str | Path, k: int = 10, mode: str = "exact", budget: int = 200_000, model: str | None = None):
    """Search an index for one query; returns a :class:`retriever.search.SearchResult`."""
    return open_searcher(index_path, mode, budget, model).search(query, k)


@dataclass
class RunStats:
    queries: int
    searched: int
    skipped: list[str] = field(default_factory=list)
    oov_terms: int = 0
    seconds: float = 0.0

    @property
    def qps(self) -> float:
        return self.searched / self.seconds if self.seconds > 0 else float("inf")


def run(
    index_path: str | Path,
    queries: str | Path,
    out: str | Path,
    k: int = 1000,
    threads: int = 1,
    mode: str = "exact",
    budget: int = 200_000,
    fmt: str | None = None,
    tag: str = "ckqti",
    model: str | None = None,
) -> RunStats:
    """Search every query of a queries file and write a TREC run."""
    from indexer.readers import read_queries
    from retriever.runs import write_run

    searcher = open_searcher(index_path, mode, budget, model)
    qs = read_queries(queries, fmt=fmt)
    stats = RunStats(queries=len(qs), searched=0)

    def one(item):
        qid, text = item
        try:
            return qid, searcher.search(text, k)
        except QueryError:
            return qid, None

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        results = list(pool.map(one, qs.items()))
    stats.seconds = time.perf_counter() - t0
    run_results = {}
    for qid, res in results:
        if res is None:
            stats.skipped.append(qid)
            continue
        stats.searched += 1
        stats.oov_terms += len(res.oov)
        run_results[qid] = [(h.docid, h.score) for h in res.hits]
    write_run(out, run_results, tag)
    return stats


def evaluate(run_path: str | Path, qrels: str | Path, per_query: bool = False, compare: str | Path | None = None, qrels_format: str | None = None):
    """Evaluate a TREC run against qrels (and optionally test it against a second run)."""
    from ckqti.evaluate import evaluate_files

    return evaluate_files(run_path, qrels, per_query=per_query, compare=compare, qrels_format=qrels_format)
