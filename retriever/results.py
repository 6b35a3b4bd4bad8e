"""What a search returns: hits, one query's result, hits as columns, and their TREC order."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from retriever.index import take_rows

if TYPE_CHECKING:
    from retriever.search import Searcher

SHOWN_IN_REPR = 5  # hits a result's repr shows; the rest are counted



@dataclass(frozen=True)
class Hit:
    rank: int
    docid: str
    score: float
    shard: int
    doc: int



@dataclass(frozen=True)
class SearchResult:
    """Hits of one query plus what was skipped or counted on the way.

    Hashable (a set member, a dict key) and equal by value like its :class:`Hit` s; its lists
    are the searcher's own, not to be changed (the hash would no longer match)."""

    query: str
    terms: list[str]
    hits: list[Hit]
    oov: list[str] = field(default_factory=list)
    postings: int = 0
    unweighted: list[str] = field(default_factory=list)  # known terms adding nothing (:meth:`~retriever.search.Searcher.unweighted`)

    def __hash__(self) -> int:
        # the generated hash fails on the list fields: hash what __eq__ compares, lists as tuples
        return hash((self.query, tuple(self.terms), tuple(self.hits), tuple(self.oov), self.postings,
                     tuple(self.unweighted)))

    def __repr__(self) -> str:
        return brief_repr(self)

    @property
    def docids(self) -> list[str]:
        """The hits' docids in rank order: :class:`TopK`'s column (a bm25s user's ``results`` row)."""
        return [h.docid for h in self.hits]

    @property
    def scores(self) -> list[float]:
        """The hits' scores in rank order: :class:`TopK`'s column, a list as there (``np.asarray`` for an array)."""
        return [h.score for h in self.hits]

    def why_empty(self) -> str:
        """Why a search retrieved nothing (``ckqti run``'s and ``rerank``'s note): no query word in the
        index vocabulary, or no document scoring above 0 for those that are; ``""`` when it retrieved something."""
        return why_empty(self.terms, self.oov) if not self.hits else ""



def brief_repr(obj) -> str:
    """A dataclass's repr with each list or array field of more than :data:`SHOWN_IN_REPR` items cut
    to its first ones and a count of the rest: a result of 1,000 hits printed 78,000 characters (an
    Arrow array, :class:`TopKColumns`' docids, is written on one line as ``<Arrow string>[...]``)."""
    shown = []
    for f in fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, pa.Array):  # its own repr writes every item on a line of its own
            first = value[:SHOWN_IN_REPR].to_pylist()
            rest = f", ... {len(value) - len(first):,} more" if len(value) > len(first) else ""
            shown.append(f"{f.name}=<Arrow {value.type}>[{', '.join(map(repr, first))}{rest}]")
        elif isinstance(value, (list, np.ndarray)) and len(value) > SHOWN_IN_REPR:
            first = ", ".join(map(repr, value[:SHOWN_IN_REPR].tolist() if isinstance(value, np.ndarray) else value[:SHOWN_IN_REPR]))
            opening, closing = ("array([", "])") if isinstance(value, np.ndarray) else ("[", "]")
            shown.append(f"{f.name}={opening}{first}, ... {len(value) - SHOWN_IN_REPR:,} more{closing}")
        else:
            shown.append(f"{f.name}={value!r}")
    return f"{type(obj).__name__}({', '.join(shown)})"



def why_empty(terms: list[str], oov: list[str]) -> str:
    """:meth:`SearchResult.why_empty` of a query with these known and unknown words."""
    if not terms:
        return f"not in the index vocabulary: {' '.join(oov)}"
    unknown = f" ({' '.join(oov)}: not in the index vocabulary)" if oov else ""  # a run's notes list no query's unknown words
    return f"no document scores above 0 for {' '.join(terms)}{unknown}"



@dataclass(frozen=True, eq=False, repr=False)
class QueryHits:
    """One query's hits as columns, in rank order, with what the search knew of the query: the fields
    :class:`TopK` and :class:`TopKColumns` share (they differ in how ``docids`` and ``scores`` are held).
    Equal only to themselves (they hold numpy arrays, whose ``==`` is elementwise): compare their ``docids``
    and ``scores``, or :meth:`TopK.result`'s :class:`SearchResult`, which compares by value."""

    query: str
    terms: list[str]
    docids: list[str] | pa.Array
    scores: list[float] | np.ndarray
    shards: np.ndarray  # int64
    docs: np.ndarray  # int64, each document's row in its shard
    oov: list[str]
    postings: int
    unweighted: list[str]

    def __repr__(self) -> str:
        return brief_repr(self)

    def why_empty(self) -> str:
        """:meth:`SearchResult.why_empty` of these hits."""
        return why_empty(self.terms, self.oov) if not len(self.docids) else ""



@dataclass(frozen=True, eq=False, repr=False)
class TopK(QueryHits):
    """One query's hits as columns, ranked as :class:`SearchResult` ranks them: what ``ckqti run``
    writes. A run at k = 1,000 would otherwise make a :class:`Hit` a document, a million for as many
    queries, and making and collecting them as garbage took twice the time of everything else."""

    docids: list[str]
    scores: list[float]

    def result(self) -> SearchResult:
        """The same hits as a :class:`SearchResult`."""
        hits = [Hit(rank, docid, score, shard, doc) for rank, docid, score, shard, doc
                in zip(itertools.count(1), self.docids, self.scores, self.shards.tolist(), self.docs.tolist())]
        return SearchResult(self.query, self.terms, hits, self.oov, self.postings, self.unweighted)



@dataclass(frozen=True, eq=False, repr=False)
class TopKColumns(QueryHits):
    """:class:`TopK`'s hits as ``ckqti run`` writes them (:meth:`~retriever.search.Searcher.topk_columns`): ``docids`` an
    Arrow string array beyond :data:`~retriever.index.TAKE_FROM` hits (a list of strings up to it),
    ``scores`` a float64 array. A run at k = 1,000 turned a million docids from Arrow into Python
    strings and back into Arrow to write them, and a million scores into Python floats."""

    docids: list[str] | pa.Array
    scores: np.ndarray  # float64

    def topk(self) -> TopK:
        """The same hits as a :class:`TopK`."""
        docids = self.docids if isinstance(self.docids, list) else self.docids.to_pylist()
        return TopK(self.query, self.terms, docids, self.scores.tolist(), self.shards, self.docs, self.oov,
                    self.postings, self.unweighted)



def search_json(searcher: Searcher, res: SearchResult) -> dict:
    """A search result as ``ckqti search --json`` prints it and ``POST /search`` returns it."""
    hits = [{"rank": h.rank, "docid": h.docid, "score": h.score, "title": title}
            for h, title in zip(res.hits, searcher.titles(res.hits))]
    return {"query": res.query, "terms": res.terms, "oov": res.oov, "unweighted": res.unweighted, "hits": hits}



def trec_ranking(vals: np.ndarray, docids: list[str] | pa.Array) -> np.ndarray:
    """The order of hits ``vals`` (scores as trec_eval holds them, :meth:`retriever.query.QueryPlan.held`, or any ordered
    numbers), ``docids`` that ranks them as trec_eval does: score
    descending, then docid descending, compared by code point as Python compares strings (docids hold
    no controls, so numpy's fixed-width strings lose no trailing NUL). Hits already by score descending,
    as the kernels give them, have only their ties sorted: a run at k = 1,000 made a numpy string of
    every docid it wrote, the few tied ones suffice (of an Arrow array, only they are made Python strings)."""
    if vals.size > 1 and bool((vals[:-1] >= vals[1:]).all()):
        order = np.arange(vals.size)
        tie = vals[:-1] == vals[1:]
        if tie.any():
            at = np.flatnonzero(np.concatenate(([False], tie)) | np.concatenate((tie, [False])))  # in a tie
            tied = [docids[i] for i in at.tolist()] if isinstance(docids, list) else take_rows(docids, at)
            keys = np.array(tied, dtype=str)
            order[at] = at[np.lexsort((keys, vals[at]))[::-1]]  # each tie's docids, descending, in its places
        return order
    # one numpy sort, ascending, then read backwards: the last key (the score) first, then the docid
    return np.lexsort((np.array(docids if isinstance(docids, list) else docids.to_pylist(), dtype=str), vals))[::-1]
