"""Candidates given in memory, a dict, checked and cut to a depth as a run file's lines are."""

from __future__ import annotations

import math
import reprlib
from array import array
from collections.abc import Iterable, Mapping, Set
from pathlib import Path

from ckqti.errors import InputError, id_text, id_type_message, is_id, is_real
from retriever.candidates import CandidateLists


def memory_candidates(candidates: Mapping, queries: Mapping[str, str], depth: int) -> CandidateLists:
    """Top ``depth`` per query of candidates given in memory, in ``queries``' order: ``{qid: [docid, ...]}`` (in rank
    order: its first ``depth``) or ``{qid: {docid: score}}`` (ranked as :func:`retriever.candidates.run_candidates`
    ranks a run file's lines, :func:`retriever.runs.trec_order`: score descending as trec_eval holds it, in single
    precision, ties by docid descending; then its first ``depth``). Every entry is checked as a run file's lines are
    (those of queries not in ``queries`` too, and not held): query ids and docids are strings or integers (read as
    their digits, as :func:`indexer.readers.read_query_mapping` reads a query id and
    :func:`indexer.readers.read_document_mapping` a docid: :func:`ckqti.errors.is_id`) that
    :func:`indexer.readers.formats.check_id` takes, a docid once a query (``7`` and ``"7"`` are one), a score a
    finite number. A query whose list is empty has no candidates.

    Raises:
        InputError: naming the entry (``candidates['q1']``).
    """
    from indexer.readers.formats import check_id

    cands = CandidateLists()
    first: dict[str, str] = {}  # query id -> where it was first given
    for key, ranking in candidates.items():
        where = f"candidates[{key!r}]"
        if not is_id(key):
            raise InputError(id_type_message(key, "query id"), where)
        qid = check_id(id_text(key), "query id", where, None)
        if qid in first:
            raise InputError(f"duplicate query id {qid!r} (first at {first[qid]})", where)
        first[qid] = where
        docids = ranked_docids(qid, ranking, where)
        if qid in queries:
            cands.add(qid, docids[:depth])
    return cands.ordered(queries)


def ranked_docids(qid: str, ranking, where: str) -> list[str]:
    """One query's candidates in memory (:func:`memory_candidates`), checked, in rank order."""
    from retriever.runs import all_numbers, trec_order

    if isinstance(ranking, Mapping):
        docids, scores = checked_docids(qid, list(ranking), where), list(ranking.values())
        try:  # every score a number (a bool, numpy's too, is none) that is finite: at once, else the first that is not named
            good = all_numbers(scores) and all(map(math.isfinite, array("d", scores)))
        except (TypeError, OverflowError):  # OverflowError: an int beyond a float's range
            good = False
        if not good:
            for docid, score in zip(docids, scores):
                if not is_real(score):
                    raise InputError(f"the score of doc {docid!r} is not a number: {score!r}", where)
                if not finite(score):
                    raise InputError(f"the score of doc {docid!r} is not finite: {reprlib.repr(score)}", where)
        return [docid for docid, _ in trec_order(zip(docids, scores))]
    if isinstance(ranking, (str, bytes, Set)) or not isinstance(ranking, Iterable):  # a set has no rank order
        raise InputError(f"a query's candidates are [docid, ...] in rank order or {{docid: score}}, found "
                         f"{type(ranking).__name__}", where)
    return checked_docids(qid, list(ranking), where)


def finite(score) -> bool:
    """Whether a real number is finite: an int beyond a float's range is not (``math.isfinite`` raises)."""
    try:
        return math.isfinite(score)
    except OverflowError:
        return False


def checked_docids(qid: str, docids: list, where: str) -> list[str]:
    """``docids`` as strings (an integer as its digits: :func:`ckqti.errors.id_text`), each as
    :func:`indexer.readers.formats.check_id` takes it, none repeated; an error naming the first that is not. All are checked at once first (as :func:`retriever.run_writer.write_run` checks a query's), one at a time only
    when that finds something to name or to strip."""
    from indexer.readers.formats import check_id

    try:
        joined = "".join(docids)
    except TypeError:  # one is not a string
        joined = None
    if joined is not None and joined.isprintable() and " " not in joined and "" not in docids \
            and len(set(docids)) == len(docids):  # printable: no control, format or whitespace character but " "
        return list(map(str, docids))  # numpy's str_ as str
    checked: list[str] = []
    seen: set[str] = set()
    for i, docid in enumerate(docids):
        if not is_id(docid):
            pairs = "; with scores, a query's candidates are {docid: score}" if isinstance(docid, (tuple, list)) else ""
            raise InputError(f"{id_type_message(docid, 'docid')} (item {i}{pairs})", where)
        docid = check_id(id_text(docid), "docid", where, None)
        if docid in seen:
            raise InputError(f"query {qid!r} retrieves doc {docid!r} twice", where)
        seen.add(docid)
        checked.append(docid)
    return checked


def no_memory_candidates_error(candidates: Mapping, queries: Mapping[str, str], where_queries: str | Path) -> InputError:
    """The error when no query has a candidate in a dict of them (:func:`memory_candidates`): one of another query set
    names both sides' query ids, as :func:`retriever.candidates.no_candidates_error` does for a run file's."""
    from ckqti.terminal import counted

    first = next(iter(queries), "")
    if not any(str(q).strip() in queries for q in candidates):
        theirs = next(iter(candidates), "")
        return InputError(f"none of the {counted(len(queries), 'query', 'queries')} of {where_queries} is in this "
                          f"dict (query ids such as {theirs!r} here against {first!r} there): another query set?"
                          if candidates else "the dict holds no query", "candidates")
    return InputError(f"no query of {where_queries} has a candidate in this dict (each one's list is empty)",
                      "candidates")
