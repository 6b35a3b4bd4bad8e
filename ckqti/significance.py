"""Paired significance tests of one run against another, per measure (t-test and Wilcoxon, from scipy)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ckqti.evaluate import EvalResult

@dataclass(frozen=True)
class SignificanceResult:
    """A paired test of run ``b`` against run ``a``: ``mean_delta`` = mean(b) - mean(a), over ``n`` queries.

    When every difference is 0 the statistic is 0 and the p-value 1; with fewer than 2
    queries both are NaN.
    """

    test: str
    statistic: float
    p_value: float
    mean_delta: float
    n: int


def paired_ttest(
    a: Mapping[str, float] | Sequence[float], b: Mapping[str, float] | Sequence[float]
) -> SignificanceResult:
    """Paired two-sided t-test (``scipy.stats.ttest_rel``) of ``b`` against ``a``; positive statistic: b higher.

    ``a`` and ``b`` are per-query values: two mappings over the same qids, or two sequences of one length.
    """
    from scipy import stats

    x, y = _paired(a, b)
    return _test("t-test", stats.ttest_rel, x, y)


def wilcoxon(a: Mapping[str, float] | Sequence[float], b: Mapping[str, float] | Sequence[float]) -> SignificanceResult:
    """Wilcoxon signed-rank test (``scipy.stats.wilcoxon``, two-sided, zero differences dropped) of ``b`` against ``a``."""
    from scipy import stats

    x, y = _paired(a, b)
    return _test("Wilcoxon", stats.wilcoxon, x, y)


def _paired(
    a: Mapping[str, float] | Sequence[float], b: Mapping[str, float] | Sequence[float]
) -> tuple[list[float], list[float]]:
    if isinstance(a, Mapping) != isinstance(b, Mapping):
        raise ValueError("paired values must be two mappings (qid -> value) or two sequences")
    if isinstance(a, Mapping):
        if a.keys() != b.keys():
            only = sorted(set(a) ^ set(b))
            raise ValueError(f"paired values need the same queries; {len(only)} differ, e.g. {only[:3]}")
        x, y = [float(a[q]) for q in a], [float(b[q]) for q in a]
    else:
        x, y = [float(v) for v in a], [float(v) for v in b]
    if len(x) != len(y):
        raise ValueError(f"paired values need equal lengths, got {len(x)} and {len(y)}")
    return x, y


def _test(name: str, scipy_test: Callable, x: list[float], y: list[float]) -> SignificanceResult:
    """Run ``scipy_test(y, x)``; all-zero differences give (0, p = 1), fewer than 2 pairs give NaNs."""
    if len(x) < 2:
        return SignificanceResult(name, math.nan, math.nan, _mean_delta(x, y), len(x))
    if all(u == v for u, v in zip(x, y)):
        return SignificanceResult(name, 0.0, 1.0, 0.0, len(x))
    with warnings.catch_warnings():  # constant differences: scipy warns, then returns t = inf, p = 0
        warnings.simplefilter("ignore", RuntimeWarning)
        result = scipy_test(y, x)
    return SignificanceResult(name, float(result.statistic), float(result.pvalue), _mean_delta(x, y), len(x))


def _mean_delta(x: list[float], y: list[float]) -> float:
    return math.fsum(v - u for u, v in zip(x, y)) / len(x) if x else math.nan


@dataclass(frozen=True)
class Comparison:
    """One measure of run ``b`` against run ``a``: both tests. ``run``: ``b``'s place among a report's
    runs (``a`` is the first)."""

    measure: str
    ttest: SignificanceResult
    wilcoxon: SignificanceResult
    run: int = 1


def compare_results(a: EvalResult, b: EvalResult, run: int = 1) -> tuple[Comparison, ...]:
    """Paired t-test and Wilcoxon test of ``b`` against ``a`` on every measure they share."""
    shared = [m for m in a.measures if m in b.measures]
    return tuple(
        Comparison(m, paired_ttest(a.values(m), b.values(m)), wilcoxon(a.values(m), b.values(m)), run) for m in shared
    )
