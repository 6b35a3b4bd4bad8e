"""The hand-made run and qrels and the data paths shared by the evaluation tests (test_evaluate.py, test_measures.py)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / ".." / "shared" / "data"

# One query, three documents, graded: d1 grade 2, d2 judged non-relevant, d3 grade 1.
QRELS = {"q1": {"d1": 2, "d2": 0, "d3": 1}}
RUN = {"q1": {"d3": 3.0, "d1": 2.0, "d2": 1.0}}
