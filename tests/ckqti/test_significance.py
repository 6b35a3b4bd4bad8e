"""Paired t-test and Wilcoxon on known vectors, on mappings, and on degenerate input."""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats

from ckqti.significance import paired_ttest, wilcoxon


def test_paired_ttest_on_known_vectors():
    a, b = [1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 5.0, 9.0]  # differences 1, 2, 2, 5: mean 2.5, sd sqrt(3)
    result = paired_ttest(a, b)
    t = 2.5 / (math.sqrt(3) / math.sqrt(4))
    assert result.statistic == pytest.approx(t)
    assert result.p_value == pytest.approx(2 * stats.t.sf(t, df=3))
    assert (result.mean_delta, result.n, result.test) == (2.5, 4, "t-test")
    assert paired_ttest(b, a).statistic == pytest.approx(-t)
    reference = stats.ttest_rel(b, a)
    assert (result.statistic, result.p_value) == pytest.approx((reference.statistic, reference.pvalue))


def test_wilcoxon_on_known_vectors():
    a, b = [0.0] * 5, [1.0, 2.0, 3.0, 4.0, 5.0]  # all differences positive: W = 0, exact p = 2 / 2**5
    result = wilcoxon(a, b)
    assert (result.statistic, result.p_value, result.mean_delta, result.n) == (0.0, pytest.approx(0.0625), 3.0, 5)
    rng = random.Random(3)
    x = [rng.random() for _ in range(30)]
    y = [v + rng.gauss(0.05, 0.1) for v in x]
    reference = stats.wilcoxon(y, x)
    assert (wilcoxon(x, y).statistic, wilcoxon(x, y).p_value) == pytest.approx((reference.statistic, reference.pvalue))


def test_significance_on_mappings_and_degenerate_input():
    a, b = {"q1": 0.1, "q2": 0.5, "q3": 0.2}, {"q3": 0.3, "q1": 0.4, "q2": 0.5}  # aligned by qid, not by order
    assert paired_ttest(a, b).mean_delta == pytest.approx((0.3 + 0.0 + 0.1) / 3)
    same = paired_ttest(a, dict(a))
    assert (same.statistic, same.p_value, same.mean_delta) == (0.0, 1.0, 0.0)
    assert wilcoxon(a, dict(a)).p_value == 1.0
    with pytest.raises(ValueError):
        paired_ttest(a, {"q1": 0.1, "q2": 0.5})
    with pytest.raises(ValueError):
        wilcoxon([1.0, 2.0], [1.0])
    one = paired_ttest([1.0], [2.0])
    assert math.isnan(one.statistic) and math.isnan(one.p_value) and (one.mean_delta, one.n) == (1.0, 1)
    constant = paired_ttest([0.0, 0.1, 0.2], [0.5, 0.6, 0.7])  # zero variance of the differences
    assert constant.mean_delta == pytest.approx(0.5) and constant.p_value < 0.05


def test_paired_tests_pair_mappings_by_query_and_need_two_queries():
    """Mappings listed in other orders are paired by qid (not by position), and a test on one query
    has no p-value (NaN; scipy's Wilcoxon would say 1.0)."""
    a = {"q1": 0.1, "q2": 0.5, "q3": 0.2, "q4": 0.9}
    b = {"q4": 0.7, "q3": 0.6, "q1": 0.3, "q2": 0.55}
    x, y = [a[q] for q in a], [b[q] for q in a]
    for test, reference in ((paired_ttest, stats.ttest_rel), (wilcoxon, stats.wilcoxon)):
        assert test(a, b).p_value == pytest.approx(reference(y, x).pvalue)
        one = test({"q1": 0.1}, {"q1": 0.3})
        assert math.isnan(one.statistic) and math.isnan(one.p_value) and one.mean_delta == pytest.approx(0.2)
