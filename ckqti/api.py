"""The Python API; every CLI command is a thin call into one function here."""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ckqti.errors import OptionError, QueryError, option_count
from retriever.batch_run import RunStats  # run's result, api.RunStats as before: a module without numpy

if TYPE_CHECKING:  # the return types, for type checkers only: the modules load when a function runs
    from ckqti.evaluate import EvalReport
    from ckqti.explain import Explanation
    from ckqti.train.ndrm_config import TrainResult
    from ckqti.train.reranker_config import RerankerTrainResult
    from indexer.format import Manifest
    from indexer.readers import Document
    from retriever.info import IndexInfo
    from retriever.rerank import RerankStats
    from retriever.results import SearchResult
    from retriever.runs import Ranking
    from retriever.search import Searcher


def check_flag(value, name: str) -> None:
    """A yes/no argument must be a ``bool``: ``verify="no"`` was truthy, and verified."""
    if not isinstance(value, bool):
        raise OptionError(f"{name} must be True or False, got {value!r}", (name,))


def check_docid(docid) -> None:
    """Docids are text: ``1686997`` found nothing where ``"1686997"`` would have, and said only that the document
    was not there."""
    if not isinstance(docid, str):
        raise OptionError(f"docid must be a string (docids are text, e.g. {str(docid)!r}), got {type(docid).__name__}",
                          ("docid",))


def check_paths(optional: tuple[str, ...] = (), **paths) -> None:
    """Each of ``paths`` (argument name -> value) is a ``str`` or ``os.PathLike`` (or None, for the
    names in ``optional``), else an :class:`OptionError` naming it: a bare ``TypeError`` from deep
    inside told a caller who passed None or a number nothing of which argument it was."""
    for name, value in paths.items():
        if not isinstance(value, (str, os.PathLike)) and not (value is None and name in optional):
            raise OptionError(f"{name} must be a path, got {type(value).__name__}", (name,))


def index(
    corpus: str | Path | Iterable[str | Mapping | Document] | Mapping[str, str | Mapping],
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
    ray_address: str | None = None,
    workers: int | None = None,
    neighbours: int | None = None,
) -> Manifest:
    """Build a learned impact index of ``corpus`` at ``out``; returns its manifest.

    ``corpus`` is a corpus file, or documents in memory: a list of texts (docids ``"0"``, ``"1"``,
    ...), of dicts with a JSONL corpus's fields (``{"id": ..., "text": ...}``; ``_id``, ``contents``,
    ``title`` too) or of :class:`indexer.readers.Document`, or a dict keyed by docid, ``{docid: text}`` or
    ``{docid: {"title": ..., "text": ...}}`` (:func:`indexer.readers.documents_in_memory`).

    ``ray_address`` builds on Ray (:mod:`indexer.distributed`): ``"local"`` starts a local
    Ray, ``"auto"`` or ``"HOST:PORT"`` joins a cluster; ``workers`` caps its actors.
    ``neighbours``: a latent model's candidate terms per document beyond its own (default
    :class:`indexer.impacts.ImpactConfig`'s; more = closer to exhaustive scoring, larger index,
    see docs/INDEX.md); a gated latent model stores exactly the pairs its gate opens instead."""
    from indexer.paths import check_build_paths, corpus_file, output_path

    if corpus_file(corpus) is None:
        from indexer.readers import documents_in_memory
        from indexer.readers.corpus import check_in_memory_options

        check_in_memory_options(corpus, fmt, orcas, ray_address)
        corpus = documents_in_memory(corpus)
    check_paths(("orcas",), out=out, orcas=orcas)  # corpus: a path, or documents read above
    shard_size, batch_size = option_count(shard_size, "shard_size"), option_count(batch_size, "batch_size")
    neighbours = None if neighbours is None else option_count(neighbours, "neighbours", 0)
    if workers is not None:
        if ray_address is None:
            raise OptionError("workers needs ray_address (the Ray build's model replicas)", ("workers", "ray_address"))
        workers = option_count(workers, "workers")
    if neighbours is None:  # else the model decides whether it is an option error, which comes first: after loading it
        check_build_paths(corpus_file(corpus), Path(orcas) if orcas else None, output_path(out), force, fmt)  # before torch

    from ckqti.models.loading import load_qti_model
    from indexer.build import build_index, model_build_config

    if ray_address is not None:  # the model here is the driver's: on its CPU when it has no GPU, the workers on theirs
        from indexer.distributed import driver_device

        factory, info = load_qti_model(model, driver_device(device))
    else:
        factory, info = load_qti_model(model, device)
    config = model_build_config(info, shard_size, batch_size, neighbours)
    if ray_address is not None:
        from indexer.distributed import build_index_ray

        return build_index_ray(corpus, out, model, info, config, fmt=fmt, orcas=orcas, force=force, resume=resume,
                               address=ray_address, num_workers=workers, device=device, progress=progress)
    return build_index(corpus, out, factory, info, config, fmt=fmt, orcas=orcas, force=force, resume=resume, progress=progress)


def append(
    corpus: str | Path | Iterable[str | Mapping | Document] | Mapping[str, str | Mapping],
    index_path: str | Path,
    model: str | None = None,
    fmt: str | None = None,
    orcas: str | Path | None = None,
    shard_size: int = 100_000,
    batch_size: int | None = None,
    device: str | None = None,
    progress: bool = True,
) -> Manifest:
    """Add the documents of ``corpus`` to an index as new shards (old shards are not rescored);
    ``model`` defaults to the one the index was built with. Returns the new manifest.

    ``corpus`` is a corpus file or documents in memory, as :func:`index` takes them; a text's docid
    is its position after the index's documents (``"600"`` for the first text appended to an index
    of 600), as if the list had been part of the one the index was built from."""
    from indexer.format import Manifest
    from indexer.paths import check_append_paths, corpus_file
    from indexer.readers.corpus import check_in_memory_options, entry_names

    in_memory = corpus_file(corpus) is None
    if in_memory:
        check_in_memory_options(corpus, fmt, orcas)
    check_paths(("orcas",), index_path=index_path, orcas=orcas, **({} if in_memory else {"corpus": corpus}))
    shard_size = option_count(shard_size, "shard_size")
    batch_size = None if batch_size is None else option_count(batch_size, "batch_size")
    check_append_paths(corpus_file(corpus), Path(orcas) if orcas else None, Path(index_path), fmt)  # before torch
    manifest = Manifest.read(index_path)
    names = entry_names(corpus)  # a docid's error names its key
    if in_memory:
        from indexer.readers import documents_in_memory

        corpus = documents_in_memory(corpus, start=manifest.num_docs)  # options checked above

    from ckqti.models.loading import load_qti_model
    from indexer.append import append_index
    from indexer.index_model import model_for_index

    factory, info = load_qti_model(model_for_index(index_path, model, manifest), device)
    return append_index(index_path, corpus, factory, info, shard_size, fmt=fmt, orcas=orcas, batch_size=batch_size,
                        progress=progress, names=names)


def compact(index_path: str | Path, shard_size: int = 100_000) -> Manifest:
    """Merge an index's consecutive shards into shards of up to ``shard_size`` documents; returns the new manifest."""
    from indexer.compact import compact_index

    check_paths(index_path=index_path)
    return compact_index(index_path, option_count(shard_size, "shard_size"))


def info(index_path: str | Path, verify: bool = False) -> IndexInfo:
    """What an index holds (:class:`retriever.info.IndexInfo`), from its manifest; ``verify`` also
    checks every file's checksum."""
    from retriever.info import index_info

    check_paths(index_path=index_path)
    check_flag(verify, "verify")
    return index_info(index_path, verify)


def open_searcher(index_path: str | Path, mode: str = "exact", budget: int = 200_000, model: str | None = None,
                  verify: bool = True, channel_weights: dict[str, float] | None = None, slack: float = 1.0,
                  engine: str = "numba") -> Searcher:
    """Open an index for search, to query it many times (``search``, ``search_many``, ``topk_many``).

    ``channel_weights`` re-weights its channels and ``engine`` chooses what searches (see
    :class:`retriever.search.Searcher`: ``"auto"`` for a process that searches a few queries and then
    ends, as ``ckqti search`` and ``ckqti run`` do); ``model`` refuses an index another model built;
    ``verify`` checks the files' checksums (skipped for files unchanged since a check that passed).

    Returns:
        A :class:`retriever.search.Searcher` holding the index memory-mapped until its ``close()``, or
        the end of ``with api.open_searcher(INDEX) as searcher:``; a search after that raises
        :class:`ckqti.errors.IndexClosedError`.

    Raises:
        IndexFormatError: no index at ``index_path``, a damaged one, or one another ``model`` built.
        QueryError: an unknown mode, engine or channel, or options that do not combine.
        OptionError: ``index_path`` is not a path, ``verify`` not a bool.
    """
    from retriever.index import Index
    from retriever.search import Searcher

    check_paths(index_path=index_path)
    check_flag(verify, "verify")
    idx = Index(index_path, verify=verify)
    try:
        if model is not None:
            from ckqti.models.specs import resolve_model
            from indexer.index_model import known_model_id

            spec = resolve_model(model)
            model_id = known_model_id(spec, idx.manifest)
            if model_id is None:  # another file than the index's checkpoint: its id is in its tensors
                from ckqti.models.checkpoint import load_for_indexing

                model_id = load_for_indexing(spec)[1]["id"]  # refuses a model that is not QTI, as before
            idx.check_compatible(model_id=model_id)
        return Searcher(idx, mode=mode, budget=budget, channel_weights=channel_weights, slack=slack, engine=engine,
                        close_index=True)
    except ValueError as e:
        idx.close()
        raise QueryError(str(e)) from None
    except BaseException:
        idx.close()
        raise


def kernels_ready(batch: bool = False) -> bool:
    """Whether this process holds the search kernel (``batch``: ``ckqti run``'s) compiled or loaded from
    Numba's cache (:func:`retriever.kernel_status.kernels_ready`); the first search after an install compiles it."""
    from retriever.kernel_status import kernels_ready as ready

    return ready(batch)


def kernels_compiling(batch: bool = False) -> bool:
    """Whether this process is compiling the search kernel (``batch``: ``ckqti run``'s) now, as the
    first search after an install does (:func:`retriever.kernel_status.kernels_compiling`)."""
    from retriever.kernel_status import kernels_compiling as compiling

    return compiling(batch)


def kernels_cached(batch: bool = False) -> bool:
    """Whether Numba keeps the search kernel (``batch``: ``ckqti run``'s) on disk for later processes; False
    where it can write no cache folder, so that each process compiles it (:func:`retriever.kernel_status.kernels_cached`)."""
    from retriever.kernel_status import kernels_cached as kept

    return kept(batch)


def search(query: str, index_path: str | Path, k: int = 10, mode: str = "exact", budget: int = 200_000,
           model: str | None = None, channel_weights: dict[str, float] | None = None,
           slack: float = 1.0) -> SearchResult:
    """Search an index for one query; returns a :class:`retriever.results.SearchResult`.

    Opens (and checksum-verifies) the index for this one query, which an exact search scans with numpy
    unless that would take longer than loading Numba's kernels (``engine="auto"``): to search many, open
    it once with :func:`open_searcher` and call its ``search`` or ``search_many``."""
    with open_searcher(index_path, mode, budget, model, channel_weights=channel_weights, slack=slack,
                       engine="auto") as searcher:  # its files unmapped as it returns, not when garbage-collected
        return searcher.search(query, k)


def run(
    index_path: str | Path,
    queries: str | Path | Mapping[str, str],
    out: str | Path,
    k: int = 1000,
    threads: int = 1,
    mode: str = "exact",
    budget: int = 200_000,
    fmt: str | None = None,
    tag: str = "ckqti",
    model: str | None = None,
    channel_weights: dict[str, float] | None = None,
    slack: float = 1.0,
) -> RunStats:
    """Search every query of a queries file, or of a dict ``qid -> text``, and write a TREC run; ``fmt`` is
    the queries file's format (``tsv``, ``jsonl``, ``trec``, ``smart``; None: detected), as ``ckqti run
    --queries-format``. Returns what was searched, skipped and written
    (:func:`retriever.batch_run.write_searched_run`'s :class:`~retriever.batch_run.RunStats`)."""
    from indexer.readers import read_queries, read_query_mapping
    from indexer.readers.queries import check_no_format_in_memory
    from retriever.batch_run import write_searched_run
    from retriever.runs import check_run_path

    in_memory = isinstance(queries, Mapping)
    check_no_format_in_memory(queries, fmt, "fmt")
    check_paths(index_path=index_path, out=out, **({} if in_memory else {"queries": queries}))
    check_run_path(out, tag, {"queries file": queries})
    # engine "auto": a run of a few queries, or over a small collection, is scanned with numpy in less
    # time than Numba takes to load (SciFact's 1,109 claims at k 1,000: session 42, docs/BENCH_SEARCH.md)
    searcher = open_searcher(index_path, mode, budget, model, channel_weights=channel_weights, slack=slack, engine="auto")
    qs = read_query_mapping(queries) if in_memory else read_queries(queries, fmt=fmt)
    with searcher:  # its helper threads stop with the run
        return write_searched_run(searcher, qs, out, k, threads, tag)


def evaluate(run_path: str | Path | Mapping[str, Ranking], qrels: str | Path | Mapping[str, Mapping[str, int]],
             per_query: bool = False, compare: str | Path | Mapping[str, Ranking] | Iterable[str | Path | Mapping[str, Ranking]]
             | None = None, qrels_format: str | None = None, rel_level: int = 1,
             measures: Iterable[str] | None = None) -> EvalReport:
    """Evaluate a run against qrels, and optionally test other runs, one or several, against it.

    Args:
        run_path: a TREC run file, or a run in memory: ``{qid: {docid: score}}`` or ``{qid: [(docid, score), ...]}``
            (``dict(zip(result.docids, result.scores))`` of each query's search result).
        qrels: a qrels file (TREC, BEIR TSV or Cranfield), or judgements in memory: ``{qid: {docid: grade}}``.
            Ids in memory are strings or integers, an integer read as its digits (``7`` and ``"7"`` are one id).
        per_query: list every query in the report's :meth:`~ckqti.evaluate.EvalReport.table` (the values are
            kept in ``by_query`` either way).
        compare: another run (a file or in memory), or a list of them, each tested against the first (paired
            t-test and Wilcoxon). In the report a file is named by its file name, a run in memory by its place:
            ``"run"``, ``"run 2"``, ...
        qrels_format: ``trec``, ``beir`` or ``cranfield`` for a qrels file; None: detected.
        rel_level: the grade from which binary measures (RR, AP, P, R) count a document relevant (TREC DL passages: 2).
        measures: names such as ``"nDCG@10"`` (see :func:`ckqti.measures.parse_measure`); None:
            :data:`ckqti.measures.DEFAULT_MEASURES`.

    Returns:
        An :class:`ckqti.evaluate.EvalReport`: ``.results[i].mean["nDCG@10"]``, ``.results[i].by_query``,
        ``.comparisons``, ``.table()``, ``.to_dict()``.

    Raises:
        OptionError: an argument of the wrong type or value (a run that is neither a path nor a dict, an unknown
            measure, ``rel_level`` below 1, ``qrels_format`` with qrels in memory).
        InputError: an unreadable or malformed run or qrels (a file's error names its line, one in memory its entry:
            ``run['3']``), a run given twice, or a run none of whose queries the qrels judge.
    """
    from ckqti.evaluate import check_run_source, checked_compare, evaluate_runs
    from ckqti.measures import checked_measures

    check_run_source(run_path, "run_path")
    if not isinstance(qrels, Mapping):
        check_paths(qrels=qrels)
    elif qrels_format is not None:
        raise OptionError("qrels_format is for a qrels file; qrels in memory are read as they are", ("qrels_format",))
    compare = checked_compare(compare)
    rel_level = option_count(rel_level, "rel_level")
    measures = checked_measures(measures)
    return evaluate_runs(run_path, qrels, measures=measures, per_query=per_query, compare=compare,
                         qrels_format=qrels_format, rel_level=rel_level)


def train(model: str, corpus: str | Path, queries: str | Path, qrels: str | Path, out: str | Path, *,
          dev_qrels: str | Path | None = None, fmt: str | None = None, qrels_format: str | None = None,
          queries_format: str | None = None, resume: bool = False, orcas: str | Path | None = None,
          **options) -> TrainResult | RerankerTrainResult:
    """Train ``model`` (``ndrm1``, ``ndrm2``, ``ndrm3``, ``tk``, ``tkl`` or ``idcm``) on judged
    queries with BM25 candidates; writes the best dev epoch's checkpoint to ``out``.

    ``options`` are :func:`ckqti.train.options.train_config`'s (``epochs``, ``lr``, ``loss``,
    ``negatives``, ``latent_gate``, ...), checked against the model before any work.
    ``dev_qrels`` is NDRM's (TK, TKL and IDCM carve dev from ``qrels``); ``resume`` continues an
    interrupted run of any model from its last finished epoch.
    ``fmt`` is the corpus format, ``queries_format`` the queries' (``tsv``, ``jsonl``, ``trec``, ``smart``;
    None: detected, as :func:`run`'s ``fmt``), ``qrels_format`` the judgements' (``trec``, ``beir``,
    ``cranfield``; None: detected, as ``evaluate`` does). ``orcas``: an ORCAS file whose clicked
    queries lead each document's text as :func:`index`'s ``orcas`` stores them (every model; BM25
    candidates search the plain corpus, as :func:`rerank`'s ``orcas``); a resumed NDRM run must
    have the same one.

    Returns:
        :class:`ckqti.train.TrainResult` (NDRM) or :class:`ckqti.train.reranker_config.RerankerTrainResult`.

    Raises:
        OptionError: an option the model does not take, or options that do not combine.
    """
    from ckqti.train.options import RERANKER_MODELS, train_config
    from indexer.readers.formats import check_text_starts

    check_paths(("dev_qrels", "orcas"), corpus=corpus, queries=queries, qrels=qrels, out=out, dev_qrels=dev_qrels,
                orcas=orcas)
    check_keywords(train_config, options, passed=("resume", "dev_qrels"))
    check_text_starts(corpus, queries, qrels, dev_qrels, orcas)  # before torch, which train_config's TrainConfig imports
    config = train_config(model, resume=resume, dev_qrels=dev_qrels, **options)
    from ckqti.models.checkpoint import check_checkpoint_path  # torch: train_config's TrainConfig imported it

    check_checkpoint_path(out, {"corpus": corpus, "queries file": queries, "qrels file": qrels, "dev qrels file": dev_qrels,
                                "embeddings checkpoint": options.get("embeddings"), "teacher file": options.get("teacher"),
                                "ORCAS file": orcas})
    if model in RERANKER_MODELS:
        from ckqti.train import rerankers

        return rerankers.train_reranker(model, corpus, queries, qrels, out, config, fmt=fmt, qrels_format=qrels_format,
                                        queries_format=queries_format, orcas=orcas, resume=resume)
    import ckqti.train

    return ckqti.train.train(corpus, queries, qrels, out, config, dev_qrels=dev_qrels, fmt=fmt, qrels_format=qrels_format,
                             queries_format=queries_format, resume=resume, orcas=orcas)


def check_keywords(fn, options: dict, passed: tuple[str, ...] = ()) -> None:
    """``options`` must be keyword-only arguments of ``fn`` other than those the caller ``passed``
    itself (an :class:`OptionError` naming the others and listing those it takes)."""
    takes = [name for name, p in inspect.signature(fn).parameters.items() if p.kind is p.KEYWORD_ONLY
             and name not in passed]
    unknown = sorted(set(options) - set(takes))
    if unknown:
        raise OptionError(f"unknown option(s) {', '.join(unknown)}; the options are {', '.join(sorted(takes))}")


def rerank(queries: str | Path | Mapping[str, str], candidates: str | Path | Mapping[str, Sequence[str] | Mapping[str, float]],
           model: str | Path, out: str | Path | None, depth: int = 100,
           corpus: str | Path | Mapping | Iterable[str | Mapping | Document] | None = None, **options) -> RerankStats:
    """Rerank every query's top ``depth`` candidates with a model of any kind and write a TREC run;
    ``options`` as :func:`retriever.rerank.rerank`'s.

    Args:
        queries: a queries file, or a dict ``qid -> text``, as :func:`run` takes them.
        candidates: ``"bm25"`` (of a corpus file), an index directory, a TREC run file, or a first stage's
            candidates in memory: ``{qid: [docid, ...]}`` in rank order or ``{qid: {docid: score}}`` (ranked as
            a run file's lines are: score descending as trec_eval holds it, ties by docid descending), checked as a
            run file is and cut to ``depth`` the same way (:func:`retriever.memory_candidates.memory_candidates`);
            ids are strings or integers (read as their digits, as the corpus's and the queries' keys are).
        model: a model name or checkpoint.
        out: the run file; None returns the rankings instead, as :attr:`retriever.rerank.RerankStats.rankings`
            (``{qid: [(docid, score), ...]}`` in the run's order), held for every query until the call returns:
            about 95 bytes a candidate beyond the docids (2,000,000 candidates, 190 MB), where a run file is
            written a window of queries at a time.
        depth: candidates reranked per query.
        corpus: the documents' text (needed for a run's, a dict's or BM25's candidates; else an index's stored
            text): a corpus file, or documents in memory as :func:`index` takes them (a list of texts, dicts
            or :class:`indexer.readers.Document`) or a dict ``{docid: text}`` (or ``{docid: {"title": ...,
            "text": ...}}``, as BEIR's loader holds a corpus); the same documents in a file or in memory
            give the same run. BM25 indexes a file.

    Raises:
        OptionError: an argument of the wrong type, an unknown option, ``fmt`` or ``orcas`` with documents in
            memory, ``queries_format`` with queries in memory, BM25 candidates of them.
        InputError: unreadable or malformed inputs (an entry in memory named: ``candidates['q1']``,
            ``corpus['d7']``, ``documents[3]``), candidates without text.
    """
    from indexer.readers import read_query_mapping
    from indexer.readers.formats import check_text_starts

    in_memory = isinstance(queries, Mapping)
    candidates_in_memory = isinstance(candidates, Mapping)
    memory_corpus = corpus is not None and not isinstance(corpus, (str, os.PathLike))
    if not candidates_in_memory and not isinstance(candidates, (str, os.PathLike)):
        raise OptionError(f"candidates must be 'bm25' or a path, got {type(candidates).__name__} (or candidates in "
                          "memory: a dict qid -> [docid, ...] or qid -> {docid: score})", ("candidates",))
    check_paths(("corpus", "out"), out=out, **({} if memory_corpus else {"corpus": corpus}),
                **({} if in_memory else {"queries": queries}))
    if memory_corpus and not isinstance(corpus, Iterable):
        raise OptionError(f"corpus must be a path, got {type(corpus).__name__} (or documents in memory: a dict "
                          "docid -> text, or a list of texts, dicts or Documents)", ("corpus",))
    if in_memory:
        queries = read_query_mapping(queries)  # checked before the model loads, as a file's encoding is below
    check_text_starts(queries, corpus, options.get("orcas"),  # before torch, which retriever.rerank imports
                      None if candidates_in_memory or str(candidates) == "bm25" else candidates)  # a run file (an index is a folder)

    from retriever.rerank import rerank as rerank_run

    check_keywords(rerank_run, options)
    depth = option_count(depth, "depth")
    check_counts(options, "batch_size", "max_doc_length")
    return rerank_run(queries, candidates, model, out, depth, corpus, **options)


def check_counts(options: dict, *names: str) -> None:
    """The count options among ``names`` that were passed (None: the default) must be integers >= 1,
    as the CLI's flags check them."""
    for name in names:
        if options.get(name) is not None:
            options[name] = option_count(options[name], name)


def explain(query: str, docid: str, model: str | Path | None, corpus: str | Path | None = None,
            index_path: str | Path | None = None, html_out: str | Path | None = None, **options) -> Explanation:
    """Why ``model`` scores ``docid`` (from ``corpus`` or ``index_path``) as it does for ``query``;
    ``options`` as :func:`ckqti.explain.explain`'s. ``model`` None: the model the index was built with."""
    from indexer.readers.formats import check_text_starts

    check_paths(("corpus", "index_path", "html_out"), corpus=corpus, index_path=index_path, html_out=html_out)
    check_text_starts(corpus, options.get("orcas"))  # before torch, which ckqti.explain imports

    from ckqti.explain import explain as explain_score

    check_docid(docid)
    check_keywords(explain_score, options)
    check_counts(options, "max_doc_length")
    if (corpus is None) == (index_path is None):
        raise OptionError("give exactly one of corpus or index_path: where to read the document from",
                          ("corpus", "index_path"))
    if model is None and index_path is None:
        raise OptionError("model is needed with a corpus (with an index, the index's model is the default)", ("model",))
    from ckqti.models.specs import resolve_model
    from indexer.index_model import model_for_index

    # a model named is resolved before the corpus is read: one not there, by name or path, is said first
    model = model_for_index(index_path, None if model is None else resolve_model(model))
    return explain_score(query, docid, model, corpus, index_path, html_out, **options)


def serve(
    index_path: str | Path,
    host: str = "127.0.0.1",
    port: int = 8000,
    api_key: str | None = None,
    mode: str = "exact",
    budget: int = 200_000,
    model: str | None = None,
    workers: int | None = None,
    max_k: int = 1000,
    access_log: bool = False,
    on_ready=None,
    slack: float = 1.0,
    channel_weights: dict[str, float] | None = None,
) -> None:
    """Serve the HTTP search API (:mod:`retriever.service`) over one index until interrupted.

    Binds ``host:port`` first (port 0: a free one), then calls ``on_ready(url)``; see docs/SERVE.md.
    ``channel_weights`` re-weights the index's channels in every search, as :func:`open_searcher`'s.
    """
    from retriever.service import checked_server_options
    from retriever.service import serve as serve_searcher

    max_k, workers = checked_server_options(port, api_key, max_k, workers)
    searcher = open_searcher(index_path, mode, budget, model, channel_weights=channel_weights, slack=slack)
    serve_searcher(searcher, host, port, api_key, max_k, workers, access_log, on_ready)
