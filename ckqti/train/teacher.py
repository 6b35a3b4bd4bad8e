"""A teacher's scores for distillation (``{"teacher": id, "scores": {qid: {docid: score}}}``), read and checked."""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ckqti.errors import InputError


def read_teacher(path: str | Path, index: Mapping[str, int], train_qrels: Mapping[str, Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Teacher scores of training queries only (a dev query's never reach training): ``qid -> (indices, scores)``.

    Raises:
        InputError: an unreadable file, a query whose scores are not a ``{docid: number}`` object, a
            score that is not a finite float32 (NaN, or 1e300, would train a NaN model), or no training query
            with two scored documents.
    """
    from indexer.readers.formats import open_binary

    try:
        with open_binary(path) as raw:  # gzip by its magic bytes, whatever the name
            scores = json.loads(raw.read().decode("utf-8-sig"))["scores"]  # a leading BOM (Windows tools) is no text
        items = scores.items()
    except (EOFError, zlib.error) as err:  # a gzip stream cut short (click would show EOFError as "Aborted!")
        raise InputError(f"corrupt gzip data ({err})", path) from None
    except RecursionError:  # "[[[[..." thousands deep
        raise InputError("not a teacher scores file (JSON nested too deeply)", path) from None
    except (KeyError, TypeError, AttributeError):  # JSON of another shape: a message such as "list indices must be integers"
        raise InputError('not a teacher scores file: expected a JSON object {"scores": {qid: {docid: score}}}, '
                         "as scripts/teacher_scores.py writes", path) from None
    except (OSError, ValueError) as err:
        raise InputError(f"not a teacher scores file ({err})", path) from err
    out = {}
    for qid, docs in items:
        if not isinstance(docs, dict):
            raise InputError(f"query {qid!r}: scores must be an object of docid -> score, found {type(docs).__name__}", path)
        bad = next(((d, s) for d, s in docs.items() if not _teacher_score(s)), None)
        if bad is not None:
            raise InputError(f"query {qid!r}, document {_short(bad[0])}: score {_short(bad[1])} is not a finite "
                             "number of at most 3.4e38 in size (training holds float32 scores)", path)
        known = [(index[d], float(s)) for d, s in docs.items() if d in index]
        if qid in train_qrels and len(known) >= 2:
            out[qid] = (np.array([i for i, _ in known], dtype=np.int64), np.array([s for _, s in known], np.float32))
    if not out:
        raise InputError("the teacher scored no training query of this corpus", path)
    return out


FLOAT32_MAX = float(np.finfo(np.float32).max)


def _teacher_score(value: Any) -> bool:
    """Whether ``value`` is a number that training can hold: finite as a 32-bit float (``1e300`` is
    finite in JSON but infinite as the ``float32`` scores train on; an integer of 40 digits is no
    float at all)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return abs(float(value)) <= FLOAT32_MAX  # False for NaN too
    except OverflowError:
        return False


def _short(value: Any) -> str:
    """``repr(value)``, cut to 40 characters (a teacher's score may be an integer of thousands of digits)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
