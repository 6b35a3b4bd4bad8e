"""Which (term, document) pairs a latent model's index must store: a simulation on SciFact test.

    python scripts/latent_storage.py [--model CHECKPOINT] [--out docs/results/latent_storage.json]

A latent model (NDRM1, NDRM3) scores every term against every document; the index stores
``s(t, d) - c_t`` for a document's candidate terms when positive and scores an unstored pair
``c_t`` (``indexer/impacts.py``, docs/INDEX.md). This script measures, without building an
index per setting, what each choice of candidates costs against exhaustive float scoring by
the same model:

* ``own``: the document's own terms only;
* ``near-N``: own terms plus the ``N`` vocabulary terms (df >= 2) nearest to the document by
  ``max_j cos(t, d_j)`` that are *not* its own (the indexer's rule, ``ImpactConfig.neighbours``);
* ``near-incl-N``: own terms plus the ``N`` nearest terms, own terms counted among the ``N``
  (the indexer's rule until session 4: with ~100 own terms a SciFact abstract's 64 nearest
  are nearly all its own, so it added ~6 terms a document);
* ``all``: every term whose latent channel is above its offset (the densest index possible).

Every SciFact test query term is scored exhaustively against every document (full score and
latent channel), plus 256 vocabulary terms drawn at random, from which each policy's latent
postings per document are estimated (the fraction of sampled pairs the policy stores, times
the candidate vocabulary). Overlap@100 (of the exhaustive top 100, or all of it when shorter)
and nDCG@10 are against exhaustive scoring, as ``scripts/impact_fidelity.py`` measures a built
index (which also quantizes). Prints a
markdown table and writes JSON; about 6 minutes for SciFact on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ckqti.errors import OptionError  # noqa: E402
from ckqti.evaluate import evaluate  # noqa: E402
from ckqti.models.loading import load_qti_model  # noqa: E402
from ckqti.models.specs import UNTRAINED  # noqa: E402
from ckqti.progress import progress_bar  # noqa: E402
from ckqti.text import Analyzer  # noqa: E402
from indexer.analyze import analyze_corpus  # noqa: E402
from indexer.fidelity import mean_overlap_at_k, top_k_run  # noqa: E402
from indexer.impacts import ImpactConfig, ImpactScorer, pad_batch  # noqa: E402
from indexer.readers import read_qrels, read_queries  # noqa: E402
from scripts.args import HelpFormatter, command_line, existing_dir, file_or_names, output_file, positive_int, run  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "scifact"
NEIGHBOURS = (64, 256, 1024, 4096)
SAMPLE_TERMS = 256
NEVER = np.iinfo(np.int32).max


@dataclass
class Scored:
    """Per document and term ``[N, T]`` (query terms first, then the sampled terms)."""

    full: np.ndarray  # exhaustive score
    lat: np.ndarray  # its latent ("one") channel
    own: np.ndarray  # the term occurs in the document
    rank_incl: np.ndarray  # rank by max cos among all candidate terms (own included)
    rank_new: np.ndarray  # rank by max cos among candidate terms the document does not hold


@torch.no_grad()
def score_documents(model, scorer: ImpactScorer, documents, terms: np.ndarray, batch_size: int) -> Scored:
    one = model.impact_channels.index("one")
    cand_ids = scorer._cand_terms.cpu().numpy()  # ascending
    where = np.searchsorted(cand_ids, terms)
    in_cand = (where < cand_ids.size) & (cand_ids[np.minimum(where, cand_ids.size - 1)] == terms)
    n, t = len(documents), terms.size
    sc = Scored(np.zeros((n, t), np.float32), np.zeros((n, t), np.float32), np.zeros((n, t), bool),
                np.full((n, t), NEVER, np.int32), np.full((n, t), NEVER, np.int32))
    tt = torch.from_numpy(terms).to(scorer.device)
    for i in progress_bar(range(0, n, batch_size), desc="documents"):
        batch = documents[i:i + batch_size]
        ids, lengths = pad_batch(batch, scorer.config.max_doc_terms, scorer.device)
        enc = model.encode_documents(ids, lengths)
        sc.full[i:i + len(batch)] = model.score_encoded(tt, enc).float().cpu().numpy()
        sc.lat[i:i + len(batch)] = model.channel_scores(tt, enc)[..., one].float().cpu().numpy()
        for b, doc in enumerate(batch):
            d = i + b
            mine = np.unique(np.asarray(doc, np.int64))
            sc.own[d] = np.isin(terms, mine)
            best = (enc.vectors[b][enc.mask[b]] @ scorer._cand_vectors.T).max(0).values.cpu().numpy()
            sc.rank_incl[d, in_cand] = ranks(best)[where[in_cand]]
            best[np.isin(cand_ids, mine)] = -np.inf
            sc.rank_new[d, in_cand] = ranks(best)[where[in_cand]]
    return sc


def ranks(values: np.ndarray) -> np.ndarray:
    """0 for the largest value, ties by position."""
    out = np.empty(values.size, np.int32)
    out[np.argsort(-values, kind="stable")] = np.arange(values.size)
    return out


def policies(sc: Scored) -> dict[str, np.ndarray]:
    """Which ``[N, T]`` pairs each policy stores (before the offset clip)."""
    out = {"own": sc.own}
    for n in NEIGHBOURS:
        out[f"near-incl-{n}"] = sc.own | (sc.rank_incl < n)
        out[f"near-{n}"] = sc.own | (sc.rank_new < n)
    out["all"] = np.ones_like(sc.own)
    return out


def run_of(scores: np.ndarray, parsed, col, docids, k: int = 100) -> dict[str, dict[str, float]]:
    """Top-``k`` run from per-term document scores ``[N, T]`` and each query's term counts."""
    run = top_k_run(scores, col, {q: (list(c), list(c.values())) for q, c in parsed.items() if c}, docids, k)
    return {q: run.get(q, {}) for q in parsed}  # a query with no known term retrieves nothing


def parse_queries(texts: dict, analyzer, terms: list[str]) -> dict[str, dict[int, int]]:
    """Each query's in-vocabulary term ids and counts."""
    ids = {t: i for i, t in enumerate(terms)}
    parsed = {}
    for q, text in texts.items():
        counts: dict[int, int] = {}
        for t in analyzer(text):
            if t in ids:
                counts[ids[t]] = counts.get(ids[t], 0) + 1
        parsed[q] = counts
    return parsed


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--model", type=file_or_names(UNTRAINED), default=None,
                    help="a latent checkpoint (default: the bundled NDRM3)")
    ap.add_argument("--data", type=existing_dir, default=str(DATA),
                    help="a collection folder (corpus.jsonl, queries.jsonl, qrels/test.tsv)")
    ap.add_argument("--batch-size", type=positive_int, default=16, help="documents scored together")
    ap.add_argument("--out", type=output_file, default="docs/results/latent_storage.json", help="JSON to write")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    started = time.perf_counter()
    data = Path(args.data)
    analyzer = Analyzer()
    corpus = analyze_corpus(data / "corpus.jsonl", analyzer)
    vocab = corpus.vocab
    factory, info = load_qti_model(args.model)
    model = factory(vocab)
    if not model.is_latent or "one" not in model.impact_channels:
        raise OptionError(f"{info.get('id')}: not a latent model (NDRM1 or NDRM3); nothing to simulate", ("model",))
    documents = corpus.token_lists(0, len(corpus))
    scorer = ImpactScorer(model, np.asarray(vocab.df[:len(vocab)]), ImpactConfig(batch_size=args.batch_size))
    offsets = scorer.fit_offsets(documents, len(vocab))  # the indexer's offsets

    qrels = read_qrels(data / "qrels" / "test.tsv")
    parsed = parse_queries({q: t for q, t in read_queries(data / "queries.jsonl").items() if q in qrels},
                           analyzer, vocab.terms)
    qterms = np.array(sorted({t for c in parsed.values() for t in c}), np.int64)
    cand_ids = scorer._cand_terms.cpu().numpy()
    sample = np.random.default_rng(0).choice(cand_ids, SAMPLE_TERMS, replace=False)
    terms = np.concatenate([qterms, np.sort(sample)])
    nq = qterms.size
    sc = score_documents(model, scorer, documents, terms, args.batch_size)

    col = {int(t): i for i, t in enumerate(qterms)}
    docids = corpus.docs["docid"]
    c = offsets[terms][None, :]
    above = sc.lat - c > 0
    base = (sc.full - sc.lat)[:, :nq]  # the explicit part (zero off a document's own terms)
    exhaustive = run_of(sc.full[:, :nq], parsed, col, docids)
    ex_ndcg = float(evaluate(exhaustive, qrels).mean["nDCG@10"])
    rows = []
    for name, stored in policies(sc).items():
        kept = np.where(stored, np.maximum(sc.lat - c, 0.0), 0.0) + c
        run = run_of(base + kept[:, :nq], parsed, col, docids)
        ndcg = float(evaluate(run, qrels).mean["nDCG@10"])
        per_doc = float((stored & above)[:, nq:].mean() * cand_ids.size)  # sampled pairs stored, times the vocabulary
        rows.append({"candidates": name, "latent_postings_per_doc": per_doc,
                     "overlap_at_100": mean_overlap_at_k(run, exhaustive, 100),
                     "ndcg10": ndcg, "delta_ndcg10": ndcg - ex_ndcg})
    print(f"exhaustive nDCG@10 {ex_ndcg:.4f}; {len(documents)} documents, {len(parsed)} queries, model {info.get('id')}")
    print("| candidates | latent postings a document (est.) | overlap@100 | nDCG@10 | delta |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['candidates']} | {r['latent_postings_per_doc']:,.0f} | {r['overlap_at_100']:.4f} | "
              f"{r['ndcg10']:.4f} | {r['delta_ndcg10']:+.4f} |")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"model": info.get("id"), "documents": len(documents), "queries": len(parsed),
                               "exhaustive_ndcg10": ex_ndcg, "seconds": time.perf_counter() - started,
                               "command": command_line("latent_storage.py", argv), "rows": rows}, indent=2))


if __name__ == "__main__":
    sys.exit(run(main))
