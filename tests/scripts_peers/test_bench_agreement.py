"""scripts/bench_search.py's agreement measures: exact up to ties scores 1 whichever tied documents come back."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

REPO = Path(__file__).resolve().parents[2]


def _load_bench():
    name = "ckqti_bench_search"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / "bench_search.py")
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


bench = _load_bench()


def test_ties_broken_the_other_way_count_only_in_the_strict_agreement():
    rng = np.random.default_rng(0)
    dense = rng.integers(0, 4, size=(300, 6)) * (rng.random((300, 6)) < 0.5)  # small impacts: many ties
    csr = sp.csr_matrix(dense)
    csc = csr.tocsc()
    csc.sort_indices()
    queries = [np.array([0, 2, 5]), np.array([1, 3]), np.array([4, 4, 0])]  # a repeated id counts twice
    for q in queries:
        docs = np.arange(300)
        assert np.array_equal(bench.exact_scores_of(csc, q, docs), bench.peer_mod.brute_force_scores(csr, q))
    reference = [bench.peer_mod.brute_force_topk(csr, q, 10) for q in queries]
    swapped, wrong = [], []
    for q, (docs, scores) in zip(queries, reference):
        full = bench.peer_mod.brute_force_scores(csr, q)
        tied = np.flatnonzero(full == scores[-1])
        outside = tied[~np.isin(tied, docs)]
        assert outside.size  # the 10th score is tied beyond the top 10 for these queries
        swapped.append((np.r_[docs[:-1], outside[0]], scores))
        low = np.flatnonzero(full < scores[-1])[0]
        wrong.append((np.r_[docs[:-1], low], scores))
    assert bench.agreement(reference, reference) == 1.0
    assert bench.agreement(swapped, reference) < 1.0
    assert bench.agreement_up_to_ties(swapped, reference, queries, csc) == 1.0
    assert abs(bench.agreement_up_to_ties(wrong, reference, queries, csc) - 0.9) < 1e-12
