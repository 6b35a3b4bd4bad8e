"""Reranking first-stage candidates with any ranking model: TK, TKL, IDCM and NDRM1-3 alike.

Candidates come from one of four places:

* ``"bm25"``: Pyserini BM25 over the corpus file (Java runs in a child process; its Lucene
  index is built once in the work folder);
* a ckqti index directory: the learned index's own top ``depth`` (:class:`retriever.search.Searcher`);
* a TREC run file: its top ``depth`` per query (trec_eval order);
* a dict in memory (the Python API): ``{qid: [docid, ...]}`` in rank order, or ``{qid: {docid: score}}``
  ranked as a run file's lines are (:func:`retriever.memory_candidates.memory_candidates`).

Candidate text comes from the corpus when one is given, a file or documents in memory
(``Document.full_text()``: title and text, as in training; with an ORCAS file its clicked queries first,
URL next, as ``ckqti index --orcas`` reads them), else from the index's document store (every field the
index read, joined the same way). Each document is tokenized once however many queries rank
it within a window of queries. A query's candidates are scored by the model and written in the model's order
(a TREC run whose documents per query are exactly the candidates, sorted by model score, ties by docid as
trec_eval breaks them).

Queries are scored a window at a time, in their order (:data:`retriever.rerank_windows.WINDOW_PAIRS` candidates
a window, :func:`retriever.rerank_windows.rerank_windows`), and each window's rankings are written before the next is
scored: what scoring holds (documents' token ids, NDRM's term tables, TK's pair scores, the rankings) is bounded by the
window, not the query set. What a rerank holds for all queries is their candidates (4 bytes each,
:class:`retriever.candidates.CandidateLists`) and the candidates' text; a candidates run grouped by query is read a
query at a time (one whose query's lines come back after another's is read whole: docs/SCALE.md).

This module is the entry point (:func:`rerank`, :class:`RerankStats`); its parts: the candidates gathered and checked
(:mod:`retriever.candidates`, a dict's in :mod:`retriever.memory_candidates`), their text
(:mod:`retriever.candidate_text`), the model (:mod:`retriever.rerank_model`), and their scoring
(:mod:`retriever.rerank_scoring`, a window of queries at a time by :mod:`retriever.rerank_windows`).
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ckqti.errors import InputError, OptionError
from retriever.candidate_text import CorpusSource, checked_corpus, corpus_clicks, corpus_texts
from retriever.candidates import check_candidates, gather_candidates, is_bm25, is_path, no_candidates_error
from retriever.index import Index
from retriever.memory_candidates import memory_candidates, no_memory_candidates_error
from retriever.rerank_model import open_reranker
from retriever.rerank_windows import Tally, rerank_windows

if TYPE_CHECKING:
    from ckqti.models.reranker import Reranker
    from indexer.readers.corpus import Clicks, Document

WORD_SAMPLE = 500  # candidate documents whose words are counted for RerankStats.unknown_words


@dataclass(frozen=True)
class RerankStats:
    """What :func:`rerank` did.

    Attributes:
        queries: queries read; reranked: queries with at least one candidate.
        skipped: ids of queries without candidates (no searchable term, or none retrieved).
        reasons: why each skipped query was skipped.
        pairs: (query, document) pairs scored.
        seconds: scoring time (candidate retrieval and reading text excluded).
        model_id, kind: the model's checkpoint id and kind.
        candidates: where the candidates came from: ``bm25``, ``index:PATH``, ``run:PATH`` or ``dict`` (in memory).
        out: the run file written; None when the rankings were returned in memory instead.
        unknown_words: the share of the candidates' words (a sample of up to :data:`WORD_SAMPLE`
            documents) that a TK, TKL or NDRM model read as unknown: trained on another
            collection and not adapted to this one (``adapt_vocabulary``); None for IDCM.
        repeated_clicks: lines of the ORCAS file dropped as a query their document already held.
        rankings: with ``out=None``, every reranked query's ranking, ``qid -> [(docid, score), ...]`` in the
            order a run file lists them (:func:`retriever.runs.trec_order`), queries in their order; else None.
    """

    queries: int
    reranked: int
    skipped: tuple[str, ...]
    pairs: int
    seconds: float
    model_id: str
    kind: str
    candidates: str
    out: Path | None
    reasons: dict[str, str] = field(default_factory=dict)
    unknown_words: float | None = None  # share of the candidates' words the model read as unknown (TK, TKL, NDRM)
    repeated_clicks: int = 0
    rankings: dict[str, list[tuple[str, float]]] | None = field(default=None, repr=False, compare=False)

    @property
    def ms_per_query(self) -> float:
        return 1000.0 * self.seconds / self.reranked if self.reranked else 0.0


def rerank(
    queries: str | Path | Mapping[str, str],
    candidates: str | Path | Mapping,
    model_path: str | Path,
    out: str | Path | None,
    depth: int = 100,
    corpus: CorpusSource | None = None,
    *,
    fmt: str | None = None,
    queries_format: str | None = None,
    batch_size: int = 32,
    device: str | None = None,
    tag: str | None = None,
    work_dir: str | Path | None = None,
    max_doc_length: int | None = None,
    adapt_vocabulary: bool = False,
    orcas: str | Path | None = None,
    progress: bool = False,
) -> RerankStats:
    """Rerank every query's top ``depth`` candidates with a model and write a TREC run (or return the rankings).

    Args:
        queries: queries file (TSV, JSONL, TREC or SMART), or a dict ``qid -> text``
            (:func:`indexer.readers.read_query_mapping`).
        candidates: ``"bm25"`` (needs a corpus file), an index directory, a TREC run file (needs
            ``corpus``), or a dict in memory (needs ``corpus``): ``{qid: [docid, ...]}`` in rank order or
            ``{qid: {docid: score}}``, checked and cut to ``depth`` as a run file is
            (:func:`retriever.memory_candidates.memory_candidates`).
        model_path: a checkpoint of any kind (TK, TKL, IDCM, NDRM1-3).
        out: run file to write; None returns the rankings in :attr:`RerankStats.rankings` instead (held for every
            query until the call returns; a run file is written a window of queries at a time).
        depth: candidates reranked per query.
        corpus: corpus file for BM25 and for document text (else the index's stored text), or the documents in
            memory, as :func:`ckqti.api.index` takes them (:func:`indexer.readers.documents_in_memory`): the same text as a file of
            the same fields.
        fmt: corpus format (None: from the file).
        queries_format: the queries file's format, ``tsv``, ``jsonl``, ``trec`` or ``smart`` (None: from the file,
            as :func:`indexer.readers.read_queries` tells it).
        batch_size: documents scored at once.
        device: torch device (default CUDA when available).
        tag: run tag (default ``ckqti-<kind>``).
        work_dir: where the BM25 index is kept (default ``<out>.work``; with ``out`` None, a temporary folder).
        max_doc_length: read this many document tokens instead of the model's trained cap.
        adapt_vocabulary: read text with the collection's own vocabulary (TK, TKL, NDRM: zero-shot
            use on another collection; see :func:`ckqti.models.reranker.adapt_reranker`): the
            corpus's, else the candidate index's (its terms as the index read them, ORCAS clicks too).
            Without it, an NDRM model reranking an index's candidates with no ``corpus`` reads the
            index's vocabulary and build constants all the same, as ``explain --index`` does: it
            scores as the index does (it read only its training words, and on a new collection
            ranked the index's own top 100 below the index's order).
        orcas: an ORCAS file (``docid<TAB>query``, see :func:`indexer.readers.load_orcas`) whose
            clicked queries lead each document's corpus text, as ``ckqti index --orcas`` indexes
            them (the collection's statistics count them too). Needs a corpus file: an index's stored
            text holds its own clicks, or none. BM25 candidates still come from the plain corpus.
        progress: show a progress bar.

    Raises:
        InputError: unreadable inputs (a dict's error names its entry: ``candidates['q1']``), missing corpus,
            candidates without text.
        OptionError: ``fmt`` or ``orcas`` with documents in memory, ``queries_format`` with queries in memory, BM25
            candidates of them, ``tag`` without a run.
        CkqtiError: an unreadable checkpoint.
    """
    if out is None and work_dir is None and is_bm25(candidates):  # no run file to keep BM25's index beside
        with tempfile.TemporaryDirectory(prefix="ckqti-bm25-") as work:
            return rerank(queries, candidates, model_path, out, depth, corpus, fmt=fmt, queries_format=queries_format,
                          batch_size=batch_size,
                          device=device, tag=tag, work_dir=work, max_doc_length=max_doc_length,
                          adapt_vocabulary=adapt_vocabulary, orcas=orcas, progress=progress)
    from ckqti.files import check_folder_of
    from ckqti.models.specs import resolve_model
    from indexer.readers import read_queries, read_query_mapping
    from indexer.readers.queries import check_no_format_in_memory
    from retriever.runs import check_run_path

    check_no_format_in_memory(queries, queries_format, "queries_format")
    if out is not None:
        check_run_path(out, tag, {"queries file": queries, "corpus": corpus, "ORCAS file": orcas,
                                  "candidates run": None if is_bm25(candidates) else candidates})
    elif tag is not None:
        raise OptionError("tag is for a run file; rankings returned in memory (out None) have none", ("tag",))
    model_path = resolve_model(model_path)  # before any work: a model that is not there, by name or path
    if depth < 1:
        raise InputError(f"depth must be at least 1, got {depth}")
    corpus = checked_corpus(corpus, fmt, orcas)
    check_candidates(candidates, corpus)
    work = Path(work_dir) if work_dir is not None else None if out is None else Path(out).with_name(Path(out).name + ".work")
    if is_bm25(candidates):
        check_folder_of(work / "bm25", "BM25's Lucene index")
    clicks = corpus_clicks(orcas, corpus)  # before the candidates are gathered: a bad line is said at once
    where_queries = "queries" if isinstance(queries, Mapping) else queries
    queries = read_query_mapping(queries) if isinstance(queries, Mapping) else read_queries(queries, queries_format)
    candidates, gathered = early_candidates(candidates, queries, depth, corpus, fmt, work, where_queries)
    reranker = reranker_for(model_path, candidates, corpus, device, max_doc_length, fmt, adapt_vocabulary, clicks)
    cands, texts, where, refused = gathered or gather_candidates(candidates, queries, depth, corpus, fmt, work)
    if not any(cands.values()):
        raise no_candidates_error(where, queries, where_queries, refused)
    if texts is None:
        texts = corpus_texts(corpus, fmt, set(cands.docids), clicks)
        if not all(map(texts.__contains__, cands.docids)):  # the first missing in the queries' order is named
            q, d = next((q, d) for q, docs in cands.items() for d in docs if d not in texts)
            raise InputError(f"candidate document {d!r} of query {q!r} ({where}) is not in the corpus",
                             corpus if is_path(corpus) else "corpus")
    unknown = unknown_share(reranker, [texts[d] for d in itertools.islice(distinct(cands.values()), WORD_SAMPLE)])
    unread: dict[str, str] = {}
    tally = Tally()  # each window's rankings written before the next is scored
    ranked = rerank_windows(reranker, queries, cands, texts, batch_size, progress, unread, tally=tally)
    held = write_or_hold(out, ranked, f"ckqti-{reranker.kind}" if tag is None else tag)
    skipped = tuple(q for q in queries if q not in tally.reranked)
    reasons = {q: refused.get(q) or unread.get(q) or f"no candidates from {where}" for q in skipped}
    return RerankStats(len(queries), len(tally.reranked), skipped, tally.pairs, tally.seconds, reranker.model_id,
                       reranker.kind, where, None if out is None else Path(out), reasons, unknown,
                       clicks.repeated if clicks else 0, held)


def early_candidates(candidates: str | Path | Mapping, queries: Mapping[str, str], depth: int,
                     corpus: str | Path | Sequence[Document] | None, fmt: str | None, work: Path | None,
                     where_queries: str | Path):
    """``(candidates, gathered)``: a dict's or a run file's candidates read before the model loads, as the queries are
    (a bad entry or line is said at once; ``gathered`` as :func:`retriever.candidates.gather_candidates` gives them), an
    index directory opened once (its checksums are read for its statistics and for its candidates), BM25 left as it is
    (``gathered`` None: gathered once the model is loaded)."""
    if isinstance(candidates, Mapping):
        gathered = memory_candidates(candidates, queries, depth), None, "dict", {}
        if not any(gathered[0].values()):
            raise no_memory_candidates_error(candidates, queries, where_queries)
        return candidates, gathered
    if is_bm25(candidates):
        return candidates, None
    if Path(candidates).is_dir():
        return Index(candidates), None
    gathered = gather_candidates(candidates, queries, depth, corpus, fmt, work)
    if not any(gathered[0].values()):
        raise no_candidates_error(gathered[2], queries, where_queries, gathered[3])
    return candidates, gathered


def reranker_for(model_path: str | Path, candidates, corpus: str | Path | Sequence[Document] | None,
                 device: str | None, max_doc_length: int | None, fmt: str | None, adapt_vocabulary: bool,
                 clicks: Clicks | None) -> Reranker:
    """The model reading text as :func:`rerank` does: the collection's vocabulary and statistics (the corpus's, else the
    candidate index's; without a corpus the candidates are an index's, :func:`retriever.candidates.check_candidates`)
    when adapted or untrained; an NDRM model reranking an index's candidates without a corpus reads the index."""
    from ckqti.models.specs import UNTRAINED

    source = candidates if corpus is None else corpus
    if adapt_vocabulary or str(model_path) in UNTRAINED:  # the untrained read the collection's statistics
        return open_reranker(model_path, device, max_doc_length, source, fmt, orcas=clicks)
    if isinstance(candidates, Index) and corpus is None:  # an NDRM model reads the index as it does its own
        from ckqti.models.checkpoint import QTI_KINDS  # torch: after every check

        return open_reranker(model_path, device, max_doc_length, candidates, fmt, QTI_KINDS)  # as explain --index
    return open_reranker(model_path, device, max_doc_length, None, fmt)


def write_or_hold(out: str | Path | None, ranked: Iterable[tuple[str, list[tuple[str, float]]]],
                  tag: str) -> dict[str, list[tuple[str, float]]] | None:
    """Write ``ranked`` (:func:`retriever.rerank_windows.rerank_windows`' rankings) as the run ``out``, a window at a
    time; or, ``out`` None, return them, each in the order the run would list it (:func:`retriever.runs.trec_order`)."""
    from retriever.run_writer import write_run
    from retriever.runs import trec_order

    if out is None:
        return {qid: trec_order(ranking) for qid, ranking in ranked}
    write_run(Path(out), ranked, tag)
    return None


def unknown_share(reranker: Reranker, texts: Sequence[str]) -> float | None:
    """The share of ``texts``' words a TK, TKL or NDRM model reads as unknown (id 1); None for IDCM, whose
    WordPiece pieces cover every text, or when there are no words."""
    from ckqti.models.inputs import WordPieceText

    if isinstance(reranker.text, WordPieceText) or not texts:
        return None
    rows, _ = reranker.doc_rows(list(texts))
    words = sum(len(r) for r in rows)
    return sum(int((r == 1).sum()) for r in rows) / words if words else None


def distinct(lists: Iterable[Iterable[str]]) -> Iterator[str]:
    """The distinct strings of ``lists``, in order, as they are read."""
    seen: set[str] = set()
    for strings in lists:
        for s in strings:
            if s not in seen:
                seen.add(s)
                yield s
