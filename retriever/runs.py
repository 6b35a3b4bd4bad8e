"""TREC run files: ``qid Q0 docid rank score tag``, one line per retrieved document.

Ranking order everywhere in ckqti is trec_eval's: score descending, ties broken by docid
descending (string order). trec_eval ignores the rank column and re-sorts this way, so
writing in the same order makes the file's ranks the ones that get evaluated. trec_eval (and
pytrec_eval) hold a score as a C ``float``: scores that differ only beyond single precision
(1.0000000001 and 1.0) tie there, and so they do here.

This module holds what writing and reading share: the order (:func:`trec_order`), the checks of a run's
path and columns, :class:`RunValueError`. Runs are written by :mod:`retriever.run_writer` and read by
:mod:`retriever.run_reader`.
"""

from __future__ import annotations

import numbers
import operator
import re
from array import array
from collections.abc import Iterable, Mapping
from pathlib import Path

from ckqti.errors import InputError
from ckqti.files import check_folder_of, check_not_input
from retriever.run_reader import run_rows

Ranking = Mapping[str, float] | Iterable[tuple[str, float]]

WHITESPACE = re.compile(r"\s")
_HELD_SCORE_THEN_DOCID = operator.itemgetter(2, 0)


class RunValueError(InputError, ValueError):
    """What :func:`~retriever.run_writer.write_run` will not write: a tag, query id or docid that is empty or holds
    whitespace, a score that is not a finite number, a docid repeated within a query. An
    :class:`~ckqti.errors.InputError` (a :class:`~ckqti.errors.CkqtiError`: one line, as the project's other errors),
    and still a ValueError, which it was alone until session 45."""


def check_run_path(path: str | Path, tag: str | None = None, inputs: Mapping[str, str | Path | None] | None = None) -> None:
    """Before any work for a run: ``path`` may be new, empty or an earlier run (which the run
    replaces), never a folder, a path below a file, another kind of file (a queries file, an
    index's manifest) or one of the command's ``inputs`` (what each is -> its path: a run
    reranked); ``tag``, when given, must be a run tag :func:`~retriever.run_writer.write_run` can write."""
    if tag is not None:
        check_token(tag, "run tag")
    path = Path(path)
    if path.is_dir():
        raise InputError("is a directory; a run is written to a file", path)
    check_folder_of(path, "the run")
    if path.exists():
        try:
            next(run_rows(path), None)  # the first line
        except InputError:
            raise InputError("exists and is not a TREC run; a run replaces only a run file", path) from None
    check_not_input(path, dict(inputs or {}))


def trec_order(docs: Ranking) -> list[tuple[str, float]]:
    """``(docid, score)`` pairs sorted by score descending, then docid descending (trec_eval's order:
    scores are compared as trec_eval holds them, in single precision; the pairs keep them whole)."""
    items = docs.items() if isinstance(docs, Mapping) else docs
    pairs = [(str(d), float(s)) for d, s in items]
    held = array("f", [s for _, s in pairs])  # trec_eval's C float (beyond its range: infinity, as there)
    ranked = sorted(((d, s, h) for (d, s), h in zip(pairs, held)), key=_HELD_SCORE_THEN_DOCID, reverse=True)
    return [(docid, score) for docid, score, _ in ranked]


def all_numbers(scores: list) -> bool:
    """Whether every score given in memory is a real number (not text, not a bool, numpy's neither): by the
    scores' few types at once, so a query of 1,000 costs one set, not 1,000 checks."""
    return all(issubclass(kind, numbers.Real) and not issubclass(kind, bool) for kind in set(map(type, scores)))


def check_token(value: str, what: str) -> None:
    """A run's column value: a non-empty string without whitespace (a :class:`RunValueError` otherwise)."""
    if not isinstance(value, str) or not value or WHITESPACE.search(value):
        raise RunValueError(f"{what} {value!r} must be a non-empty string without whitespace")
