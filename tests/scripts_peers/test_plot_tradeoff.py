"""scripts/plot_tradeoff.py: which rows become points, and the plot file."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("ckqti_plot_tradeoff_script", REPO / "scripts" / "plot_tradeoff.py")
plot_tradeoff = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plot_tradeoff)


def row(delta, p=0.01):
    return {"label": "x", "ttest_vs_bm25": {"nDCG@10": {"delta": delta, "p": p}}}


def test_points_are_fullrank_ndrm_rows_with_every_collection_and_their_worst_zero_shot(tmp_path):
    report = {"collections": {
        "scifact": {"bm25": {}, "ndrm3-full": row(0.033, 0.001), "ndrm3-orcas-full": row(0.15),
                    "ndrm3-rerank": row(0.03), "ndrm3f-full": row(0.017, 0.04)},
        "trecdl": {"ndrm3-full": row(0.004), "ndrm3f-full": row(0.005)},
        "cranfield": {"ndrm3-full": row(-0.009), "ndrm3f-full": row(-0.006)},
        "vaswani": {"ndrm3-full": row(-0.022), "ndrm3f-full": row(-0.010)},
    }}
    points = {p["key"]: p for p in plot_tradeoff.tradeoff_points(report)}
    assert set(points) == {"ndrm3-full", "ndrm3f-full"}  # the ORCAS row has no zero-shot runs, rerank is not fullrank
    assert points["ndrm3-full"] == {"key": "ndrm3-full", "label": "x", "scifact": 0.033, "p": 0.001, "worst": -0.022,
                                    "worst_on": "vaswani"}
    plot_tradeoff.plot(list(points.values()), tmp_path / "t.png")
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_row_missing_one_zero_shot_collection_is_no_point():
    """The worst zero-shot loss is over all three collections: a row not run on one of them has none."""
    report = {"collections": {"scifact": {"ndrm3-full": row(0.04)}, "trecdl": {"ndrm3-full": row(0.01)},
                              "cranfield": {"ndrm3-full": row(0.02)}}}
    assert plot_tradeoff.tradeoff_points(report) == []
    report["collections"]["vaswani"] = {"ndrm3-full": row(0.005, p=0.3)}
    (point,) = plot_tradeoff.tradeoff_points(report)
    assert (point["worst"], point["worst_on"]) == (0.005, "vaswani")  # the lowest delta, whatever its p
