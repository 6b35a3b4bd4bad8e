"""Long-document evidence: a relevant text planted at a depth inside concatenations of non-relevant ones.

    python scripts/long_documents.py --tk TK.pt --tkl TKL.pt --ndrm3 NDRM3.pt --idcm IDCM.pt [--model NAME=PATH ...]
        [--merge EARLIER.json] [--out out/]

Real text made long (none of the shared collections has long documents). For each query of
SciFact test (relevant abstracts) and of the TREC DL 2019 passage subset (passages judged 2 or
3), all lengths and depths in analyzed terms (ckqti's analyzer, the unit of TK, TKL and NDRM;
IDCM reads WordPiece, about 2.2 pieces per analyzed term on SciFact and TREC DL since stopwords
count for WordPiece only, so its 2,000-piece cap ends near 900 terms):

1. **Depth.** The relevant text is planted at depth 0 ... 4,000 of a document of
   ``total_terms`` terms otherwise made of random non-judged texts of the same collection.
   It competes with ``distractors`` documents of the same length and filler, each holding one
   of the query's hardest non-relevant texts (BM25's best-ranked non-relevant ones) at a random
   depth. Each model ranks the 1 + ``distractors`` documents; the planted document's rank
   (ties counted against it) is averaged over queries for every depth. TK reads 200 terms, so
   beyond depth 200 it sees filler only and can only guess.
2. **Length.** For every length in ``lengths``, one document of that length holds the relevant
   text at a random depth and one holds a hard non-relevant text; each model ranks the pool
   and the probability that a document of each length is retrieved in the top ``top_k`` is
   plotted (as seed paper 000, Fig. 1: whether a model's retrieval follows relevance across
   document lengths or falls off where its reading stops).

BM25 is computed here over the same analyzed terms (k1 0.9, b 0.4, idf from the collection,
average length over the ranked pool). TK, TKL and NDRM read the collection's vocabulary
(:func:`ckqti.models.reranker.adapt_reranker`); TKL and NDRM3 read up to ``--long-cap`` terms.
Writes ``long_documents_depth.png``, ``long_documents_length.png`` and ``long_documents.json``.
``--merge`` adds this run's models to an earlier run's JSON of the same settings (its models'
rows kept, a model run again replaced; BM25's rows must agree, which checks that both ranked the
same queries and documents) and redraws both plots from the whole.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python scripts/long_documents.py`
    sys.path.insert(0, str(ROOT))

from ckqti.text import Analyzer  # noqa: E402
from scripts.args import (  # noqa: E402
    HelpFormatter,
    error_message,
    existing_file,
    names_from,
    output_dir,
    positive_int,
    run,
    torch_device,
)

if TYPE_CHECKING:
    from ckqti.models.checkpoint import Checkpoint

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
COLLECTIONS = {"scifact": ("scifact", "test.tsv", 1), "trecdl": ("trecdl19-passage-subset", "test.tsv", 2)}


@dataclass(frozen=True)
class LongDocConfig:
    """Settings of both experiments (lengths and depths in analyzed terms)."""

    depths: tuple[int, ...] = (0, 250, 500, 1000, 1500, 2000, 2500, 3000, 3500, 4000)
    total_terms: int = 4500
    distractors: int = 9
    lengths: tuple[int, ...] = (250, 500, 1000, 2000, 3000, 4000)
    top_k: int = 3
    queries: int = 20
    seed: int = 0
    long_cap: int = 4000  # terms TKL and NDRM read (--long-cap)

    def __post_init__(self) -> None:
        if min(self.depths) < 0 or max(self.depths) >= self.total_terms:
            raise ValueError("depths must lie in [0, total_terms)")
        if self.distractors < 1 or self.top_k < 1 or self.queries < 1 or min(self.lengths) < 1 or self.long_cap < 1:
            raise ValueError("distractors, top_k, queries, lengths and long_cap must be positive")


@dataclass
class Source:
    """One collection's texts, queries and judgements (relevant: grade >= the collection's threshold)."""

    name: str
    docs: dict[str, str]
    queries: dict[str, str]
    relevant: dict[str, list[str]]
    judged: dict[str, set[str]]


def load_source(name: str, data_dir: Path = DATA) -> Source:
    from indexer.readers import read_corpus, read_qrels, read_queries

    folder, qrels_file, min_grade = COLLECTIONS[name]
    base = data_dir / folder
    docs = {d.docid: d.full_text() for d in read_corpus(base / "corpus.jsonl")}
    qrels = read_qrels(base / "qrels" / qrels_file)
    queries = read_queries(base / "queries.jsonl")
    relevant = {q: sorted(d for d, g in j.items() if g >= min_grade and d in docs) for q, j in qrels.items()}
    relevant = {q: r for q, r in relevant.items() if r and q in queries}
    return Source(name, docs, {q: queries[q] for q in relevant}, relevant, {q: set(j) for q, j in qrels.items()})


@dataclass
class TermCutter:
    """Texts cut or joined to an exact count of analyzed terms (spans cached per document)."""

    analyzer: Analyzer
    docs: Mapping[str, str]
    _ends: dict[str, list[int]] = field(default_factory=dict)

    def ends(self, docid: str) -> list[int]:
        """Character end of each analyzed term of a document."""
        if docid not in self._ends:
            from ckqti.models.inputs import analyzed_spans

            self._ends[docid] = [s.end for s in analyzed_spans(self.analyzer, self.docs[docid])]
        return self._ends[docid]

    def terms(self, docid: str) -> int:
        return len(self.ends(docid))

    def fill(self, pool: Sequence[str], start: int, count: int) -> tuple[str, int]:
        """Texts ``pool[start], pool[start + 1], ...`` joined until exactly ``count`` terms (the last cut).

        Returns the text and the next unused pool position.
        """
        parts, have, i = [], 0, start
        while have < count:
            docid = pool[i % len(pool)]
            ends, i = self.ends(docid), i + 1
            if not ends:
                continue
            take = min(len(ends), count - have)
            parts.append(self.docs[docid][: ends[take - 1]])
            have += take
        return "\n".join(parts), i


def plant(cutter: TermCutter, planted: str, depth: int, total: int, pool: Sequence[str], start: int) -> tuple[str, int]:
    """A document of ``max(total, depth + len(planted))`` terms: filler, the planted text at ``depth``, filler."""
    text, start, _ = plant_span(cutter, planted, depth, total, pool, start)
    return text, start


def plant_span(cutter: TermCutter, planted: str, depth: int, total: int, pool: Sequence[str],
               start: int) -> tuple[str, int, tuple[int, int]]:
    """:func:`plant`, also returning the planted text's characters ``[begin, end)`` in the document."""
    head, start = cutter.fill(pool, start, depth)
    tail_terms = max(0, total - depth - cutter.terms(planted))
    tail, start = cutter.fill(pool, start, tail_terms)
    body = cutter.docs[planted]
    begin = len(head) + 1 if head else 0
    return "\n".join(p for p in (head, body, tail) if p), start, (begin, begin + len(body))


class BM25:
    """BM25 over analyzed terms: Lucene's idf from a collection, average length over the texts ranked together."""

    def __init__(self, docs: Mapping[str, str], analyzer: Analyzer, k1: float = 0.9, b: float = 0.4):
        self.analyzer, self.k1, self.b = analyzer, k1, b
        self.bags = {d: Counter(analyzer(t)) for d, t in docs.items()}
        df = Counter(t for bag in self.bags.values() for t in bag)
        n = len(docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def _scores(self, terms: list[str], bags: Sequence[Counter], avg: float | None = None) -> np.ndarray:
        lengths = np.array([sum(b.values()) for b in bags], dtype=np.float64)
        avg = avg or (max(lengths.mean(), 1.0) if len(bags) else 1.0)
        out = np.zeros(len(bags))
        for i, bag in enumerate(bags):
            norm = self.k1 * (1 - self.b + self.b * lengths[i] / avg)
            out[i] = sum(self.idf.get(t, 0.0) * bag[t] * (self.k1 + 1) / (bag[t] + norm) for t in terms if bag[t])
        return out

    def score(self, query: str, docs: Sequence[str]) -> np.ndarray:
        """Scores of texts ranked together (their mean length is the average length)."""
        return self._scores(self.analyzer(query), [Counter(self.analyzer(d)) for d in docs])

    def rank_collection(self, query: str) -> list[str]:
        """Collection documents sharing a term with the query, best BM25 first."""
        terms = self.analyzer(query)
        ids = [d for d, bag in self.bags.items() if any(bag[t] for t in terms)]
        avg = float(np.mean([sum(b.values()) for b in self.bags.values()]))
        scores = self._scores(terms, [self.bags[d] for d in ids], avg)
        return [ids[i] for i in np.argsort(-scores, kind="stable")]


Scorer = Callable[[str, Sequence[str]], np.ndarray]


def hard_negatives(source: Source, bm25: BM25, qid: str, count: int) -> list[str]:
    """The ``count`` best BM25 documents of the query that are not judged relevant."""
    rel = set(source.relevant[qid])
    return [d for d in bm25.rank_collection(source.queries[qid]) if d not in rel][:count]


def rank_of_first(scores: np.ndarray) -> int:
    """Rank of ``scores[0]`` among all (1 = best; ties counted against it)."""
    return 1 + int((scores[1:] >= scores[0]).sum())


@dataclass
class QuerySetup:
    """One query's relevant text, hard negatives and filler pool."""

    qid: str
    relevant: str
    hard: list[str]
    filler: list[str]


def query_setups(source: Source, bm25: BM25, config: LongDocConfig, hard_count: int) -> list[QuerySetup]:
    rng = np.random.default_rng(config.seed)
    qids = sorted(source.queries)
    picked = [qids[i] for i in sorted(rng.permutation(len(qids))[: config.queries])]
    ids = sorted(source.docs)
    out = []
    for qid in picked:
        hard = hard_negatives(source, bm25, qid, hard_count)
        banned = source.judged.get(qid, set()) | set(hard)
        filler = [ids[i] for i in rng.permutation(len(ids)) if ids[i] not in banned][:400]
        out.append(QuerySetup(qid, source.relevant[qid][0], hard, filler))
    return out


def depth_ranks(setup: QuerySetup, source: Source, cutter: TermCutter, models: Mapping[str, Scorer],
                config: LongDocConfig) -> dict[str, list[int]]:
    """Per model, the planted document's rank at every depth against fixed distractors."""
    rng = np.random.default_rng([config.seed, len(setup.qid), sum(map(ord, setup.qid))])
    pos, distractors = 0, []
    for h in setup.hard[: config.distractors]:
        depth = int(rng.integers(0, max(1, config.total_terms - cutter.terms(h))))
        text, pos = plant(cutter, h, depth, config.total_terms, setup.filler, pos)
        distractors.append(text)
    planted = []
    for depth in config.depths:  # the same filler around the planted text at every depth
        planted.append(plant(cutter, setup.relevant, depth, config.total_terms, setup.filler, pos)[0])
    query = source.queries[setup.qid]
    out = {}
    for name, score in models.items():
        d_scores = score(query, distractors)
        p_scores = score(query, planted)
        out[name] = [rank_of_first(np.concatenate([[p], d_scores])) for p in p_scores]
    return out


def length_hits(setup: QuerySetup, source: Source, cutter: TermCutter, models: Mapping[str, Scorer],
                config: LongDocConfig) -> dict[str, dict[str, list[int]]]:
    """Per model, whether each length's relevant and non-relevant document is in the top ``top_k``."""
    rng = np.random.default_rng([config.seed, 7, sum(map(ord, setup.qid))])
    pos, docs = 0, []
    spare = setup.hard[config.distractors:] or setup.hard
    for i, length in enumerate(config.lengths):
        for planted in (setup.relevant, spare[i % len(spare)]):
            depth = int(rng.integers(0, max(1, length - cutter.terms(planted))))
            text, pos = plant(cutter, planted, depth, length, setup.filler, pos)
            docs.append(text)
    query = source.queries[setup.qid]
    out = {}
    for name, score in models.items():
        top = set(np.argsort(-score(query, docs), kind="stable")[: config.top_k].tolist())
        out[name] = {"relevant": [int(2 * i in top) for i in range(len(config.lengths))],
                     "non_relevant": [int(2 * i + 1 in top) for i in range(len(config.lengths))]}
    return out


def run_source(source: Source, models: Mapping[str, Scorer], config: LongDocConfig,
               analyzer: Analyzer | None = None, progress: bool = False) -> dict:
    """Both experiments on one collection; per model mean rank per depth and hit rates per length."""
    analyzer = analyzer or Analyzer()
    bm25 = BM25(source.docs, analyzer)
    scorers = {"BM25": bm25.score, **models}
    cutter = TermCutter(analyzer, source.docs)
    setups = query_setups(source, bm25, config, config.distractors + len(config.lengths))
    ranks: dict[str, list[list[int]]] = {m: [] for m in scorers}
    hits: dict[str, dict[str, list[list[int]]]] = {m: {"relevant": [], "non_relevant": []} for m in scorers}
    for i, setup in enumerate(setups):
        for m, r in depth_ranks(setup, source, cutter, scorers, config).items():
            ranks[m].append(r)
        for m, h in length_hits(setup, source, cutter, scorers, config).items():
            for kind in h:
                hits[m][kind].append(h[kind])
        if progress:
            print(f"{source.name}: query {i + 1}/{len(setups)}", flush=True)
    return {
        "queries": [s.qid for s in setups],
        "ranks": ranks,
        "mean_rank": {m: np.mean(r, axis=0).tolist() for m, r in ranks.items()},
        "found": {m: (np.asarray(r) == 1).mean(axis=0).tolist() for m, r in ranks.items()},
        "p_retrieved": {m: {k: np.mean(v, axis=0).tolist() for k, v in h.items()} for m, h in hits.items()},
    }


# -- models, plots, main ---------------------------------------------------------------------


def load_models(checkpoints: Mapping[str, Checkpoint], source: Source, long_cap: int, device: str | None) -> dict[str, Scorer]:
    """Rerankers' scoring functions (see :func:`load_rerankers`)."""
    return {name: rr.score for name, rr in load_rerankers(checkpoints, source, long_cap, device).items()}


def load_rerankers(checkpoints: Mapping[str, Checkpoint], source: Source, long_cap: int, device: str | None) -> dict:
    """Rerankers of loaded checkpoints (:func:`load_checked`'s, by name) reading the collection's
    vocabulary; TKL and NDRM3 read ``long_cap`` terms."""
    from ckqti.models.inputs import collection_vocabulary
    from ckqti.models.reranker import adapt_reranker, reranker_from_checkpoint

    out = {}
    for name, ckpt in checkpoints.items():
        cap = long_cap if ckpt.kind in ("tkl", "ndrm1", "ndrm3") else None
        if ckpt.kind == "idcm":
            rr = reranker_from_checkpoint(ckpt, device)
        else:
            vocab = collection_vocabulary(source.docs.values(), Analyzer.from_dict(ckpt.analyzer))
            rr = adapt_reranker(ckpt, vocab, device, cap)
        out[name] = rr
    return out


def plot(results: Mapping[str, dict], config: LongDocConfig, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    fig, axes = plt.subplots(1, len(names), figsize=(6 * len(names), 4.2), squeeze=False)
    for ax, name in zip(axes[0], names):
        for model, ranks in results[name]["mean_rank"].items():
            ax.plot(config.depths, ranks, marker="o", label=model)
        ax.axvline(200, color="grey", lw=0.8, ls=":")
        ax.set(title=f"{name}: planted relevant text vs. {config.distractors} distractors",
               xlabel="depth of the relevant text (analyzed terms)", ylabel="mean rank (1 = found)",
               ylim=(0.8, config.distractors + 1.2))
        ax.legend(fontsize=8)
    depth_png = out / "long_documents_depth.png"
    fig.tight_layout()
    fig.savefig(depth_png, dpi=120)
    plt.close(fig)
    fig, axes = plt.subplots(1, len(names), figsize=(6 * len(names), 4.2), squeeze=False)
    for ax, name in zip(axes[0], names):
        for model, p in results[name]["p_retrieved"].items():
            line = ax.plot(config.lengths, p["relevant"], marker="o", label=f"{model}: relevant")[0]
            ax.plot(config.lengths, p["non_relevant"], ls="--", color=line.get_color(), alpha=0.6)
        ax.set(title=f"{name}: P(top-{config.top_k}) by length (dashed: non-relevant)",
               xlabel="document length (analyzed terms)", ylabel="probability of retrieval", ylim=(-0.05, 1.05))
        ax.legend(fontsize=8)
    length_png = out / "long_documents_length.png"
    fig.tight_layout()
    fig.savefig(length_png, dpi=120)
    plt.close(fig)
    return [depth_png, length_png]


def named_paths(parser: argparse.ArgumentParser, paths: Mapping[str, str | Path | None],
                specs: Sequence[str]) -> dict[str, str | None]:
    """``paths`` (as strings) plus each ``NAME=PATH`` of ``specs`` (``--model``); a malformed one, or
    one whose file does not exist, is a usage error."""
    out = {name: None if p is None else str(p) for name, p in paths.items()}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            parser.error(f"--model takes NAME=PATH, got {spec!r}")
        if not Path(path).is_file():
            parser.error(f"--model {spec}: {path}: no such file")
        out[name] = path
    return out


def load_checked(parser: argparse.ArgumentParser, paths: Mapping[str, str | None],
                 kinds: Mapping[str, Sequence[str]]) -> dict[str, Checkpoint]:
    """The checkpoints of ``paths`` by name, each loaded once, here: one that is unreadable or, where
    ``kinds`` names it, not of one of those kinds is a usage error, before any work (a TK or NDRM3
    checkpoint given as ``--tkl`` used to run under TKL's name: wrong rows here, no regions at all in
    ``region_positions.py``)."""
    from ckqti.errors import CkqtiError
    from ckqti.models.checkpoint import load_checkpoint

    out = {}
    for name, path in paths.items():
        if not path:
            continue
        try:
            out[name] = load_checkpoint(path)
        except CkqtiError as err:
            parser.error(error_message(err))
        kind = out[name].kind
        if name in kinds and kind not in kinds[name]:
            wanted = " or ".join(k.upper() for k in kinds[name])
            parser.error(f"{name}: {path} is a checkpoint of kind {kind.upper()}, not {wanted}")
    return out


def read_earlier(path: str | Path, config: LongDocConfig, collections: Sequence[str]) -> dict:
    """An earlier run's ``long_documents.json`` for ``--merge``, checked before any work: JSON of a
    run with the same settings, over collections this run ranks too.

    Raises:
        InputError: not such a file, or one that cannot be merged with this run.
    """
    from ckqti.errors import InputError

    try:
        earlier = json.loads(Path(path).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError("not JSON: --merge takes an earlier run's long_documents.json", path) from None
    if not isinstance(earlier, dict) or not all(isinstance(earlier.get(k), dict) for k in ("config", "models", "results")):
        raise InputError("not a long_documents.json (config, models and results expected)", path)
    parts = ("queries", "ranks", "mean_rank", "found", "p_retrieved")
    for name, res in earlier["results"].items():
        if not isinstance(res, dict) or not all(k in res for k in parts) or "BM25" not in res["ranks"]:
            raise InputError(f"results of {name!r} lack some of {', '.join(parts)} (or BM25's ranks)", path)
    if not same_settings(earlier["config"], config):
        raise InputError("the earlier run has other settings: rerun it or drop --merge", path)
    if missing := sorted(set(earlier["results"]) - set(collections)):
        raise InputError(f"the earlier run ranked {', '.join(missing)} too: add it to --collections", path)
    return earlier


def same_settings(earlier: Mapping, config: LongDocConfig) -> bool:
    """An earlier run's ``config`` (JSON) is ``config``; one written before ``long_cap`` was recorded
    read the default 4,000 terms."""
    return {"long_cap": 4000, **earlier} == json.loads(json.dumps(asdict(config)))


def merge_results(earlier: Mapping, results: Mapping[str, dict], config: LongDocConfig) -> dict[str, dict]:
    """An earlier run's results (``long_documents.json``) with this run's models added or replaced.

    Raises:
        ValueError: the runs differ in settings, queries or BM25's ranks (they did not rank the same
        documents), or this run lacks one of the earlier collections.
    """
    if not same_settings(earlier["config"], config):
        raise ValueError("the earlier run has other settings: rerun it or drop --merge")
    merged = {}
    for name, old in earlier["results"].items():
        new = results.get(name)
        if new is None:
            raise ValueError(f"this run lacks the earlier run's collection {name!r}")
        if old["queries"] != new["queries"] or old["ranks"]["BM25"] != new["ranks"]["BM25"]:
            raise ValueError(f"{name}: the runs ranked other queries or documents (BM25's ranks differ)")
        merged[name] = {"queries": old["queries"]}
        for part in ("ranks", "mean_rank", "found", "p_retrieved"):
            merged[name][part] = {**old[part], **new[part]}
    return merged


def depth_table(title: str, depths: Sequence[int], cells: Mapping[str, Sequence[str]]) -> list[str]:
    """A titled markdown table with one column per depth and a row of ``cells`` per model."""
    lines = [f"\n{title}", "| model | " + " | ".join(str(d) for d in depths) + " |", "|---|" + "---|" * len(depths)]
    return lines + [f"| {model} | " + " | ".join(row) + " |" for model, row in cells.items()]


def table(results: Mapping[str, dict], config: LongDocConfig) -> str:
    lines = []
    for name, res in results.items():
        lines += depth_table(f"{name}: mean rank of the planted document (of {config.distractors + 1}) by depth",
                             config.depths, {m: [f"{r:.2f}" for r in ranks] for m, ranks in res["mean_rank"].items()})
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, dict[str, str | None],
                                                      dict[str, Checkpoint]]:
    """The options, the checkpoints' paths by name and the checkpoints loaded; a bad value is a usage
    error here, before any work."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    for name in ("tk", "tkl", "ndrm3", "idcm"):
        ap.add_argument(f"--{name}", type=existing_file, default=None,
                        help=f"{name.upper()} checkpoint (left out when not given)")
    ap.add_argument("--model", action="append", default=[], metavar="NAME=PATH",
                    help="another checkpoint of any kind under its own name (repeatable)")
    ap.add_argument("--merge", type=existing_file, default=None, metavar="JSON",
                    help="an earlier run's long_documents.json: keep its models' rows and add this run's")
    ap.add_argument("--collections", type=names_from(tuple(COLLECTIONS)), default=",".join(COLLECTIONS),
                    help="comma-separated collections")
    ap.add_argument("--queries", type=positive_int, default=LongDocConfig.queries, help="queries a collection")
    ap.add_argument("--long-cap", type=positive_int, default=LongDocConfig.long_cap,
                    help="terms TKL, NDRM and TKL-like --model checkpoints read")
    ap.add_argument("--device", type=torch_device, default=None, help="torch device (default: cuda if available)")
    ap.add_argument("--threads", type=positive_int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--out", type=output_dir, default="out", help="folder of the plots and the JSON")
    args = ap.parse_args(argv)
    paths = named_paths(ap, {"TK": args.tk, "TKL": args.tkl, "NDRM3": args.ndrm3, "IDCM": args.idcm}, args.model)
    checkpoints = load_checked(ap, paths, {"TK": ("tk",), "TKL": ("tkl",), "NDRM3": ("ndrm3",), "IDCM": ("idcm",)})
    return args, paths, checkpoints


def main(argv: list[str] | None = None) -> None:
    args, paths, checkpoints = parse_args(argv)
    config = LongDocConfig(queries=args.queries, long_cap=args.long_cap)
    earlier = read_earlier(args.merge, config, args.collections) if args.merge else None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    threads = torch.get_num_threads()
    try:
        if args.threads:
            torch.set_num_threads(args.threads)
        for name in args.collections:
            source = load_source(name)
            models = load_models(checkpoints, source, config.long_cap, args.device)
            results[name] = run_source(source, models, config, progress=True)
    finally:
        torch.set_num_threads(threads)
    models = {k: v for k, v in paths.items() if v}
    if earlier is not None:
        results = merged_or_refused(earlier, results, config, args.merge)
        models = {**earlier["models"], **models}
    pngs = plot(results, config, out)
    print(table(results, config))
    payload = {"config": asdict(config), "models": models, "results": results}
    if earlier is not None and "redrawn" in earlier:
        payload["redrawn"] = earlier["redrawn"]
    (out / "long_documents.json").write_text(json.dumps(payload, indent=1))
    print("wrote", *pngs, out / "long_documents.json")


def merged_or_refused(earlier: Mapping, results: Mapping[str, dict], config: LongDocConfig, path) -> dict[str, dict]:
    """:func:`merge_results`; the runs' disagreement it finds after the work (BM25 ranked other
    documents) is the ``--merge`` file's error, not a bug."""
    from ckqti.errors import InputError

    try:
        return merge_results(earlier, results, config)
    except ValueError as err:  # merge_results' documented refusals only: it raises nothing else
        raise InputError(f"cannot merge: {err}", path) from None


if __name__ == "__main__":
    sys.exit(run(main))
