"""Where TKL's (and IDCM's) top regions fall: in long documents with a planted relevant text, and in real ones.

    python scripts/region_positions.py --tkl TKL.pt [--idcm IDCM.pt] [--model NAME=PATH ...] [--collections scifact,trecdl] [--out out/]

The regions are the ones ``ckqti explain`` shows (:func:`ckqti.explain.explain_text`): TKL's three
picked saturation windows (30 analyzed terms each), IDCM's ``sample_n`` windows chosen by its
selector, ranked by the cross-encoder's window score. Positions are in analyzed terms for every
model (IDCM's WordPiece regions are mapped through their characters).

1. **Planted.** As in ``scripts/long_documents.py``'s depth experiment (the same queries and the
   same way of planting): each query's relevant text is planted at depths 0 ... 4,000 of a 4,500-term
   document of non-judged texts. For every depth the model explains that document; a region
   *hits* when its characters overlap the planted text. Reported per depth: the share of queries
   whose best region hits (hit@1) and whose any region hits (hit@any), and a scatter of every
   region's start against the depth (plot row 1): a model that finds its evidence where the
   relevant text is puts its regions on the diagonal band; one that reads the first ``cap``
   terms only cannot go past its cap.
2. **Natural.** For each query's first relevant document, as it is in the collection, every
   region's start as a share of the document's length, by region rank (plot row 3, a histogram):
   where in a real relevant document the evidence sits (seed paper 000 shows the same for TREC
   DL 2019 documents).

Writes ``region_positions.png`` and ``region_positions.json`` under ``--out``, and prints the hit
rates per depth as a markdown table.
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ckqti.explain import Region, explain_text  # noqa: E402
from ckqti.models.checkpoint import Checkpoint  # noqa: E402
from ckqti.models.inputs import TokenSpan, analyzed_spans  # noqa: E402
from ckqti.models.reranker import Reranker  # noqa: E402
from ckqti.text import Analyzer  # noqa: E402
from scripts.args import (  # noqa: E402
    HelpFormatter,
    existing_file,
    names_from,
    output_dir,
    positive_int,
    run,
    torch_device,
)
from scripts.long_documents import (  # noqa: E402
    BM25,
    COLLECTIONS,
    LongDocConfig,
    QuerySetup,
    Source,
    TermCutter,
    depth_table,
    load_checked,
    load_rerankers,
    load_source,
    named_paths,
    plant_span,
    query_setups,
)


def overlaps(region: Region, span: tuple[int, int]) -> bool:
    """Whether a region's characters overlap ``[span[0], span[1])``."""
    return region.char_start < span[1] and span[0] < region.char_end


def region_terms(regions: Sequence[Region], spans: Sequence[TokenSpan]) -> list[tuple[int, int]]:
    """Each region as the analyzed terms ``[first, last]`` (inclusive) whose characters it overlaps,
    given every term's span (ascending); ``last = first - 1`` for a region holding none (an IDCM
    window of stopwords and punctuation only). An IDCM region starting on a WordPiece token that is
    no term (a stopword, a comma) starts at the next term, not at the one before it."""
    starts, ends = [s.start for s in spans], [s.end for s in spans]
    return [(bisect.bisect_right(ends, r.char_start), bisect.bisect_left(starts, r.char_end) - 1) for r in regions]


def planted_regions(setup: QuerySetup, source: Source, cutter: TermCutter, models: Mapping[str, Reranker],
                    config: LongDocConfig) -> dict[str, list[dict]]:
    """Per model and depth: the planted text's terms, every region's terms and whether it hits."""
    query = source.queries[setup.qid]
    planted_terms = cutter.terms(setup.relevant)
    out: dict[str, list[dict]] = {name: [] for name in models}
    for depth in config.depths:  # the same filler (pool position 0) around the planted text at every depth
        text, _, span = plant_span(cutter, setup.relevant, depth, config.total_terms, setup.filler, 0)
        spans = analyzed_spans(cutter.analyzer, text)
        for name, rr in models.items():
            regions = explain_text(rr, query, setup.qid, text).regions
            out[name].append({"depth": depth, "planted": [depth, depth + planted_terms - 1],
                              "regions": region_terms(regions, spans),
                              "hits": [overlaps(r, span) for r in regions]})
    return out


def natural_regions(source: Source, models: Mapping[str, Reranker], analyzer: Analyzer,
                    qids: Sequence[str]) -> dict[str, list[dict]]:
    """Per model, for each query's first relevant document: its length and every region's start
    as a share of that length (by region rank)."""
    out: dict[str, list[dict]] = {name: [] for name in models}
    for qid in qids:
        docid = source.relevant[qid][0]
        text = source.docs[docid]
        spans = analyzed_spans(analyzer, text)
        if not spans:
            continue
        for name, rr in models.items():
            regions = explain_text(rr, source.queries[qid], docid, text).regions
            terms = region_terms(regions, spans)
            out[name].append({"qid": qid, "docid": docid, "length": len(spans),
                              "relative_starts": [first / len(spans) for first, _ in terms]})
    return out


def hit_rates(records: Sequence[Sequence[dict]], depths: Sequence[int]) -> dict[str, list[float]]:
    """hit@1 and hit@any per depth over queries (``records[query][depth]``)."""
    if not len(records):
        return {"hit@1": [0.0] * len(depths), "hit@any": [0.0] * len(depths)}
    first = np.array([[bool(r["hits"][:1] and r["hits"][0]) for r in per_q] for per_q in records], dtype=float)
    anyhit = np.array([[any(r["hits"]) for r in per_q] for per_q in records], dtype=float)
    return {"hit@1": first.mean(0).tolist(), "hit@any": anyhit.mean(0).tolist()}


def natural_summary(records: Sequence[dict]) -> dict[str, float]:
    """Where the best region of a real relevant document starts: the share in the document's first
    and last tenth, and the mean relative start."""
    firsts = np.array([r["relative_starts"][0] for r in records if r["relative_starts"]], dtype=float)
    if not firsts.size:
        return {"first_tenth": 0.0, "last_tenth": 0.0, "mean": 0.0, "documents": 0}
    return {"first_tenth": float((firsts < 0.1).mean()), "last_tenth": float((firsts >= 0.9).mean()),
            "mean": float(firsts.mean()), "documents": int(firsts.size)}


def run_source(source: Source, models: Mapping[str, Reranker], config: LongDocConfig,
               analyzer: Analyzer | None = None, natural_queries: int = 300, progress: bool = False) -> dict:
    """Both experiments on one collection (the planted one on ``config.queries`` queries)."""
    analyzer = analyzer or Analyzer()
    cutter = TermCutter(analyzer, source.docs)
    setups = query_setups(source, BM25(source.docs, analyzer), config, 0)
    planted: dict[str, list[list[dict]]] = {m: [] for m in models}
    for i, setup in enumerate(setups):
        for m, recs in planted_regions(setup, source, cutter, models, config).items():
            planted[m].append(recs)
        if progress:
            print(f"{source.name}: planted, query {i + 1}/{len(setups)}", flush=True)
    natural = natural_regions(source, models, analyzer, sorted(source.queries)[:natural_queries])
    return {
        "queries": [s.qid for s in setups],
        "planted": planted,
        "hit_rates": {m: hit_rates(recs, config.depths) for m, recs in planted.items()},
        "natural": natural,
        "natural_summary": {m: natural_summary(recs) for m, recs in natural.items()},
    }


def plot(results: Mapping[str, dict], config: LongDocConfig, caps: Mapping[str, int], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    models = list(next(iter(results.values()))["planted"])
    fig, axes = plt.subplots(3, len(names), figsize=(6.5 * len(names), 13), squeeze=False)
    markers = ("o", "s", "^", "D", "v")
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for col, name in enumerate(names):
        res = results[name]
        ax = axes[0][col]
        for mi, model in enumerate(models):
            for per_q in res["planted"][model]:
                for rec in per_q:
                    for rank, (first, _) in enumerate(rec["regions"]):
                        x = rec["depth"] + (mi - (len(models) - 1) / 2) * 40 + rank * 12
                        ax.scatter(x, first, s=10, marker=markers[rank % len(markers)], color=colours[mi],
                                   alpha=0.5, label=f"{model} region {rank + 1}" if per_q is res["planted"][model][0]
                                   and rec is per_q[0] else None)
        spans = [rec["planted"] for per_q in next(iter(res["planted"].values())) for rec in per_q]
        width = float(np.median([b - a + 1 for a, b in spans])) if spans else 0.0
        d = np.array(config.depths, dtype=float)
        ax.fill_between(d, d, d + width, color="grey", alpha=0.25, label="planted text (median length)")
        for mi, model in enumerate(models):
            if caps.get(model):
                ax.axhline(caps[model], color=colours[mi], lw=0.8, ls=":")
        ax.set(title=f"{name}: region starts vs. depth of the planted relevant text",
               xlabel="depth of the planted text (analyzed terms)", ylabel="region start (analyzed terms)")
        ax.legend(fontsize=7, ncol=2)
        ax = axes[1][col]
        for mi, model in enumerate(models):
            rates = res["hit_rates"][model]
            ax.plot(config.depths, rates["hit@1"], marker="o", color=colours[mi], label=f"{model}: best region")
            ax.plot(config.depths, rates["hit@any"], marker="s", ls="--", color=colours[mi], label=f"{model}: any region")
        ax.set(title=f"{name}: share of queries whose regions fall on the planted text",
               xlabel="depth of the planted text (analyzed terms)", ylabel="share of queries", ylim=(-0.05, 1.05))
        ax.legend(fontsize=8)
        ax = axes[2][col]
        bins = np.linspace(0, 1, 11)
        for mi, model in enumerate(models):
            recs = res["natural"][model]
            ranks = max((len(r["relative_starts"]) for r in recs), default=0)
            for rank in range(ranks):
                xs = [r["relative_starts"][rank] for r in recs if len(r["relative_starts"]) > rank]
                ax.hist(xs, bins=bins, histtype="step", lw=1.5, color=colours[mi], ls=("-", "--", ":", "-.")[rank % 4],
                        label=f"{model} region {rank + 1} ({len(xs)})")
        lengths = [r["length"] for r in next(iter(res["natural"].values()), [])]
        ax.set(title=f"{name}: region starts in relevant documents (median {np.median(lengths or [0]):.0f} terms)",
               xlabel="region start / document length", ylabel="regions")
        ax.legend(fontsize=8)
    fig.tight_layout()
    png = out / "region_positions.png"
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return png


def table(results: Mapping[str, dict], config: LongDocConfig) -> str:
    lines = []
    for name, res in results.items():
        cells = {m: [f"{a:.2f} / {b:.2f}" for a, b in zip(r["hit@1"], r["hit@any"])] for m, r in res["hit_rates"].items()}
        lines += depth_table(f"{name}: share of queries whose best / any region falls on the planted text, by depth",
                             config.depths, cells)
        lines.append(f"\n{name}: best region of each query's first relevant document, share starting in its first / last tenth")
        for model, summ in res["natural_summary"].items():
            lines.append(f"- {model}: {summ['first_tenth']:.2f} / {summ['last_tenth']:.2f} "
                         f"(mean relative start {summ['mean']:.2f}, {summ['documents']} documents)")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, dict[str, str | None],
                                                      dict[str, Checkpoint]]:
    """The options, the checkpoints' paths by name and the checkpoints loaded; a bad value is a usage
    error here, before any work."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--tkl", type=existing_file, default=None, help="TKL checkpoint")
    ap.add_argument("--idcm", type=existing_file, default=None, help="IDCM checkpoint")
    ap.add_argument("--model", action="append", default=[], metavar="NAME=PATH",
                    help="another TKL or IDCM checkpoint under its own name (repeatable)")
    ap.add_argument("--collections", type=names_from(tuple(COLLECTIONS)), default="scifact,trecdl",
                    help="comma-separated collections")
    ap.add_argument("--queries", type=positive_int, default=LongDocConfig.queries, help="queries of the planted experiment")
    ap.add_argument("--natural-queries", type=positive_int, default=300, help="queries of the natural experiment")
    ap.add_argument("--long-cap", type=positive_int, default=LongDocConfig.long_cap, help="terms TKL reads")
    ap.add_argument("--device", type=torch_device, default=None, help="torch device (default: cuda if available)")
    ap.add_argument("--threads", type=positive_int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--out", type=output_dir, default="out", help="folder of the plot and the JSON")
    args = ap.parse_args(argv)
    paths = named_paths(ap, {"TKL": args.tkl, "IDCM": args.idcm}, args.model)
    if not any(paths.values()):
        ap.error("give --tkl, --idcm or --model NAME=PATH")
    kinds = {name: {"TKL": ("tkl",), "IDCM": ("idcm",)}.get(name, ("tkl", "idcm")) for name in paths}
    return args, paths, load_checked(ap, paths, kinds)


def main(argv: list[str] | None = None) -> None:
    args, paths, checkpoints = parse_args(argv)
    config = LongDocConfig(queries=args.queries, long_cap=args.long_cap)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.threads:
        torch.set_num_threads(args.threads)
    results, caps = {}, {}
    for name in args.collections:
        source = load_source(name)
        models = load_rerankers(checkpoints, source, config.long_cap, args.device)
        caps = {m: rr.max_doc_length for m, rr in models.items() if rr.kind == "tkl"}
        results[name] = run_source(source, models, config, natural_queries=args.natural_queries, progress=True)
    png = plot(results, config, caps, out)
    print(table(results, config))
    payload = {"config": asdict(config), "models": {k: v for k, v in paths.items() if v}, "results": results}
    (out / "region_positions.json").write_text(json.dumps(payload, separators=(",", ":")))
    print("wrote", png, out / "region_positions.json")


if __name__ == "__main__":
    sys.exit(run(main))
