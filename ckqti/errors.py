"""The one error type users see: a message naming the file and, where known, the line."""

from __future__ import annotations

from dataclasses import dataclass
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


class QueryError(CkqtiError):
    """A query that cannot be searched (empty, all stopwords, ...)."""


@dataclass(frozen=True)
class Location:
    path: str
    line: int
