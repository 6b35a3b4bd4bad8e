"""A query's terms and the integer weights the kernels run it with.

A query term ``t`` that occurs ``n`` times weighs channel ``c`` of ``t`` (posting list
``t * C + c``) by the real factor ``f = n * step_c * idf_t`` (``"idf"`` channels, idf from the
index's current df and document count) or ``n * step_c`` (``"one"`` channels), times the
channel's query-time weight (``Searcher(channel_weights=...)``; 0: ``f = 0``, the list is not
read). The kernels add integers, so factors become integer weights ``w = round(f / unit)`` with
``unit = max f / resolution``; a factor that rounds to 0 keeps weight 1 unless its whole list
adds less than one unit (``255 f < unit``), then it is dropped. A hit's score is
``integer score * unit + sum of the query terms' offsets``. An index with a single ``"one"``
channel (NDRM1, and ``write_prebuilt_index``'s) is searched with ``w = n`` and
``unit = step``, exactly. (:meth:`retriever.search.Searcher.plan` makes a :class:`QueryPlan`.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ckqti.errors import is_real

MAX_QUERY_TERMS = 1024

# the most a query's integer weights add up to: the kernels' histogram has an entry per score a document can
# reach (weights x 255; 134 MB at this bound), and the uint32 accumulators overflow past 16.8 million of weight.
# A one-channel query weighs a term by its count, so only a query of more than 65,536 term occurrences is past
# it (a multi-channel one, of at least 512 lists near the largest weight): see QueryPlan.within_bound
MAX_QUERY_WEIGHT = 1 << 16

RESOLUTION = 128  # the largest query weight; see docs/INDEX.md for the measured trade-off

# A channel weight is 0 or within these: beyond them a query's real weights overflow to infinity
# (scores inf, JSON's Infinity) or underflow below a representable unit (weights that are not integers)
CHANNEL_WEIGHT_MIN, CHANNEL_WEIGHT_MAX = 1e-6, 1e6



@dataclass(frozen=True)
class ParsedQuery:
    terms: np.ndarray  # int64 distinct term ids
    weights: np.ndarray  # int64 counts
    known: list[str]
    oov: list[str]



@dataclass(frozen=True)
class QueryPlan:
    """What the kernels run for one query: posting list ids, their integer weights, the real
    value of one integer score unit, and the constant added to every score (offsets)."""

    lists: np.ndarray  # int64 distinct list ids
    weights: np.ndarray  # int64 > 0
    unit: float
    base: float = 0.0

    def within_bound(self) -> QueryPlan:
        """This plan, or, when its weights add up past :data:`MAX_QUERY_WEIGHT`, one whose weights are scaled
        down to it (each kept >= 1) and whose unit is scaled up by as much: the same scores to within one
        unit of weight per list (a query of 100,000 occurrences of one word and one of another ranks as
        exactly weighted), for scratch memory that stays bounded."""
        total = sum(self.weights.tolist())  # a Python sum: numpy's costs ~0.8 us on a few weights, ~0.1 this
        if total <= MAX_QUERY_WEIGHT:
            return self
        scale = MAX_QUERY_WEIGHT / total
        weights = np.maximum(np.floor(self.weights * scale), 1).astype(np.int64)
        return QueryPlan(self.lists, weights, self.unit / scale, self.base)

    def held(self, vals):
        """Integer scores ``vals`` (an int64 array or one) as trec_eval holds a run's scores, a C float
        (float32): scores that differ beyond single precision tie there, so a ranking breaks their tie
        by docid as well (a channel weighted very little makes a unit that small beside the offsets)."""
        return np.float32(vals * self.unit + self.base)

    @cached_property
    def ties(self):
        """:meth:`held`, or None where single precision keeps every integer score this plan can give apart
        (a unit above twice a float's spacing at the largest score): the integers then rank the same, for
        no float conversion of every hit's score (SciFact's claims over the NDRM3 index all rank so)."""
        top = float(self.weights.sum()) * 255 * self.unit + abs(self.base)
        return None if self.unit > 2 * float(np.spacing(np.float32(top))) else self.held



def channel_weight_problem(name: str, w) -> str | None:
    """What is wrong with weight ``w`` of channel ``name`` (None: nothing): not a finite number >= 0, or
    neither 0 nor within [:data:`CHANNEL_WEIGHT_MIN`, :data:`CHANNEL_WEIGHT_MAX`]."""
    if not is_real(w) or not (np.isfinite(w) and w >= 0):
        return f"channel weight {name!r} must be a finite number >= 0, got {w!r}"
    if w != 0 and not CHANNEL_WEIGHT_MIN <= w <= CHANNEL_WEIGHT_MAX:
        return (f"channel weight {name!r} must be 0 or between {CHANNEL_WEIGHT_MIN:g} and {CHANNEL_WEIGHT_MAX:g} "
                f"(only the channels' ratio changes a ranking), got {w!r}")
    return None


def channel_multipliers(names: tuple[str, ...], weights: Mapping[str, float] | None) -> np.ndarray:
    """float64 [C] multipliers of an index's channels (named by their weighting) from ``weights``:
    each 0 (the channel's lists are not read) or within [:data:`CHANNEL_WEIGHT_MIN`,
    :data:`CHANNEL_WEIGHT_MAX`], not all 0."""
    mult = np.ones(len(names))
    if weights is not None and not isinstance(weights, Mapping):
        raise ValueError(f"channel weights must be a mapping of channel name to weight, got {type(weights).__name__}")
    for name, w in (weights or {}).items():
        hits = [i for i, n in enumerate(names) if n == name]
        if len(hits) != 1:
            raise ValueError(f"channel weight {name!r}: the index's channels are {list(names)}")
        if problem := channel_weight_problem(name, w):
            raise ValueError(problem)
        mult[hits[0]] = float(w)
    if names and not mult.any():
        raise ValueError(f"channel weights are all 0 (the index's channels are {list(names)}): nothing would score")
    return mult
