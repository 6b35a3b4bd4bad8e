"""Search speed, side by side over the same stored impacts: ckqti vs bm25s, Pyserini, PISA.

    python scripts/bench_search.py                      # SciFact + synthetic 1M documents
    python scripts/bench_search.py --docs 200000 --peers bm25s,pisa --out out/bench_search_200k.json

Collections: (a) the SciFact learned index (NDRM2 impacts; queries: SciFact test);
(b) a synthetic index: ``--docs`` documents of about ``--per-doc`` postings, terms drawn
from a Zipf law over ``--vocab`` terms, impacts either shaped like NDRM2/BM25 impacts
(``--impacts idf``, the default: ``idf(t) * tf / (tf + 1.2)`` with a geometric tf, so
frequent terms carry small impacts, as in a real learned index), drawn independently of
the term from the SciFact index's own impact distribution (``--impacts empirical``), or
uniform over 1..255 (``--impacts uniform``, where impact-ordered pruning cannot help); two query sets of 3-8 distinct terms: head-heavy (terms drawn by
collection frequency) and tail (drawn uniformly from the vocabulary). Every engine gets
the same integer impacts and the same term ids, one query per call for latency and QPS
at 1 thread (QPS 1t, p50, p99), and the engine's own batch call at 1 and 2 threads
(QPS batch 1t / 2t: ckqti's :meth:`Searcher.topk_batch`, PISA's and Pyserini's batch searchers;
the median of 5 passes). ckqti runs exact, anytime with each of ``--budgets`` postings, and
anytime with each of ``--slacks`` and no budget. Before timing a query set, each engine answers it once untimed (maps
a memory-mapped index's pages, warms caches). Engines are timed in ``--rounds`` interleaved
rounds and every timing column is the median over the rounds. Prints a markdown table and
writes JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from indexer.build import write_prebuilt_index  # noqa: E402
from indexer.format import DOCS_FILE  # noqa: E402
from indexer.shards import ImpactPostings  # noqa: E402
from retriever.index import Index  # noqa: E402
from retriever.search import Searcher  # noqa: E402
from scripts import peers as peer_mod  # noqa: E402
from scripts.args import (  # noqa: E402
    HelpFormatter,
    comma_list,
    fraction,
    names_from,
    output_dir,
    output_file,
    positive_float,
    positive_int,
    run,
)

DATA = ROOT.parent / "shared" / "data"
PEERS = ("bm25s", "pisa", "lucene")


class CkqtiEngine:
    """ckqti's traversal over a written, memory-mapped index, as a peer."""

    def __init__(self, path: Path, mode: str = "exact", budget: int = 0, name: str = "", slack: float = 1.0):
        self.path, self.mode, self.budget, self.slack = path, mode, budget, slack
        if not name and mode == "anytime":
            name = f"ckqti-anytime-{budget // 1000}k" if slack == 1 else f"ckqti-anytime-slack{slack:g}"
        self.name = name or f"ckqti-{mode}"
        self.searcher = None

    def load(self) -> "CkqtiEngine":
        self.searcher = Searcher(Index(self.path), mode=self.mode, budget=self.budget, slack=self.slack)
        return self

    def warmup(self) -> None:
        """Load the compiled kernels (one query and one batch) before timing."""
        longest = int(np.argmax(np.diff(self.searcher.index.shards[0].seg_ptr)))
        self.search([longest], 10)
        self.search_batch([[longest], [longest]], 10, threads=2)

    def search(self, term_ids, k):
        """The ids as given, weight 1 each (a repeated id adds up in the kernels)."""
        vals, _, docs, _ = self.searcher.topk_arrays(np.asarray(term_ids, np.int64), None, k)
        return docs, vals

    def search_batch(self, queries, k, threads=1):
        """:meth:`Searcher.topk_batch`: chunks of queries, one kernel call each, over ``threads``
        threads (the kernels release the GIL)."""
        vals, _, docs, counts, _ = self.searcher.topk_batch(queries, None, k, threads=threads)
        return [(docs[i, :counts[i]], vals[i, :counts[i]]) for i in range(len(queries))]

    def index_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.path.rglob("*.arrow") if f.name != DOCS_FILE)


def zipf_triples(num_docs, per_doc, vocab, exponent, rng, chunk=100_000):
    """Doc-ordered (terms, docs) with distinct terms per document, terms ~ Zipf."""
    cdf = np.cumsum(1.0 / np.arange(1, vocab + 1) ** exponent)
    cdf /= cdf[-1]
    terms, docs = [], []
    for start in range(0, num_docs, chunk):
        n = min(chunk, num_docs - start)
        t = np.sort(np.searchsorted(cdf, rng.random((n, per_doc))).astype(np.int32), axis=1)
        keep = np.ones_like(t, dtype=bool)
        keep[:, 1:] = t[:, 1:] != t[:, :-1]
        terms.append(t[keep])
        docs.append(np.repeat(np.arange(start, start + n, dtype=np.uint32), keep.sum(1)))
    return np.concatenate(terms), np.concatenate(docs)


def synthetic(args, impact_pool, rng):
    terms, docs = zipf_triples(args.docs, args.per_doc, args.vocab, args.zipf, rng)
    if args.impacts == "uniform":
        imps = rng.integers(1, 256, terms.size).astype(np.uint8)
    elif args.impacts == "empirical":
        imps = rng.choice(impact_pool, size=terms.size).astype(np.uint8)
    else:  # "idf": BM25/NDRM2-like, idf(t) * tf / (tf + 1.2), so frequent terms carry small impacts
        df = np.bincount(terms, minlength=args.vocab).astype(np.float64)
        idf = np.maximum(np.log((args.docs - df + 0.5) / (df + 0.5)), 0.05)
        tf = 1 + rng.geometric(0.6, terms.size)
        score = idf[terms] * tf / (tf + 1.2)
        imps = np.clip(np.rint(score / score.max() * 255), 1, 255).astype(np.uint8)
    return ImpactPostings(terms, docs, imps)


def scifact(workdir: Path):
    from ckqti import api
    from indexer.readers import read_qrels, read_queries

    idx = workdir / "scifact"
    if not idx.exists():
        api.index(DATA / "scifact" / "corpus.jsonl", idx, model="ndrm2", progress=False)
    searcher = Searcher(idx)
    sh = searcher.index.shards[0]
    imps = np.repeat(sh.seg_impact[:-1], np.diff(sh.seg_start))
    terms = np.repeat(np.repeat(np.arange(sh.seg_ptr.size - 1), np.diff(sh.seg_ptr)), np.diff(sh.seg_start))
    postings = ImpactPostings(terms.astype(np.int32), np.asarray(sh.postings), imps.astype(np.uint8))
    test = read_qrels(DATA / "scifact" / "qrels" / "test.tsv")
    queries = [searcher.parse(t).terms.tolist() for q, t in read_queries(DATA / "scifact" / "queries.jsonl").items() if q in test]
    return postings, sh.num_docs, len(searcher.index.terms), queries


def draw_queries(csr, n, rng, head: bool):
    cf = np.asarray((csr > 0).sum(0)).ravel().astype(np.float64)
    pool = np.flatnonzero(cf > 0)
    p = cf[pool] / cf[pool].sum() if head else None
    return [np.unique(rng.choice(pool, size=rng.integers(3, 9), p=p)).tolist() for _ in range(n)]


def time_queries(engine, queries, k=10):
    """Latency and QPS of one engine on one query set, after one untimed pass over the set (every
    engine gets it: it maps the pages of a memory-mapped index and warms caches and JITs)."""
    for q in queries:
        engine.search(q, k)
    lat = []
    results = []
    for q in queries:
        t = time.perf_counter()
        results.append(engine.search(q, k))
        lat.append(time.perf_counter() - t)
    batch = {}
    for threads in (1, 2):  # the median of 5 passes: one pass of short queries takes milliseconds
        passes = []
        for _ in range(5):
            t = time.perf_counter()
            engine.search_batch(queries, k, threads=threads)
            passes.append(time.perf_counter() - t)
        batch[threads] = float(np.median(passes))
    lat = np.array(lat)
    return results, {
        "qps_1t": len(queries) / lat.sum(),
        "qps_batch_1t": len(queries) / batch[1],
        "qps_2t": len(queries) / batch[2],
        "p50_ms": float(np.percentile(lat, 50) * 1e3),
        "p99_ms": float(np.percentile(lat, 99) * 1e3),
    }


def agreement(results, reference):
    vals = []
    for (d, _), (r, _) in zip(results, reference):
        if len(r):
            vals.append(len(set(d[:10].tolist()) & set(r[:10].tolist())) / min(10, len(r)))
    return float(np.mean(vals)) if vals else 1.0


def exact_scores_of(csc: sp.csc_matrix, term_ids, docs: np.ndarray) -> np.ndarray:
    """Exact scores of ``docs`` alone (a column lookup per query term: no scan of the collection)."""
    terms, counts = peer_mod.query_weights(term_ids, csc.shape[1])
    total = np.zeros(len(docs), dtype=np.int64)
    for t, c in zip(terms.tolist(), counts.tolist()):
        rows = csc.indices[csc.indptr[t]:csc.indptr[t + 1]]
        pos = np.minimum(np.searchsorted(rows, docs), max(len(rows) - 1, 0))
        hit = (rows[pos] == docs) if len(rows) else np.zeros(len(docs), dtype=bool)
        total[hit] += csc.data[csc.indptr[t] + pos[hit]].astype(np.int64) * c
    return total


def agreement_up_to_ties(results, reference, queries, csc):
    """Share of an engine's top 10 whose exact score reaches the exact 10th score: 1 for any exact engine,
    whichever of tied documents it returns (``agreement`` counts a tie broken the other way as a miss)."""
    vals = []
    for (d, _), (r, rs), q in zip(results, reference, queries):
        if len(r):
            k = min(10, len(r))
            true = exact_scores_of(csc, q, np.asarray(d[:10], dtype=np.int64))
            vals.append(min(k, int(np.count_nonzero(true >= rs[k - 1]))) / k)
    return float(np.mean(vals)) if vals else 1.0


def engine_factories(args, workdir: Path, postings, num_docs, vocab, csr):
    """Yield ``(engine, build_s, load_s)`` one at a time, ckqti exact first (the reference)."""
    t = time.perf_counter()
    path = workdir / "ckqti"
    write_prebuilt_index(path, [postings], vocab, num_docs)
    build = time.perf_counter() - t
    modes = [("exact", 0, 1.0)] + [("anytime", b, 1.0) for b in args.budgets]
    modes += [("anytime", 2**62, s) for s in args.slacks]  # slack alone: no postings budget
    for mode, budget, slack in modes:
        t = time.perf_counter()
        eng = CkqtiEngine(path, mode, budget, slack=slack).load()
        yield eng, build, time.perf_counter() - t
    wanted = set(args.peers)
    if "bm25s" in wanted:
        t = time.perf_counter()
        eng = peer_mod.Bm25sPeer().build(csr)
        yield eng, time.perf_counter() - t, 0.0
    if "pisa" in wanted:
        cache = Path(args.peer_cache) / f"pisa-{workdir.name}" if args.peer_cache else workdir / "pisa-work"
        eng = peer_mod.PisaPeer(cache, "block_max_wand").build(csr, reuse=bool(args.peer_cache))
        yield eng, eng.build_s, 0.0
        yield eng.with_algorithm("maxscore"), eng.build_s, 0.0
    if "lucene" in wanted:
        t = time.perf_counter()
        eng = peer_mod.LucenePeer(workdir / "lucene-work").build(csr)
        yield eng, time.perf_counter() - t, 0.0


def bench_collection(name, args, workdir, postings, num_docs, vocab, query_sets):
    """Every engine on every query set, timed in ``args.rounds`` interleaved rounds (engine after
    engine, then again): each timing column is the median over the rounds, so a slow spell of a
    shared machine spreads over all engines instead of falling on whichever ran then."""
    csr = sp.csr_matrix(
        (postings.impacts.astype(np.int32), (postings.docs.astype(np.int64), postings.terms.astype(np.int64))),
        shape=(num_docs, vocab),
    )
    sets = query_sets(csr)
    csc = csr.tocsc()
    csc.sort_indices()
    engines, rows, reference = [], {}, {}
    for eng, build_s, load_s in engine_factories(args, workdir, postings, num_docs, vocab, csr):
        eng.warmup()
        engines.append((eng, build_s, load_s))
    for _ in range(args.rounds):
        for eng, build_s, load_s in engines:
            for qname, queries in sets.items():
                res, timing = time_queries(eng, queries)
                if qname not in reference:  # the first engine is ckqti exact: check it, then it is the reference
                    for q, (_, s) in list(zip(queries, res))[:50]:
                        assert np.array_equal(s, peer_mod.brute_force_topk(csr, q, 10)[1]), f"ckqti exact differs on {q}"
                    reference[qname] = res
                if (eng.name, qname) not in rows:
                    rows[(eng.name, qname)] = {
                        "collection": name, "queries": qname, "n": len(queries), "engine": eng.name, "rounds": [],
                        "top10_agreement": agreement(res, reference[qname]),
                        "top10_agreement_ties": agreement_up_to_ties(res, reference[qname], queries, csc),
                        "index_mb": eng.index_bytes() / 2**20, "build_s": build_s, "load_s": load_s,
                    }
                row = rows[(eng.name, qname)]
                row["rounds"].append(timing)
    out = []
    for row in rows.values():
        row.update({key: float(np.median([r[key] for r in row["rounds"]])) for key in row["rounds"][0]})
        print_row(row)
        out.append(row)
    return out


HEADER = ("| collection | queries | engine | QPS 1t | QPS batch 1t | QPS batch 2t | p50 ms | p99 ms | top-10 agr. "
          "| agr. up to ties | index MB | build s | load s |")


def print_row(r):
    print(f"| {r['collection']} | {r['queries']} | {r['engine']} | {r['qps_1t']:.0f} | {r['qps_batch_1t']:.0f} | {r['qps_2t']:.0f} | {r['p50_ms']:.3f} | "
          f"{r['p99_ms']:.3f} | {r['top10_agreement']:.3f} | {r['top10_agreement_ties']:.3f} | {r['index_mb']:.1f} | {r['build_s']:.1f} | {r['load_s']:.2f} |", flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options; a bad value is a usage error here, before any index is built."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--docs", type=positive_int, default=1_000_000, help="synthetic documents")
    ap.add_argument("--per-doc", type=positive_int, default=150, help="postings drawn a synthetic document")
    ap.add_argument("--vocab", type=positive_int, default=100_000, help="synthetic vocabulary")
    ap.add_argument("--zipf", type=positive_float, default=1.0, help="exponent of the Zipf law of synthetic terms")
    ap.add_argument("--impacts", choices=["idf", "empirical", "uniform"], default="idf", help="synthetic impacts")
    ap.add_argument("--queries", type=positive_int, default=500, help="synthetic queries a set")
    ap.add_argument("--budgets", type=comma_list(positive_int, allow_empty=True), default="20000,50000",
                    help="anytime rows' postings budgets, comma-separated ('': no such rows)")
    ap.add_argument("--slacks", type=comma_list(fraction, allow_empty=True), default="0.8",
                    help="anytime rows pruning with the remaining-score bound scaled by each, in (0, 1] "
                    "(no postings budget; '': no such rows)")
    ap.add_argument("--peers", type=names_from(PEERS, allow_empty=True), default=",".join(PEERS),
                    help="peer engines, comma-separated ('': ckqti alone)")
    ap.add_argument("--rounds", type=positive_int, default=3, help="interleaved timing rounds; columns are their medians")
    ap.add_argument("--skip-scifact", action="store_true", help="time the synthetic collection only")
    ap.add_argument("--workdir", type=output_dir, default=None, help="where the temporary indexes go, made "
                    "when missing (default: the system's temporary folder)")
    ap.add_argument("--peer-cache", type=output_dir, default=None, help="Keep PISA's index here and reuse it when it "
                    "holds the same impacts (sha256); its build time is then the one measured when it was built.")
    ap.add_argument("--out", type=output_file, default="out/bench_search.json", help="JSON to write")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        work = Path(tmp)
        print(HEADER)
        print("|" + "---|" * 13)
        sf_postings, sf_docs, sf_vocab, sf_queries = scifact(work)
        if not args.skip_scifact:
            rows += bench_collection("scifact", args, work / "sf", sf_postings, sf_docs, sf_vocab, lambda csr: {"scifact-test": sf_queries})
        syn = synthetic(args, sf_postings.impacts, rng)
        name = f"synthetic-{args.docs // 1000}k-{args.impacts}"
        rows += bench_collection(name, args, work / "syn", syn, args.docs, args.vocab, lambda csr: {
            "head-heavy": draw_queries(csr, args.queries, rng, True),
            "tail": draw_queries(csr, args.queries, rng, False),
        })
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=2, default=str))


if __name__ == "__main__":
    sys.exit(run(main))
