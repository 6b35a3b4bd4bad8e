"""Text analysis shared by indexing and querying.

Lower-case, every non-alphanumeric character to a space, stopwords removed, Krovetz
stemming (the ``krovetzstemmer`` package, a binding of the Lemur/Indri C++ stemmer), as in the
NDRM reference pipeline. The analyzer is a frozen dataclass: its ``to_dict`` goes into
every index manifest, and an index is only searched with an equal analyzer.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

# A classic English stopword list (the SMART/Lucene core plus common function words).
ENGLISH_STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves
    """.split()
)

_NON_ALNUM = re.compile(r"[^0-9a-z]+")
# Each byte of UTF-8 text that is not an ASCII digit or lower-case letter made a space: every byte of a
# non-ASCII character is >= 0x80, so a run of the bytes kept is a run of the characters _NON_ALNUM keeps.
_ALNUM_BYTES = bytes(b if chr(b) in "0123456789abcdefghijklmnopqrstuvwxyz" else 0x20 for b in range(256))
PREFIX_CHARS_PER_TERM = 12  # Analyzer.prefix's first chunk: English text has ~7-9 characters an analyzed term


def alphanumeric_words(text: str) -> list[str]:
    """The runs of ASCII digits and lower-case letters in ``text``: :meth:`Analyzer.words` of text
    already lower-cased, every term an analyzer makes from it and its stopwords (the unit ORCAS's
    2,000-term cap counts, :func:`indexer.readers.orcas_field`)."""
    return text.encode("utf-8", "surrogatepass").translate(_ALNUM_BYTES).decode("ascii").split()


@dataclass(frozen=True)
class Analyzer:
    """Turns text into index terms.

    Args:
        stemmer: ``"krovetz"`` or ``"none"``.
        stopwords: ``"english"`` or ``"none"``.
        lowercase: lower-case before splitting (always true in the published pipeline).
    """

    stemmer: str = "krovetz"
    stopwords: str = "english"
    lowercase: bool = True
    _cache: dict = field(default_factory=dict, compare=False, repr=False, hash=False)

    def __post_init__(self) -> None:
        if self.stemmer not in ("krovetz", "none"):
            raise ValueError(f"unknown stemmer {self.stemmer!r}; this ckqti has 'krovetz' and 'none'")
        if self.stopwords not in ("english", "none"):
            raise ValueError(f"unknown stopword list {self.stopwords!r}; this ckqti has 'english' and 'none'")
        stem = None
        if self.stemmer == "krovetz":
            import krovetzstemmer

            stem = krovetzstemmer.Stemmer().stem
        object.__setattr__(self, "_stem", stem)
        object.__setattr__(self, "_stop", ENGLISH_STOPWORDS if self.stopwords == "english" else frozenset())

    def words(self, text: str) -> list[str]:
        """Lower-cased alphanumeric tokens, stopwords kept: the non-empty pieces of ``_NON_ALNUM.split``,
        found as the bytes that ``_ALNUM_BYTES`` keeps (half the time of the regular expression; a lone
        surrogate, which UTF-8 cannot hold, is encoded as three bytes >= 0x80 and so is a separator too)."""
        return alphanumeric_words(text.lower() if self.lowercase else text)

    def tokens(self, text: str) -> list[str]:
        """Lower-cased alphanumeric tokens with stopwords removed (not yet stemmed)."""
        stop = self._stop
        return [t for t in self.words(text) if t not in stop]

    def stem(self, token: str) -> str:
        if self._stem is None:
            return token
        hit = self._cache.get(token)
        if hit is None:
            hit = self._stem(token)
            if len(self._cache) < 1_000_000:
                self._cache[token] = hit
        return hit

    def __call__(self, text: str) -> list[str]:
        """Analyze ``text`` into a list of terms, in document order."""
        stem = self.stem
        return [stem(t) for t in self.tokens(text)]

    def prefix(self, text: str, n: int | None) -> list[str]:
        """``self(text)[:n]``, analyzing no more of ``text`` than that needs (a model that reads a
        document's first 200 terms need not stem its other 2,000): chunks of growing size, each
        cut at a separator so that no token spans two chunks. ``n=None``: the whole text."""
        if n is None:
            return self(text)
        if self.lowercase:
            text = text.lower()
        out: list[str] = []
        pos, size = 0, max(PREFIX_CHARS_PER_TERM * n, 64)
        while pos < len(text) and len(out) < n:
            cut = len(text)
            if pos + size < len(text):
                sep = _NON_ALNUM.search(text, pos + size)
                cut = sep.start() if sep else len(text)
            out += self(text[pos:cut])  # already lower-cased, which a second time leaves as it is
            pos, size = cut, 2 * size
        return out[:n]

    def to_dict(self) -> dict:
        return {"stemmer": self.stemmer, "stopwords": self.stopwords, "lowercase": self.lowercase}

    @classmethod
    def from_dict(cls, d: dict) -> "Analyzer":
        return cls(stemmer=d["stemmer"], stopwords=d["stopwords"], lowercase=d["lowercase"])


def past_marks(text: str, end: int, limit: int | None = None) -> int:
    """``end`` moved past the combining marks that follow it (not beyond ``limit``): a span ending
    at ``cafe`` of a decomposed ``cafe\u0301`` takes the accent too, so that a highlight does not
    leave it to sit on the closing bracket or the next character."""
    limit = len(text) if limit is None else min(limit, len(text))
    while end < limit and unicodedata.category(text[end]).startswith("M"):
        end += 1
    return end


def non_ascii_readings(text: str, analyzer: Analyzer) -> list[tuple[str, list[str]]]:
    """The words of ``text`` (runs of non-whitespace) holding a letter or digit outside ASCII, each
    with the terms ``analyzer`` reads of it: the analyzer keeps ASCII letters and digits only, so
    ``résumé`` is read as ``r sum`` and ``日本`` as nothing (what a search note tells the user)."""
    return [(w, analyzer(w)) for w in dict.fromkeys(text.split()) if any(ord(c) > 127 and c.isalnum() for c in w)]
