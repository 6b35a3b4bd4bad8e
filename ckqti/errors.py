"""The one error type users see: a message naming the file and, where known, the line."""

from __future__ import annotations

import numbers
import re
import reprlib
from pathlib import Path


class CkqtiError(Exception):
    """A user-facing error; the CLI prints ``str(err)`` on one line and exits non-zero."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        super().__init__(self.format())

    def format(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path if self.line is None else f"{self.path}:{self.line}"
            where += ": "
        return f"{where}{self.message}".replace("\n", " ")


class InputError(CkqtiError):
    """Malformed corpus, query or qrels input."""


class IndexFormatError(CkqtiError):
    """A missing, corrupt or mismatched index."""


class IndexClosedError(CkqtiError):
    """An index read after :meth:`retriever.index.Index.close` (its files are no longer mapped)."""


class DiskFullError(CkqtiError):
    """No space left on the device (or over quota) while writing a file, which the message names."""


class OptionError(CkqtiError):
    """Options that do not apply to the model asked for, or do not combine. ``options`` are the
    keyword arguments the message names; the CLI shows them as its flags (:meth:`as_flags`)."""

    def __init__(self, message: str, options: tuple[str, ...] = ()):
        self.options = tuple(options)
        super().__init__(message)

    def as_flags(self) -> str:
        """The message with each named option written as the CLI's flag (``dev_qrels`` -> ``--dev-qrels``)
        where it first appears: a later "model" may be the plain word."""
        message = self.message
        for name in sorted(self.options, key=len, reverse=True):
            message = re.sub(rf"(?<![\w-])({re.escape(name)})\b", lambda m: "--" + m.group(1).replace("_", "-"),
                             message, count=1)
        return message


class QueryError(CkqtiError):
    """A query that cannot be searched (empty, all stopwords, ...)."""


def option_count(value, name: str, least: int = 1) -> int:
    """``value`` as an ``int`` when it is an integer (numpy's too) of at least ``least``, else an
    :class:`OptionError` naming ``name``: what the CLI's integer flags check, for Python callers."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
        raise OptionError(f"{name} must be an integer >= {least}, got {value!r}", (name,))
    return int(value)


def is_real(value) -> bool:
    """A real number, not a bool. A check of its own: ``isinstance(x, numbers.Real)`` on a value
    annotated ``float`` reads to type checkers as always false (float is not a ``numbers.Real``
    subclass to them), and the code after it as unreachable, left unchecked."""
    return not isinstance(value, bool) and isinstance(value, numbers.Real)


def is_id(value) -> bool:
    """Whether a query id or docid given in memory (a dict's key, a list's item) is one: a string, or an integer
    (Python's or numpy's; not a bool), read as its digits (:func:`id_text`), as a JSON line's integer id is. The
    in-memory readers of queries, documents, candidates, runs and qrels take the same ids."""
    return _id_type(type(value))


def all_ids(values) -> bool:
    """Whether every one of ``values`` :func:`is_id`: by their few types at once (a run's 1,000 docids: one set)."""
    return all(map(_id_type, set(map(type, values))))


def _id_type(kind: type) -> bool:
    """Whether values of type ``kind`` are ids (:func:`is_id`)."""
    return issubclass(kind, str) or (issubclass(kind, numbers.Integral) and not issubclass(kind, bool))


def id_text(value) -> str:
    """An id that :func:`is_id` as text: a string as it is (numpy's ``str_`` as ``str``), an integer as its digits."""
    return str(value) if isinstance(value, str) else str(int(value))


def id_type_message(value, what: str) -> str:
    """Why ``value`` is no ``what`` (``"docid"``, ``"query id"``): it is neither a string nor an integer."""
    return f"a {what} must be a string or an integer, found {type(value).__name__} {reprlib.repr(value)}"
