"""Training data: an analyzed corpus, queries as term ids, relevance judgements, dev splits.

Documents are analyzed exactly as ``ckqti index`` analyzes them
(:func:`indexer.analyze.analyze_corpus`: all fields joined, ORCAS clicks first when given, the project's
:class:`~ckqti.text.Analyzer`), so a model sees the same term sequences in training and
at indexing time. The training vocabulary is the corpus vocabulary, optionally bounded
(:func:`bounded_vocabulary`); terms outside it become the unknown id 1.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ckqti.errors import InputError
from ckqti.terminal import counted
from ckqti.text import Analyzer
from ckqti.vocab import UNK, Vocabulary

if TYPE_CHECKING:
    from indexer.readers import Clicks

Qrels = Mapping[str, Mapping[str, int]]


@dataclass(frozen=True)
class Collection:
    """An analyzed corpus in training-vocabulary ids.

    Attributes:
        docids: document ids in corpus order; a document's index is its position here.
        titles: document titles (empty when the format has none).
        offsets: ``int64[n + 1]`` into ``tokens``.
        tokens: ``int32`` term ids of every document, in order (untruncated).
        vocab: the training vocabulary with the corpus statistics.
        analyzer: the analyzer that produced the terms.
    """

    docids: list[str]
    titles: list[str]
    offsets: np.ndarray
    tokens: np.ndarray
    vocab: Vocabulary
    analyzer: Analyzer

    def __len__(self) -> int:
        return len(self.docids)

    def doc(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i] : self.offsets[i + 1]]

    def index(self) -> dict[str, int]:
        return {d: i for i, d in enumerate(self.docids)}


def load_collection(
    path: str | Path, analyzer: Analyzer | None = None, fmt: str | None = None, min_df: int = 1,
    orcas: str | Path | Clicks | None = None,
) -> Collection:
    """Read and analyze a corpus file; terms with ``df < min_df`` map to the unknown id. ``orcas``:
    an ORCAS file whose clicked queries lead each document's text, as ``ckqti index --orcas`` reads
    them (:func:`indexer.readers.read_corpus`; a malformed line is an error naming the file and line),
    or its clicks as :func:`load_clicks` loaded them."""
    from indexer.analyze import analyze_corpus

    analyzer = analyzer or Analyzer()
    corpus = analyze_corpus(path, analyzer, fmt=fmt, orcas=orcas)
    vocab, remap = bounded_vocabulary(corpus.vocab, min_df)
    return Collection(
        list(corpus.docs["docid"]),
        list(corpus.docs["title"]),
        corpus.offsets.astype(np.int64),
        remap[corpus.tokens].astype(np.int32),
        vocab,
        analyzer,
    )


def bounded_vocabulary(vocab: Vocabulary, min_df: int = 1) -> tuple[Vocabulary, np.ndarray]:
    """Keep the terms with ``df >= min_df`` (statistics unchanged); returns it and ``old id -> new id``.

    Dropped terms map to the unknown id 1; ids 0 and 1 keep their meaning.
    """
    if min_df < 1:
        raise ValueError(f"min_df must be >= 1, got {min_df}")
    n = len(vocab)
    keep = np.flatnonzero(vocab.df[:n] >= min_df)
    keep = np.concatenate([[0, 1], keep[keep > 1]])
    remap = np.full(n, UNK, dtype=np.int64)
    remap[keep] = np.arange(len(keep))
    remap[0] = 0
    bounded = Vocabulary(
        [vocab.terms[i] for i in keep], vocab.df[keep].copy(), vocab.cf[keep].copy(), vocab.num_docs, vocab.total_terms
    )
    return bounded, remap


def analyze_queries(queries: Mapping[str, str], analyzer: Analyzer, vocab: Vocabulary, max_terms: int) -> dict[str, np.ndarray]:
    """``qid -> int64 term ids`` (first ``max_terms`` analyzed terms; unknown terms are id 1)."""
    return {qid: np.asarray(vocab.ids(analyzer(text))[:max_terms], dtype=np.int64) for qid, text in queries.items()}


def relevant_docs(qrels: Qrels, doc_index: Mapping[str, int], min_grade: int = 1) -> dict[str, frozenset[int]]:
    """``qid -> indices of documents judged at least min_grade``; docids not in the corpus are ignored."""
    out = {}
    for qid, judged in qrels.items():
        out[qid] = frozenset(doc_index[d] for d, g in judged.items() if g >= min_grade and d in doc_index)
    return out


def judgement_notes(qrels: Qrels, doc_index: Mapping[str, int], min_grade: int = 1) -> list[str]:
    """What training cannot use of ``qrels``, in one-line notes (none when it can use all of it).

    Judgements of documents not in the corpus are ignored (with a wrong id scheme, e.g. ``"001"``
    against ``"1"``, nearly all of them); a judged query left without a relevant document (grade
    >= ``min_grade``, ``ckqti train --rel-level``) in the corpus is only a source of non-relevant
    candidates for NDRM and is skipped by TK, TKL and IDCM. Negative grades count as not
    relevant, as in ``ckqti eval``.
    """
    total = sum(len(judged) for judged in qrels.values())
    absent = [d for judged in qrels.values() for d in judged if d not in doc_index]
    notes = []
    if absent:
        relevant = sum(1 for judged in qrels.values() for d, g in judged.items()
                       if g >= min_grade and d not in doc_index)
        notes.append(f"{len(absent):,} of the {total:,} judgements ({relevant:,} relevant) name a document not in the "
                     f"corpus and are ignored (first: {absent[0]!r}{_spelled_otherwise(absent[0], doc_index, 'corpus')})")
    unjudged = [q for q, judged in qrels.items() if not any(g >= min_grade for g in judged.values())]
    lost = [q for q, judged in qrels.items() if any(g >= min_grade for g in judged.values())
            and not any(g >= min_grade and d in doc_index for d, g in judged.items())]
    if unjudged:
        notes.append(f"{len(unjudged):,} of the {len(qrels):,} judged queries have no judgement of grade {min_grade} "
                     f"or more (first: {unjudged[0]!r})")
    if lost:
        notes.append(f"{len(lost):,} of the {len(qrels):,} judged queries have no relevant document in the corpus "
                     f"(first: {lost[0]!r})")
    return notes


def wordless_notes(qids: Sequence[str], query_ids: Mapping[str, np.ndarray]) -> list[str]:
    """A note on the training queries ``qids`` of which no term is in the vocabulary (ids 0 and 1
    only, e.g. a query in a script the analyzer does not read): training skips them."""
    lost = [q for q in qids if not (np.asarray(query_ids[q]) > 1).any()]
    if not lost:
        return []
    return [f"{len(lost):,} of the {len(qids):,} training queries have no term in the vocabulary and are skipped "
            f"(first: {lost[0]!r})"]


def load_clicks(orcas: str | Path | None) -> Clicks | None:
    """An ORCAS file's clicks (:func:`indexer.readers.load_orcas`), loaded once for the corpus and
    for :func:`clicks_notes`; None without a file."""
    from indexer.readers import load_orcas

    return load_orcas(orcas) if orcas else None


def clicks_notes(clicks: Clicks | None) -> list[str]:
    """The note on the lines of an ORCAS file dropped as repeated, as ``ckqti index`` shows it."""
    from indexer.readers import repeated_clicks_note

    note = repeated_clicks_note(clicks.repeated, clicks.path) if clicks else ""
    return [note] if note else []


def show_notes(notes: Sequence[str]) -> None:
    """Print each note on stderr (training shows them before its first epoch)."""
    for note in notes:
        print(f"note: {note}", file=sys.stderr, flush=True)


def show_step(text: str, show: bool) -> None:
    """Say on stderr which long step of training's start-up runs (BM25 candidates, skip-gram vectors:
    minutes, with no bar of their own), so a run in a log is not taken for a hung one."""
    if show:
        print(text, file=sys.stderr, flush=True)


def bm25_step(queries: int, depth: int) -> str:
    return f"BM25 candidates (Pyserini): the top {depth:,} of {counted(queries, 'query', 'queries')} ..."


def require_texts(qids: Sequence[str], queries: Mapping[str, str], path: str | Path | None = None) -> None:
    """Every judged query in ``qids`` must have a text in ``queries`` (read from ``path``)."""
    missing = [q for q in qids if q not in queries]
    if missing:
        raise InputError(f"{len(missing)} of the {len(qids)} judged queries have no text in the queries file (first: "
                         f"{missing[0]!r}{_spelled_otherwise(missing[0], queries, 'queries file')})", path)


def _spelled_otherwise(ident: str, known: Mapping[str, object], where: str) -> str:
    """``"; the <where> has '001': ..."`` when ``ident`` (``"1"``) is missing from ``known`` only by leading zeros."""
    bare = ident.lstrip("0") or "0"
    other = next((k for k in known if (k.lstrip("0") or "0") == bare), None) if bare.isdigit() else None
    return "" if other is None else f"; the {where} has {other!r}: ids are compared as written"


def candidate_indices(candidates: Mapping[str, Iterable[str]], doc_index: Mapping[str, int], depth: int) -> dict[str, list[int]]:
    """``qid -> indices of its first depth candidates`` (docids outside the corpus dropped)."""
    out = {}
    for qid, docids in candidates.items():
        picked = [doc_index[d] for d in docids if d in doc_index]
        out[qid] = picked[:depth]
    return out


def split_dev(qrels: Qrels, fraction: float, seed: int, min_grade: int = 1, path: str | Path | None = None,
              hint: str = "") -> tuple[dict, dict]:
    """Carve ``fraction`` of the queries with a relevant judgement (grade >= ``min_grade``; at
    least one query) into a dev split: ``(train, dev)``; the other judged queries stay in train.

    The split depends only on the set of those query ids and the seed. Fewer than 2 such queries
    is an :class:`InputError` naming ``path`` (the qrels file, when read from one) and ending
    with ``hint`` (what the caller's user can do instead, e.g. give dev judgements).
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"dev fraction must be in (0, 1), got {fraction}")
    qids = sorted(q for q, judged in qrels.items() if any(g >= min_grade for g in judged.values()))
    if len(qids) < 2:
        lower = sum(1 for judged in qrels.values() if any(g >= 1 for g in judged.values())) if min_grade > 1 else 0
        raise InputError(f"need at least 2 queries with a relevant judgement (grade >= {min_grade}) to carve a dev "
                         f"split; {len(qids)} of the {len(qrels)} judged queries have one"
                         + (f" ({lower} at --rel-level 1)" if lower >= 2 else "") + hint, path)
    order = np.random.default_rng(seed).permutation(len(qids))
    n_dev = min(len(qids) - 1, max(1, round(fraction * len(qids))))
    dev = {qids[i] for i in order[:n_dev]}
    return {q: dict(j) for q, j in qrels.items() if q not in dev}, {q: dict(qrels[q]) for q in sorted(dev)}


def read_training_inputs(queries, qrels, qrels_format: str | None = None,
                         queries_format: str | None = None) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """Training queries and qrels, each a file (read; the queries in ``queries_format``, the qrels in
    ``qrels_format``, None: detected) or a mapping (copied): ``(queries, qrels)``."""
    from indexer.readers import read_qrels, read_queries
    from indexer.readers.queries import check_no_format_in_memory

    check_no_format_in_memory(queries, queries_format, "queries_format")
    q = read_queries(queries, queries_format) if isinstance(queries, (str, Path)) else dict(queries)
    r = read_qrels(qrels, qrels_format) if isinstance(qrels, (str, Path)) else {k: dict(v) for k, v in qrels.items()}
    return q, r


def inputs_digest(*parts) -> str:
    """sha256 of what a training run read (arrays by their bytes, lists of arrays, JSON-able values,
    files named by a :class:`pathlib.Path` by their content): a resumed run, or an IDCM stage
    reused, must have read the same, not only files of the same names and sizes."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, np.ndarray):
            h.update(str(part.dtype).encode() + np.ascontiguousarray(part).tobytes())
        elif isinstance(part, (list, tuple)) and part and isinstance(part[0], np.ndarray):
            for row in part:
                h.update(np.ascontiguousarray(row).tobytes() + b"|")
        elif isinstance(part, Path):
            h.update(part.read_bytes() if part.is_file() else b"<no file>")
        else:
            h.update(json.dumps(part, sort_keys=True, default=str).encode())
        h.update(b"\0")
    return h.hexdigest()
