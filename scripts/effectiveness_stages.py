"""How ``scripts/effectiveness.py`` makes each run: BM25, the checkpoints (trained, written or
derived), the learned indexes, fullrank and rerank runs, each cached under the work folder so that
a rerun skips finished work."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from scripts.args import shown
from scripts.effectiveness_registry import (
    CHECKPOINTS,
    FIRST_STAGE_DEPTH,
    IDCM_GPU_STAGES,
    IDCM_STAGES,
    NEW_WORD_ROWS,
    RERANK_DEPTH,
    ROOT,
    WORK,
    CollectionSpec,
    Row,
    collections,
    ndrm_config,
    reranker_config,
)
from scripts.train_default import OUT as BUNDLED

SHARD_SIZE = 2500  # small shards: an interrupted index build resumes after its last shard


def orcas_pairs(train_qrels: Mapping[str, Mapping[str, int]], queries: Mapping[str, str],
                test_qids: Iterable[str]) -> list[tuple[str, str]]:
    """``(docid, claim)`` for every relevant (grade > 0) judgement of a training claim, qrels order.

    The ORCAS-style field: training claims act as clicked queries of the documents they cite.
    Raises ValueError when a training claim is also a test claim (it would leak test queries
    into the index); whitespace in a claim becomes single spaces (one claim per TSV line).
    """
    leaked = sorted(set(train_qrels) & set(test_qids))
    if leaked:
        raise ValueError(f"{len(leaked)} test claims are among the training qrels, e.g. {leaked[:3]}")
    out = []
    for qid, judged in train_qrels.items():
        text = " ".join(queries.get(qid, "").split())
        if text:
            out += [(docid, text) for docid, grade in judged.items() if grade > 0]
    return out


def rank_scored(ranked: Mapping[str, Sequence[str]], depth: int) -> dict[str, list[tuple[str, float]]]:
    """A run from ranked docids: score ``depth - rank`` keeps the given order whatever trec_eval's tie rule."""
    return {q: [(d, float(depth - i)) for i, d in enumerate(docs[:depth])] for q, docs in ranked.items()}


def with_tail(reranked: Mapping[str, Sequence[tuple[str, float]]], candidates: Mapping[str, Sequence[str]],
              depth: int) -> dict[str, list[tuple[str, float]]]:
    """Reranked top documents first (model order), then the rest of ``candidates[:depth]`` in their order.

    Scores are rewritten as ``depth - rank`` so the combined list reads back in this order.
    """
    out = {}
    for qid, docs in candidates.items():
        head = [d for d, _ in reranked.get(qid, [])]
        seen = set(head)
        order = head + [d for d in docs[:depth] if d not in seen]
        out[qid] = [(d, float(depth - i)) for i, d in enumerate(order)]
    return out


# -- stage 1: BM25 -------------------------------------------------------------------------------


def judged_queries(spec: CollectionSpec) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """The collection's judged queries (text) and its qrels."""
    from indexer.readers import read_qrels, read_queries

    qrels = read_qrels(spec.qrels, spec.qrels_format)
    queries = read_queries(spec.queries)
    return {q: t for q, t in queries.items() if q in qrels}, qrels


def run_path(key: str, coll: str, work: Path = WORK) -> Path:
    return work / "runs" / coll / f"{key}.trec"


def bm25_ranked(spec: CollectionSpec, work: Path, force: bool = False) -> dict[str, list[str]]:
    """Pyserini BM25's top 1,000 docids of every judged query (the run file, built once)."""
    from retriever.run_reader import read_run
    from retriever.run_writer import write_run
    from retriever.runs import trec_order

    path = run_path("bm25", spec.name, work)
    if force or not path.is_file():
        from ckqti.bm25 import bm25_candidates

        queries, _ = judged_queries(spec)
        started = time.perf_counter()
        ranked = bm25_candidates(spec.corpus, queries, work / "bm25" / spec.name, FIRST_STAGE_DEPTH)
        write_run(path, rank_scored(ranked, FIRST_STAGE_DEPTH), "pyserini-bm25")
        write_meta(path, {"seconds": time.perf_counter() - started, "depth": FIRST_STAGE_DEPTH})
    return {q: [d for d, _ in trec_order(docs)] for q, docs in read_run(path).items()}


def device_name(device) -> str:
    """``"cpu"`` or the CUDA card's name (a row's time depends on it)."""
    import torch

    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def write_meta(run: Path, meta: Mapping) -> None:
    run.with_suffix(".json").write_text(json.dumps(dict(meta), indent=1) + "\n")


def read_meta(run: Path) -> dict:
    side = run.with_suffix(".json")
    return json.loads(side.read_text()) if side.is_file() else {}


# -- stage 2: checkpoints ------------------------------------------------------------------------


def checkpoint_path(key: str, work: Path = WORK) -> Path:
    return BUNDLED if key == "ndrm3" else work / "checkpoints" / f"{key}.pt"


def scifact_train_inputs(work: Path) -> tuple[dict[str, str], dict[str, dict[str, int]], dict[str, list[str]]]:
    """SciFact claims, train qrels (dev is carved from them by each trainer) and their BM25 top 100 (cached)."""
    from indexer.readers import read_qrels, read_queries

    sf = collections()["scifact"]
    queries = read_queries(sf.queries)
    qrels = read_qrels(sf.corpus.parent / "qrels" / "train.tsv")
    cache = work / "bm25" / "scifact-train-top100.json"
    if not cache.is_file():
        from ckqti.bm25 import bm25_candidates

        judged = {q: queries[q] for q in qrels if q in queries}
        cands = bm25_candidates(sf.corpus, judged, work / "bm25" / "scifact", RERANK_DEPTH)
        cache.write_text(json.dumps(cands))
    return queries, qrels, json.loads(cache.read_text())


def scifact_title_inputs(work: Path) -> tuple[dict[str, str], dict[str, list[str]]]:
    """SciFact's title pseudo-queries (:func:`ckqti.train.pseudo.title_pseudo_queries`, ``title:<docid>``)
    and their BM25 top 100 (Pyserini, cached next to the claims'; a GPU machine without Java reads
    the cache that ``scripts/gpu_bundle.py`` carries)."""
    from ckqti.text import Analyzer
    from ckqti.train.data import load_collection
    from ckqti.train.pseudo import title_pseudo_queries

    sf = collections()["scifact"]
    coll = load_collection(sf.corpus, Analyzer())
    queries, _ = title_pseudo_queries(coll.docids, coll.titles, coll.analyzer)
    cache = work / "bm25" / "scifact-titles-top100.json"
    if not cache.is_file():
        from ckqti.bm25 import bm25_candidates

        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(bm25_candidates(sf.corpus, queries, work / "bm25" / "scifact", RERANK_DEPTH)))
    return queries, json.loads(cache.read_text())


def train_checkpoint(key: str, work: Path) -> dict:
    """Train checkpoint ``key`` on SciFact train; returns its training record."""
    sf = collections()["scifact"]
    out = checkpoint_path(key, work)
    queries, qrels, cands = scifact_train_inputs(work)
    config = ndrm_config(key.removesuffix("-trained")) if key.startswith("ndrm") else reranker_config(key)
    if config.weak_supervision == "titles":
        cands = {**cands, **scifact_title_inputs(work)[1]}  # cached: no Java where it trains
    files = {"teacher": config.teacher, "embeddings": config.embeddings if config.embeddings.endswith(".pt") else None}
    trained = replace(config, **{f: str(ROOT / v) for f, v in files.items() if v})  # recorded as named: relative paths
    started = time.perf_counter()
    if key.startswith("ndrm"):  # the untrained NDRM2s and the bundled NDRM3 never come here (ensure_checkpoint)
        from ckqti.train import train

        res = train(sf.corpus, queries, qrels, out, trained, candidates=cands, work_dir=work / "train" / key)
        record = {"dev_ndcg10": res.best_dev_ndcg10, "best_epoch": res.best_epoch, "history": list(res.history)}
    elif key.startswith("idcm"):
        record = train_idcm(key, out, queries, qrels, cands, work)
    else:
        from ckqti.train.rerankers import train_reranker

        res = train_reranker(trained.kind, sf.corpus, queries, qrels, out, trained, candidates=cands,
                             work_dir=work / "train" / key)
        record = {"dev_ndcg10": res.best_dev_ndcg10, "history": list(res.history)}
    return {"config": config.to_dict(), "seconds": time.perf_counter() - started, **record}


def train_idcm(key: str, out: Path, queries, qrels, cands, work: Path) -> dict:
    """IDCM's three stages with the epochs and step caps of :data:`IDCM_STAGES` (``idcm-gpu``:
    :data:`IDCM_GPU_STAGES`), one call per stage; each call resumes after the stages already saved
    in the work folder."""
    from ckqti.train.rerankers import train_reranker

    base = reranker_config(key)
    plan = IDCM_GPU_STAGES if "-gpu" in key else IDCM_STAGES
    res = None
    for stage, (epochs, steps) in plan.items():
        config = replace(base, stages=tuple(range(1, stage + 1)), epochs=epochs, distill_epochs=epochs, max_steps=steps)
        res = train_reranker("idcm", collections()["scifact"].corpus, queries, qrels, out, config, candidates=cands,
                             work_dir=work / "train" / key)
    return {"dev_ndcg10": res.best_dev_ndcg10, "history": list(res.history),
            "stages": {s: {"epochs": e, "max_steps": m} for s, (e, m) in plan.items()}}


def untrained_ndrm2(out: Path, spec: str = "ndrm2") -> dict:
    """Write the untrained NDRM2 ``spec`` (``"ndrm2"``: the paper's start, ``"ndrm2-anserini"``:
    BM25's k1 0.9, b 0.4) for SciFact's vocabulary as a checkpoint (so it reranks like the others)."""
    from ckqti.models.checkpoint import save_checkpoint
    from ckqti.models.ndrm import build_ndrm
    from ckqti.models.ndrm_config import NDRMConfig
    from ckqti.models.specs import UNTRAINED
    from ckqti.train.data import load_collection

    coll = load_collection(collections()["scifact"].corpus)
    config = NDRMConfig(vocab_size=len(coll.vocab), variant="ndrm2", bm25_init=UNTRAINED[spec])
    model = build_ndrm(config, coll.vocab).eval()
    start = "w = 1, b = 0" if config.bm25_init is None else "BM25 k1 {}, b {}".format(*config.bm25_init)
    save_checkpoint(out, model, "ndrm2", model.config.to_dict(), coll.vocab, coll.analyzer,
                    {"trained_by": f"nobody: untrained NDRM2 ({start})"})
    return {"config": "untrained", "seconds": 0.0}


#: ``ndrm3-wise``'s grid of interpolation weights (1: the bundled word vectors) and its dev tolerance.
WISE_ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0)
WISE_TOLERANCE = 0.01


def pick_alpha(dev: Mapping[float, float], tolerance: float = WISE_TOLERANCE) -> float:
    """The smallest alpha whose dev nDCG@10 is at least alpha 1's minus ``tolerance`` (``ndrm3-wise``)."""
    floor = dev[1.0] - tolerance
    return min(alpha for alpha, ndcg in dev.items() if ndcg >= floor)


def dev_through_index(checkpoint: Path, folder: Path) -> dict:
    """The dev claims (listed in the checkpoint) retrieved through a learned index of SciFact built in
    ``folder``: how the bundled settings were chosen (:func:`scripts.train_default.dev_fullrank`)."""
    from ckqti import api
    from scripts.train_default import dev_fullrank

    api.index(collections()["scifact"].corpus, folder / "index", model=str(checkpoint), shard_size=SHARD_SIZE,
              force=True)
    return dev_fullrank(checkpoint, folder)


def alpha_grid_checkpoint(key: str, folder: str, derived_from: str | list[str], make, out: Path, work: Path) -> dict:
    """A derived checkpoint chosen on a grid: ``make(alpha, path)`` writes the model at each alpha of
    :data:`WISE_ALPHAS` (1: the bundled model) from the checkpoint(s) ``derived_from``, its dev claims are
    retrieved through a learned index of SciFact (:func:`dev_through_index`), and the
    :func:`pick_alpha` one is copied to ``out``. Each alpha's dev result is cached under
    ``work / folder`` with the sources' ids, so an interrupted search resumes and a changed
    source is redone."""
    from ckqti.models.checkpoint import load_checkpoint

    started = time.perf_counter()
    ids = [load_checkpoint(checkpoint_path(k, work)).id for k in ([derived_from] if isinstance(derived_from, str)
                                                                   else derived_from)]
    dev = {}
    for alpha in WISE_ALPHAS:
        here = work / folder / f"alpha-{alpha:g}"
        side = here / "dev.json"
        if not side.is_file() or json.loads(side.read_text()).get("sources") != ids:
            here.mkdir(parents=True, exist_ok=True)
            path = make(alpha, here / "model.pt").path
            side.write_text(json.dumps({"alpha": alpha, "sources": ids, **dev_through_index(path, here)}, indent=1)
                            + "\n")
        dev[alpha] = json.loads(side.read_text())["mean"]["nDCG@10"]
        print(f"[checkpoint] {key}: alpha {alpha:g}, dev claims through the index nDCG@10 {dev[alpha]:.4f}", flush=True)
    alpha = pick_alpha(dev)
    shutil.copyfile(work / folder / f"alpha-{alpha:g}" / "model.pt", out)
    return {"config": {"derived_from": derived_from, "alphas": list(WISE_ALPHAS), "tolerance": WISE_TOLERANCE},
            "alpha": alpha, "dev_by_alpha": {f"{a:g}": v for a, v in dev.items()}, "dev_ndcg10": dev[alpha],
            "seconds": time.perf_counter() - started}


def wise_checkpoint(out: Path, work: Path) -> dict:
    """``ndrm3-wise``: the bundled NDRM3's word vectors at ``alpha`` between their start and the
    trained rows (:func:`ckqti.train.interpolate.interpolate_embeddings`), alpha by
    :func:`alpha_grid_checkpoint`."""
    from ckqti.train.interpolate import interpolate_embeddings

    return alpha_grid_checkpoint("ndrm3-wise", "wise", "ndrm3", lambda a, p: interpolate_embeddings(BUNDLED, a, p),
                                 out, work)


def soup_dev_checkpoint(out: Path, work: Path) -> dict:
    """``ndrm3-soup-dev``: ``alpha`` x the bundled NDRM3 + ``1 - alpha`` x ``ndrm3-frozen``
    (:func:`ckqti.train.interpolate.average_checkpoints`), alpha by :func:`alpha_grid_checkpoint`."""
    from ckqti.train.interpolate import average_checkpoints

    frozen = checkpoint_path("ndrm3-frozen", work)
    ensure_checkpoint("ndrm3-frozen", work)
    return alpha_grid_checkpoint("ndrm3-soup-dev", "soup-dev", ["ndrm3", "ndrm3-frozen"],
                                 lambda a, p: average_checkpoints([BUNDLED, frozen], [a, 1.0 - a], p), out, work)


#: ``ndrm3-soup``'s ingredients and weights (a uniform soup, decided before the run).
SOUP = {"ndrm3": 0.5, "ndrm3-frozen": 0.5}


def soup_checkpoint(out: Path, work: Path) -> dict:
    """``ndrm3-soup``: the :data:`SOUP` average of the bundled NDRM3 and ``ndrm3-frozen``
    (:func:`ckqti.train.interpolate.average_checkpoints`); its dev claims through its learned
    index are recorded, not used to choose."""
    from ckqti.train.interpolate import average_checkpoints

    started = time.perf_counter()
    for key in SOUP:
        ensure_checkpoint(key, work)
    path = average_checkpoints([checkpoint_path(k, work) for k in SOUP], list(SOUP.values()), out).path
    dev = dev_through_index(path, work / "soup")
    return {"config": {"derived_from": list(SOUP), "weights": list(SOUP.values())},
            "dev_ndcg10": dev["mean"]["nDCG@10"], "seconds": time.perf_counter() - started}


#: How each derived checkpoint (no training of its own) is made.
DERIVED_NDRM = {"ndrm3-wise": wise_checkpoint, "ndrm3-soup": soup_checkpoint, "ndrm3-soup-dev": soup_dev_checkpoint}


def ensure_checkpoint(key: str, work: Path, retrain: bool = False) -> dict:
    """The checkpoint's training record; trains (or writes) it first when missing or ``retrain``."""
    if key == "ndrm3":
        from ckqti.models.checkpoint import load_checkpoint

        record = json.loads(BUNDLED.with_suffix(".json").read_text())
        return {"key": key, "model_id": load_checkpoint(BUNDLED).id, "config": record["config"], "seconds": record.get("seconds"), "command": record.get("command"),
                "dev_ndcg10": record["training"]["dev_ndcg10"], "history": record["training"]["history"]}
    out = checkpoint_path(key, work)
    side = out.with_suffix(".json")
    if out.is_file() and side.is_file() and not retrain:
        return json.loads(side.read_text())
    made = CHECKPOINTS[key][1]
    print(f"[checkpoint] {key}: {'training' if made.startswith('trained') else 'writing'}", flush=True)
    if made == "untrained":
        record = untrained_ndrm2(out, key)
    else:
        record = DERIVED_NDRM[key](out, work) if made == "derived" else train_checkpoint(key, work)
    from ckqti.models.checkpoint import load_checkpoint

    record = {"key": key, "model_id": load_checkpoint(out).id, **record}
    side.write_text(json.dumps(record, indent=1, default=str) + "\n")
    print(f"[checkpoint] {key}: {record['model_id']} in {record['seconds']:.0f} s", flush=True)
    return record


# -- stage 3: fullrank ---------------------------------------------------------------------------


def orcas_file(work: Path) -> Path:
    """``docid<TAB>claim`` lines from SciFact *train* claims (:func:`orcas_pairs`), written again
    whenever the file in ``work`` holds anything else (an older run's, edited: a test claim in it
    would reach the index as a click); an unchanged file keeps its times."""
    from ckqti.files import replacing
    from indexer.readers import read_qrels, read_queries

    sf = collections()["scifact"]
    path = work / "orcas-scifact-train.tsv"
    pairs = orcas_pairs(read_qrels(sf.corpus.parent / "qrels" / "train.tsv"), read_queries(sf.queries),
                        read_qrels(sf.qrels))
    text = "".join(f"{d}\t{q}\n" for d, q in pairs)
    if not path.is_file() or path.read_bytes() != text.encode("utf-8"):
        with replacing(path) as tmp:
            tmp.write_text(text, encoding="utf-8")
    return path


def queries_file(spec: CollectionSpec, work: Path) -> Path:
    """The judged queries as ``qid<TAB>text`` (what ``ckqti run`` reads)."""
    path = work / "queries" / f"{spec.name}.tsv"
    if not path.is_file():
        queries, _ = judged_queries(spec)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{q}\t{' '.join(t.split())}\n" for q, t in queries.items()), encoding="utf-8")
    return path


def learned_index(model_key: str, spec: CollectionSpec, work: Path, force: bool = False, orcas: bool = False) -> Path:
    """The learned index of a checkpoint over a collection (built when missing, built by another
    model than the checkpoint now holds, older than the ORCAS-style file :func:`orcas_file` wrote
    since, or ``force``)."""
    from ckqti import api
    from ckqti.models.checkpoint import load_checkpoint

    untrained = CHECKPOINTS[model_key][1] == "untrained"
    model = model_key if untrained else str(checkpoint_path(model_key, work))
    index_dir = work / "indexes" / f"{spec.name}-{model_key}{'-orcas' if orcas else ''}"
    manifest = index_dir / "manifest.json"
    clicks = orcas_file(work) if orcas else None
    stale = manifest.is_file() and (
        (not untrained and json.loads(manifest.read_text())["model"].get("id") != load_checkpoint(model).id)
        or (clicks is not None and clicks.stat().st_mtime_ns > manifest.stat().st_mtime_ns))
    if force or stale or not manifest.is_file():
        api.index(spec.corpus, index_dir, model=model, orcas=clicks, shard_size=SHARD_SIZE, force=True)
    return index_dir


def adapted_weights(model_key: str, index_dir: Path, work: Path) -> dict[str, float]:
    """Channel weights matching the index's channel spreads to the same model's SciFact index's
    (``ndrm3a-full``; :func:`retriever.adapt.matched_channel_weights`)."""
    from retriever.adapt import channel_spreads, matched_channel_weights
    from retriever.index import Index

    source = channel_spreads(Index(learned_index(model_key, collections()["scifact"], work)))
    return matched_channel_weights(source, channel_spreads(Index(index_dir)))


def fullrank(row: Row, spec: CollectionSpec, work: Path, force: bool) -> dict:
    """Build (or reuse) the learned index of the row's model and run every judged query through it
    (``row.adapted``: with :func:`adapted_weights`)."""
    from ckqti import api

    started = time.perf_counter()
    index_dir = learned_index(row.model, spec, work, force, row.orcas)
    built = time.perf_counter()
    weights = adapted_weights(row.model, index_dir, work) if row.adapted else None
    stats = api.run(index_dir, queries_file(spec, work), run_path(row.key, spec.name, work), k=FIRST_STAGE_DEPTH,
                    threads=2, channel_weights=weights)
    manifest = json.loads((index_dir / "manifest.json").read_text())
    return {"index": shown(index_dir), "index_seconds": manifest["build"]["seconds"],
            "index_seconds_here": built - started, "run_seconds": stats.seconds, "skipped_queries": stats.skipped,
            "postings": manifest.get("num_postings"), **({"channel_weights": weights} if weights else {})}


# -- stage 4: rerank -----------------------------------------------------------------------------


def rerank(row: Row, spec: CollectionSpec, work: Path, ranked: Mapping[str, list[str]]) -> dict:
    """Rerank BM25's top ``row.depth`` with the row's checkpoint (``row.orcas``: reading each document with its
    ORCAS-style field first, as ``ckqti rerank --orcas``); the rest of the top 100 keeps BM25's order."""
    from ckqti.models.checkpoint import QTI_KINDS
    from retriever.candidate_text import corpus_texts
    from retriever.rerank_model import open_reranker
    from retriever.rerank_scoring import rerank_candidates
    from retriever.run_writer import write_run

    queries, _ = judged_queries(spec)
    path = str(checkpoint_path(row.model, work))
    # zero-shot: TK, TKL and NDRM read the collection's vocabulary; IDCM's WordPiece needs no adapting
    reranker = open_reranker(path, None, None, spec.corpus if spec.zero_shot else None, None, ("tk", "tkl", *QTI_KINDS))
    cands = {q: ranked.get(q, [])[: row.depth] for q in queries}
    texts = corpus_texts(spec.corpus, keep={d for docs in cands.values() for d in docs},
                         orcas=orcas_file(work) if row.orcas else None)  # BM25's candidates come from the plain corpus
    started = time.perf_counter()
    batch = 128 if reranker.device.type == "cuda" else (16 if row.model.startswith("idcm") else 32)
    scored = rerank_candidates(reranker, queries, cands, texts, batch_size=batch, progress=True)
    check = check_qti_rerank(reranker, queries, cands, texts, scored) if reranker.kind in QTI_KINDS else None
    seconds = time.perf_counter() - started
    if row.depth < RERANK_DEPTH:
        scored = with_tail(scored, {q: ranked.get(q, []) for q in queries}, RERANK_DEPTH)
    write_run(run_path(row.key, spec.name, work), scored, f"ckqti-{row.key}")
    pairs = sum(len(c) for c in cands.values())
    return {"model_id": reranker.model_id, "device": device_name(reranker.device), "depth": row.depth, "pairs": pairs,
            "seconds": seconds,
            "docs_per_second": pairs / seconds if seconds > 0 else None, "reads": reranker.max_doc_length,
            "adapted_vocabulary": spec.zero_shot and reranker.kind != "idcm", "qti_check_max_rel_diff": check}


def check_qti_rerank(reranker, queries, cands, texts, run, sample: int = 40) -> float:
    """Largest difference between an NDRM rerank's scores (each document encoded once for all its queries,
    :func:`retriever.rerank_scoring.qti_term_scores`) and the model's forward on ``sample`` pairs.

    Raises RuntimeError above 1e-3 relative: the shortcut would not be the model.
    """
    import numpy as np

    from retriever.rerank_scoring import DocumentRows

    rows = DocumentRows(reranker, texts)
    pairs = [(q, d) for q in list(run)[:sample] for d, _ in (run[q][0], run[q][-1])]
    worst = 0.0
    for q, d in pairs:
        r, n = rows.get(d)
        direct = float(reranker.score_rows(reranker.query_ids(queries[q]), [r], [n])[0])
        fast = dict(run[q])[d]
        worst = max(worst, abs(direct - fast) / max(1.0, abs(direct)))
    if not np.isfinite(worst) or worst > 1e-3:
        raise RuntimeError(f"QTI reranking differs from the model's forward by {worst:.2e}")
    return worst


def produce(row: Row, coll: str, work: Path, force: bool) -> None:
    """Make one run (skipped when its file exists, unless ``force``)."""
    spec = collections()[coll]
    path = run_path(row.key, coll, work)
    ranked = bm25_ranked(spec, work, force and row.mode == "bm25")
    if row.mode == "bm25" or (path.is_file() and not force):
        return
    record = ensure_checkpoint(row.model, work)
    print(f"[{row.mode}] {row.key} on {coll}", flush=True)
    started = time.perf_counter()
    meta = fullrank(row, spec, work, force) if row.mode == "fullrank" else rerank(row, spec, work, ranked)
    meta = {"checkpoint": record.get("model_id", row.model), **meta, "total_seconds": time.perf_counter() - started,
            "new_word_rows": NEW_WORD_ROWS}
    write_meta(path, meta)
    print(f"[{row.mode}] {row.key} on {coll}: {meta['total_seconds']:.0f} s", flush=True)
