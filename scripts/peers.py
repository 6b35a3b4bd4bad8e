"""Peer engines for ``scripts/bench_search.py``, each built from the same stored integer impacts.

Contract shared by every peer (and by :func:`brute_force_topk`, the reference):

* ``impacts``: a ``scipy.sparse`` matrix ``[num_docs, vocab]`` of non-negative integer impacts
  (CSR preferred; 0 means "not stored"). Document ``i`` is row ``i``; term ``t`` is column ``t``.
* a query is a list of term ids, each occurrence weighing 1 (a repeated id counts twice), so
  the exact score of document ``d`` is ``sum(impacts[d, t] for t in term_ids)``.
* ``peer.build(impacts) -> peer`` (the caller times it), ``peer.warmup()`` (JIT compilation and
  first-touch costs, for the caller to leave out of the timings), ``peer.search(term_ids, k) ->
  (doc_idx int64[n], scores float64[n])`` best first, only documents scoring > 0, ``n <= k``;
  ``peer.search_batch(queries, k, threads)`` runs many queries on the engine's own threads;
  ``peer.index_bytes()`` is what the engine keeps to answer queries.

Peers:

* :class:`Bm25sPeer`: bm25s's Numba retrieval backend, its CSC score matrix set directly to the
  impacts (``scores["data"][j]`` is the impact of the ``j``-th posting, in float32, exact for
  sums below 2**24). bm25s zero-fills and scans a dense ``num_docs`` array per query.
* :class:`LucenePeer`: Pyserini's ``LuceneImpactSearcher`` over a ``JsonVectorCollection`` index
  built with ``-impact -pretokenized`` (term strings are the decimal term ids). Anserini stores
  an impact as a term frequency, so indexing cost grows with the *sum* of impacts. Anserini
  lowers tied scores by ~1e-6 steps to order ties by docid; scores are rounded back to integers.
* :class:`PisaPeer`: PISA (C++) through ``pyterrier-pisa``'s dict-of-weights indexer, scorer
  ``quantized``, one query algorithm a peer (``block_max_wand`` or ``maxscore``). No Java: the
  package imports PyTerrier but never starts its JVM on this path.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ckqti.errors import IndexFormatError, InputError, QueryError

Result = tuple[np.ndarray, np.ndarray]


STAMP = "ckqti-bench-stamp.json"  # which impacts a cached peer index holds


def impacts_digest(csr: sp.csr_matrix) -> str:
    """sha256 of a canonical CSR matrix (shape, indptr, indices, data)."""
    h = hashlib.sha256(repr(csr.shape).encode())
    for a in (csr.indptr, csr.indices, csr.data):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def as_impacts(impacts: sp.spmatrix | sp.sparray) -> sp.csr_matrix:
    """``impacts`` as a canonical CSR matrix of int32 (sorted indices, no stored zeros).

    Raises:
        InputError: negative, non-integer or too large impacts, or a non-2-D matrix.
    """
    csr = sp.csr_matrix(impacts)
    if csr.ndim != 2:
        raise InputError(f"impacts must be a 2-D sparse matrix, got shape {csr.shape}")
    data = csr.data
    if data.size and (data.min() < 0 or data.max() > np.iinfo(np.int32).max or not np.all(np.mod(data, 1) == 0)):
        raise InputError("impacts must be non-negative integers that fit in int32")
    if csr.dtype != np.int32:
        csr = csr.astype(np.int32)
    if not csr.has_canonical_format:
        csr = csr.copy()
        csr.sum_duplicates()
    if data.size and not np.all(csr.data > 0):
        csr = csr.copy()
        csr.eliminate_zeros()
    return csr


def query_weights(term_ids: Sequence[int], vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct term ids and how often each occurs in the query (ascending, unless the ids
    were already distinct: then in the given order).

    Raises:
        QueryError: a term id outside ``[0, vocab)``.
    """
    ids = np.asarray(term_ids, dtype=np.int64).reshape(-1)
    if ids.size and (ids.min() < 0 or ids.max() >= vocab):
        bad = ids[(ids < 0) | (ids >= vocab)][0]
        raise QueryError(f"term id {int(bad)} is outside the vocabulary [0, {vocab})")
    if len(set(ids.tolist())) == ids.size:  # distinct ids (the benchmark's queries): skip np.unique's cost
        return ids, np.ones(ids.size, np.int64)
    terms, counts = np.unique(ids, return_counts=True)
    return terms, counts


def brute_force_scores(impacts: sp.csr_matrix, term_ids: Sequence[int]) -> np.ndarray:
    """Exact int64 score of every document: the reference every peer must reproduce."""
    terms, counts = query_weights(term_ids, impacts.shape[1])
    if not terms.size:
        return np.zeros(impacts.shape[0], dtype=np.int64)
    return np.asarray(impacts[:, terms].astype(np.int64) @ counts).reshape(-1)


def brute_force_topk(impacts: sp.csr_matrix, term_ids: Sequence[int], k: int) -> Result:
    """Exact top ``k`` (score descending, then doc index ascending) among documents scoring > 0."""
    scores = brute_force_scores(impacts, term_ids)
    order = np.lexsort((np.arange(scores.size), -scores))[:k]
    order = order[scores[order] > 0]
    return order.astype(np.int64), scores[order].astype(np.float64)


def _empty() -> Result:
    return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)


def _dir_bytes(paths: Sequence[Path]) -> int:
    total = 0
    for path in paths:
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        total += sum(p.stat().st_size for p in files)
    return total


def _check_k(k: int) -> None:
    if k < 1:
        raise QueryError(f"k must be at least 1, got {k}")


# --------------------------------------------------------------------------------------- bm25s


@dataclass
class Bm25sPeer:
    """bm25s (``backend="numba"``) scoring the impacts as its precomputed CSC score matrix."""

    name: str = "bm25s"
    _model: object = field(default=None, repr=False)
    _vocab: int = 0

    def build(self, impacts: sp.spmatrix) -> Bm25sPeer:
        import bm25s

        csc = as_impacts(impacts).tocsc()  # column t = term t's postings: doc ids and impacts
        csc.sort_indices()
        vocab = csc.shape[1]
        model = bm25s.BM25(backend="numba")
        # One extra, empty column: bm25s's stand-in for queries with no known term.
        indptr = np.append(csc.indptr, csc.indptr[-1])
        model.scores = {
            "data": csc.data.astype(np.float32),
            "indices": csc.indices.astype(np.int32),
            "indptr": indptr,
            "num_docs": csc.shape[0],
        }
        model.vocab_dict = {"": vocab}
        model.unique_token_ids_set = set(range(vocab + 1))
        model.nonoccurrence_array = None
        model.corpus = None
        self._model, self._vocab = model, vocab
        return self

    def warmup(self) -> None:
        """Compile bm25s's serial and parallel Numba retrieval functions."""
        self.search([0], 1)
        self.search_batch([[0], [0]], 1, threads=2)

    def search(self, term_ids: Sequence[int], k: int) -> Result:
        return self.search_batch([term_ids], k, threads=1)[0]

    def search_batch(self, queries: Sequence[Sequence[int]], k: int, threads: int = 1) -> list[Result]:
        _check_k(k)
        lists = []
        for term_ids in queries:
            query_weights(term_ids, self._vocab)  # validates the ids
            lists.append([int(t) for t in term_ids] or [self._vocab])
        k = min(k, self._model.scores["num_docs"])
        res = self._model.retrieve(lists, k=k, show_progress=False, n_threads=threads)
        out = []
        for docs, scores in zip(res.documents, res.scores):
            keep = scores > 0
            out.append((docs[keep].astype(np.int64), scores[keep].astype(np.float64)))
        return out

    def index_bytes(self) -> int:
        scores = self._model.scores
        return int(scores["data"].nbytes + scores["indices"].nbytes + scores["indptr"].nbytes)


# ------------------------------------------------------------------------------------ Pyserini


class _EncodedQuery:
    """A Pyserini query encoder for queries that are already ``{term: weight}`` dicts."""

    def encode(self, query: dict[str, int]) -> dict[str, int]:
        return query


def _vector_records(csr: sp.csr_matrix) -> Iterator[dict]:
    for row in range(csr.shape[0]):
        lo, hi = csr.indptr[row], csr.indptr[row + 1]
        vector = dict(zip(map(str, csr.indices[lo:hi].tolist()), csr.data[lo:hi].tolist()))
        yield {"id": str(row), "contents": "", "vector": vector}


@dataclass
class LucenePeer:
    """Pyserini's ``LuceneImpactSearcher`` over an Anserini impact index of the same integers.

    Args:
        workdir: where the index goes (``workdir/lucene-impact``, replaced on every build).
        index_threads: Anserini indexing threads.
    """

    workdir: Path
    index_threads: int = 1
    name: str = "pyserini-impact"
    _searcher: object = field(default=None, repr=False)
    _vocab: int = 0

    @property
    def index_dir(self) -> Path:
        return Path(self.workdir) / "lucene-impact"

    def build(self, impacts: sp.spmatrix) -> LucenePeer:
        from ckqti import bm25

        csr = as_impacts(impacts)
        extra = ("-impact", "-pretokenized")
        bm25.build_lucene_index(
            _vector_records(csr), self.index_dir, "JsonVectorCollection", self.index_threads, extra, overwrite=True
        )
        bm25.start_jvm()
        from pyserini.search.lucene import LuceneImpactSearcher

        # min_idf=-inf: Pyserini otherwise drops query terms with idf <= 0 (terms in every document).
        self._searcher = LuceneImpactSearcher(str(self.index_dir), _EncodedQuery(), min_idf=float("-inf"))
        self._vocab = csr.shape[1]
        return self

    def warmup(self) -> None:
        for term in range(min(self._vocab, 20)):
            self.search([term], 10)

    def _encode(self, term_ids: Sequence[int]) -> dict[str, int]:
        """``{term: weight}`` for the query's terms that the index holds."""
        terms, counts = query_weights(term_ids, self._vocab)
        idf = self._searcher.idf
        return {t: w for t, w in zip(map(str, terms.tolist()), counts.tolist()) if t in idf}

    def search(self, term_ids: Sequence[int], k: int) -> Result:
        _check_k(k)
        query = self._encode(term_ids)
        return _hits(self._searcher.search(query, k)) if query else _empty()

    def search_batch(self, queries: Sequence[Sequence[int]], k: int, threads: int = 1) -> list[Result]:
        _check_k(k)
        encoded = {str(i): q for i, q in enumerate(map(self._encode, queries)) if q}
        hits = self._searcher.batch_search(list(encoded.values()), list(encoded), k=k, threads=threads)
        return [_hits(hits[str(i)]) if str(i) in hits else _empty() for i in range(len(queries))]

    def index_bytes(self) -> int:
        return _dir_bytes([self.index_dir])


def _hits(hits) -> Result:
    """Anserini lowers tied scores by multiples of about 1e-6 so that ties sort by docid; the exact
    scores are integers (integer impacts and weights), so rounding restores them."""
    docs = np.fromiter((int(h.docid) for h in hits), dtype=np.int64, count=len(hits))
    scores = np.fromiter((h.score for h in hits), dtype=np.float64, count=len(hits))
    return docs, np.rint(scores)


# ---------------------------------------------------------------------------------------- PISA

PISA_ALGORITHMS = ("block_max_wand", "maxscore")


@dataclass
class PisaPeer:
    """PISA through pyterrier-pisa: its dict-of-weights indexer, ``quantized`` scorer, one algorithm.

    ``search`` calls the same C++ entry point that ``PisaRetrieve.transform`` calls
    (``_pisathon.retrieve``) with one query, without the pandas DataFrame round trip, which
    costs more than a PISA query. PISA holds the GIL for a single-threaded call: run several
    queries in parallel with ``search_batch(..., threads)`` (TBB threads), not Python threads.

    Args:
        workdir: where the index goes (``workdir/pisa``, replaced on every build).
        algorithm: ``"block_max_wand"`` or ``"maxscore"``.
        verify: check every posting list against the impacts after indexing (guards the
            package's batching bug; costs a few seconds a million documents).
    """

    workdir: Path
    algorithm: str = "block_max_wand"
    verify: bool = True
    name: str = ""
    _ctxt: object = field(default=None, repr=False)
    _known: np.ndarray = field(default=None, repr=False)
    build_s: float = 0.0

    def __post_init__(self) -> None:
        if self.algorithm not in PISA_ALGORITHMS:
            raise ValueError(f"unknown PISA algorithm {self.algorithm!r}: use one of {PISA_ALGORITHMS}")
        self.name = self.name or f"pisa-{self.algorithm.replace('_', '-')}"

    @property
    def index_dir(self) -> Path:
        return Path(self.workdir) / "pisa"

    def build(self, impacts: sp.spmatrix, reuse: bool = False) -> PisaPeer:
        """Index ``impacts`` (or, with ``reuse``, open the index a previous build left for the
        very same impacts: ``STAMP`` holds their sha256 and the measured ``build_s``)."""
        from pyterrier_pisa import PisaIndex

        csr = as_impacts(impacts)
        digest = impacts_digest(csr)
        stamp = self.index_dir / STAMP
        if reuse and stamp.is_file() and json.loads(stamp.read_text()).get("sha256") == digest:
            self.build_s = float(json.loads(stamp.read_text())["build_s"])
            index = PisaIndex(str(self.index_dir), stemmer="none", stops="none")
            if self.verify:
                verify_pisa_postings(self.index_dir, csr)
        else:
            t0 = time.perf_counter()
            shutil.rmtree(self.index_dir, ignore_errors=True)
            # batch_size >= num_docs: with several batches the indexer writes earlier batches with
            # too few term entries and silently corrupts the merged postings (see verify_pisa_postings).
            index = PisaIndex(str(self.index_dir), stemmer="none", stops="none", batch_size=max(1, csr.shape[0]))
            index.toks_indexer(scale=1.0).index(_toks_records(csr))
            if self.verify:
                verify_pisa_postings(self.index_dir, csr)
            self.build_s = time.perf_counter() - t0
            stamp.write_text(json.dumps({"sha256": digest, "build_s": self.build_s}))
        retriever = index.quantized(num_results=10, query_algorithm=self.algorithm, toks_scale=1.0, threads=1)
        self._ctxt = retriever._ctxt  # the prepared C++ retrieval context (wand data + compressed index)
        self._known = np.zeros(csr.shape[1], dtype=bool)
        self._known[np.unique(csr.indices)] = True
        return self

    def with_algorithm(self, algorithm: str) -> PisaPeer:
        """Another peer over the same built index and context, with a different query algorithm."""
        other = PisaPeer(self.workdir, algorithm, self.verify)
        other._ctxt, other._known, other.build_s = self._ctxt, self._known, self.build_s
        return other

    def warmup(self) -> None:
        for term in np.flatnonzero(self._known)[:20].tolist():
            self.search([term], 10)

    def _encode(self, term_ids: Sequence[int]) -> dict[str, float]:
        terms, counts = query_weights(term_ids, self._known.size)
        keep = self._known[terms]
        # pyterrier-pisa turns weight w into w repeats of the term; PISA counts repeats as the weight.
        return dict(zip(map(str, terms[keep].tolist()), map(float, counts[keep].tolist())))

    def search(self, term_ids: Sequence[int], k: int) -> Result:
        return self.search_batch([term_ids], k, threads=1)[0]

    def search_batch(self, queries: Sequence[Sequence[int]], k: int, threads: int = 1) -> list[Result]:
        from pyterrier_pisa import _pisathon

        _check_k(k)
        inputs = [(i, self._encode(q)) for i, q in enumerate(queries)]
        size = len(inputs) * k
        qidx = np.empty(size, dtype=np.int32)
        docnos = np.empty(size, dtype=object)
        ranks = np.empty(size, dtype=np.int32)
        scores = np.empty(size, dtype=np.float32)
        n = _pisathon.retrieve(
            self._ctxt, self.algorithm, inputs, k=k, threads=threads, query_weighted=1, pretokenised=True,
            result_qidxs=qidx, result_docnos=docnos, result_ranks=ranks, result_scores=scores,
        )  # fmt: skip
        return _group_by_query(len(inputs), qidx[:n], docnos[:n], ranks[:n], scores[:n])

    def index_bytes(self) -> int:
        """The files PISA maps at query time: compressed index, block-max (WAND) data, lexicons."""
        lexicons = [self.index_dir / "fwd.doclex", self.index_dir / "fwd.termlex"]
        return _dir_bytes([*self.index_dir.glob("quantized.*"), *lexicons])


def _toks_records(csr: sp.csr_matrix) -> Iterator[dict]:
    for row in range(csr.shape[0]):
        lo, hi = csr.indptr[row], csr.indptr[row + 1]
        yield {"docno": str(row), "toks": dict(zip(map(str, csr.indices[lo:hi].tolist()), csr.data[lo:hi].tolist()))}


def _group_by_query(num_queries: int, qidx, docnos, ranks, scores) -> list[Result]:
    order = np.lexsort((ranks, qidx))
    qidx, docnos, scores = qidx[order], docnos[order], scores[order]
    bounds = np.searchsorted(qidx, np.arange(num_queries + 1))
    out = []
    for q in range(num_queries):
        lo, hi = bounds[q], bounds[q + 1]
        docs = np.fromiter((int(d) for d in docnos[lo:hi]), dtype=np.int64, count=hi - lo)
        out.append((docs, scores[lo:hi].astype(np.float64)))
    return out


def verify_pisa_postings(index_dir: str | Path, impacts: sp.csr_matrix) -> None:
    """Check PISA's uncompressed postings (``inv.docs``/``inv.freqs``) against ``impacts`` exactly.

    Raises:
        IndexFormatError: any difference in the term list, a document list or an impact.
    """
    index_dir = Path(index_dir)
    csc = as_impacts(impacts).tocsc()
    csc.sort_indices()
    df = np.diff(csc.indptr)
    terms = np.array([int(t) for t in (index_dir / "fwd.terms").read_text().split()], dtype=np.int64)
    if not np.array_equal(np.sort(terms), np.flatnonzero(df > 0)):
        raise IndexFormatError("PISA's term list differs from the impacts' non-empty columns", index_dir / "fwd.terms")
    docs = np.fromfile(index_dir / "inv.docs", dtype=np.uint32)
    freqs = np.fromfile(index_dir / "inv.freqs", dtype=np.uint32)
    lengths = df[terms]
    expected_docs = _postings_layout(lengths, csc.indices, csc.indptr[terms])
    expected_freqs = _postings_layout(lengths, csc.data, csc.indptr[terms])
    header = np.array([1, csc.shape[0]], dtype=np.uint32)
    if not np.array_equal(docs, np.concatenate([header, expected_docs])):
        raise IndexFormatError(
            "PISA's document lists differ from the impacts (corrupted postings)", index_dir / "inv.docs"
        )
    if not np.array_equal(freqs, expected_freqs):
        raise IndexFormatError(
            "PISA's impacts differ from the stored impacts (corrupted postings)", index_dir / "inv.freqs"
        )


def _postings_layout(lengths: np.ndarray, values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """PISA's on-disk list layout ``[len, v...]`` a term, gathering each term's ``values[start:start+len]``."""
    total = int(lengths.sum())
    body_offsets = np.cumsum(lengths) - lengths
    gather = (
        np.arange(total, dtype=np.int64)
        - np.repeat(body_offsets, lengths)
        + np.repeat(starts.astype(np.int64), lengths)
    )
    out = np.empty(total + lengths.size, dtype=np.uint32)
    heads = body_offsets + np.arange(lengths.size)
    out[heads] = lengths
    mask = np.ones(out.size, dtype=bool)
    mask[heads] = False
    out[mask] = values[gather]
    return out
