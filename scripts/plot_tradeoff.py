"""Plot the NDRM fullrank rows' in-domain gain against their worst zero-shot loss (PNG).

    python scripts/plot_tradeoff.py            # reads docs/results/effectiveness.json

Each point is one learned-index (fullrank) row of ``scripts/effectiveness.py``: x its nDCG@10
gain over BM25 on SciFact test, y its lowest gain over BM25 on the zero-shot collections (TREC
DL subset, Cranfield, Vaswani), labelled with the row's key. The models issue asks for a point
in the shaded corner (x >= +0.03, significant; y >= -0.01). Writes
``docs/results/ndrm_tradeoff.png`` and prints the points as a table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ckqti.errors import InputError  # noqa: E402
from scripts.args import HelpFormatter, existing_file, output_file, run  # noqa: E402

RESULTS = ROOT / "docs" / "results" / "effectiveness.json"
OUT = ROOT / "docs" / "results" / "ndrm_tradeoff.png"
ZERO_SHOT = ("trecdl", "cranfield", "vaswani")


def tradeoff_points(report: dict) -> list[dict]:
    """``[{key, label, scifact, worst, worst_on, p}]`` of every NDRM fullrank row run on SciFact and
    on every zero-shot collection (ORCAS-style rows, SciFact only, drop out)."""
    colls = report["collections"]

    def delta(coll: str, key: str) -> tuple[float, float] | None:
        row = colls.get(coll, {}).get(key)
        if not row or "ttest_vs_bm25" not in row:
            return None
        t = row["ttest_vs_bm25"]["nDCG@10"]
        return t["delta"], t["p"]

    out = []
    for key, row in colls.get("scifact", {}).items():
        if not (key.startswith("ndrm") and key.endswith("-full")):
            continue
        sf, shots = delta("scifact", key), {c: delta(c, key) for c in ZERO_SHOT}
        if sf is None or any(v is None for v in shots.values()):
            continue
        worst_on = min(shots, key=lambda c: shots[c][0])
        out.append({"key": key, "label": row.get("label", key), "scifact": sf[0], "p": sf[1],
                    "worst": shots[worst_on][0], "worst_on": worst_on})
    return out


def plot(points: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5.5))
    xs = [p["scifact"] for p in points] + [0.0, 0.035]
    ys = [p["worst"] for p in points] + [0.0, -0.01]
    x0, x1 = min(xs) - 0.005, max(xs) + 0.008
    y0, y1 = min(ys) - 0.005, max(ys) + 0.005
    ax.add_patch(plt.Rectangle((0.03, -0.01), x1 - 0.03, y1 + 0.01, color="tab:green", alpha=0.12, lw=0))
    ax.axvline(0.03, color="tab:green", ls="--", lw=1)
    ax.axhline(-0.01, color="tab:green", ls="--", lw=1)
    ax.axvline(0.0, color="grey", lw=0.8)
    ax.axhline(0.0, color="grey", lw=0.8)
    for p in points:
        ax.scatter(p["scifact"], p["worst"], s=36, color="tab:blue" if p["p"] < 0.05 else "tab:grey", zorder=3)
        ax.annotate(p["key"].removesuffix("-full"), (p["scifact"], p["worst"]), textcoords="offset points",
                    xytext=(4, 3), fontsize=8)
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_xlabel("SciFact test: nDCG@10 - BM25 (blue: p < 0.05)")
    ax.set_ylabel("worst zero-shot collection: nDCG@10 - BM25")
    ax.set_title("NDRM fullrank rows: in-domain gain vs zero-shot floor\n(target: the shaded corner)")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def read_report(path: Path) -> dict:
    """``scripts/effectiveness.py``'s JSON report.

    Raises:
        InputError: not JSON, or no ``collections`` of rows in it.
    """
    try:
        report = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError("not JSON: --results takes scripts/effectiveness.py's report", path) from None
    colls = report.get("collections") if isinstance(report, dict) else None
    if not isinstance(colls, dict) or not all(isinstance(rows, dict) for rows in colls.values()):
        raise InputError("not an effectiveness report: no 'collections' of rows", path)
    for coll, rows in colls.items():
        for key, row in rows.items():
            test = row.get("ttest_vs_bm25") if isinstance(row, dict) else {}
            if test is None:  # a row without a t-test (BM25's own)
                continue
            ndcg = test.get("nDCG@10") if isinstance(test, dict) else None
            if not (isinstance(ndcg, dict) and all(isinstance(ndcg.get(k), (int, float)) for k in ("delta", "p"))):
                raise InputError(f"row {key!r} of {coll!r} is not a row of the report (a t-test's nDCG@10 delta "
                                 "and p expected)", path)
    return report


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    parser.add_argument("--results", type=existing_file, default=str(RESULTS), help="scripts/effectiveness.py's JSON")
    parser.add_argument("--out", type=output_file, default=str(OUT), help="PNG to write")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    points = tradeoff_points(read_report(args.results))
    print(f"{'row':<16}{'SciFact Δ':>11}{'p':>9}{'worst zero-shot Δ':>19}  on")
    for p in sorted(points, key=lambda p: -p["scifact"]):
        print(f"{p['key']:<16}{p['scifact']:>+11.4f}{p['p']:>9.4f}{p['worst']:>+19.4f}  {p['worst_on']}")
    plot(points, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
