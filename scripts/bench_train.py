"""Training throughput: optimizer steps a second of ``ckqti train`` for NDRM3, TK, TKL and IDCM's
three stages, on the CPU and on CUDA when present, with a table and JSON.

    python scripts/bench_train.py [--models ndrm3,tk,tkl,idcm] [--devices cpu,cuda] [--steps 8] \\
        [--out docs/results/bench_train.json]

Each row trains as ``ckqti train`` does with its defaults (NDRM3: the bundled model's settings of
``scripts/train_default.py``; TK, TKL and IDCM: :class:`ckqti.train.reranker_config.RerankerTrainConfig`'s),
on SciFact train: the model built, initialised and optimised by the same functions, the same
batches, the same step (sampling, padding, forward, loss, backward, Adam). Two steps are taken
untimed, then ``--steps`` timed; an epoch's time is projected from that rate and the number of steps
an epoch of SciFact train takes (validation not counted). What differs from a real run: each
training claim's candidates are 100 documents drawn at random (seed 0) instead of Pyserini's BM25
top 100, which needs Java; a step's cost depends on how many documents it scores and how long they
are, and these are as many, their lengths drawn from the whole corpus rather than from BM25's top. TK and TKL start from random embeddings here (their default, skip-gram, needs
gensim and a minute of training first; the start does not change a step's cost); NDRM3 starts
from MiniLM's, as bundled, since its latent gate's cost depends on which pairs the vectors open.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.args import HelpFormatter, command_line, names_from, output_file, positive_int, run, usable_devices  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "scifact"
MODELS = ("ndrm3", "tk", "tkl", "idcm")
CANDIDATES = 100


def random_candidates(docids: list[str], qids, seed: int = 0) -> dict[str, list[str]]:
    """``CANDIDATES`` documents drawn at random for every query (the stand-in for BM25's top 100)."""
    rng = np.random.default_rng(seed)
    return {q: [docids[i] for i in rng.choice(len(docids), CANDIDATES, replace=False)] for q in sorted(qids)}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(run_steps, steps: int, device: torch.device) -> tuple[float, float | None]:
    """Seconds a step of ``run_steps(n)`` (after 2 untimed steps) and peak CUDA memory (GiB) while timed."""
    run_steps(2)
    sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    started = time.perf_counter()
    run_steps(steps)
    sync(device)
    seconds = (time.perf_counter() - started) / steps
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
    return seconds, peak


def bench_ndrm3(device: torch.device, steps: int, queries, qrels) -> list[dict]:
    from ckqti.train.data import load_collection
    from ckqti.train.ndrm_config import TrainConfig
    from ckqti.train.ndrm_data import prepare_data
    from ckqti.train.ndrm_epoch import epoch_examples, train_step
    from ckqti.train.ndrm_start import build_model, parameter_groups
    from scripts.train_default import CONFIG

    config = TrainConfig(**CONFIG, device=str(device), progress=False)
    collection = load_collection(DATA / "corpus.jsonl", min_df=config.min_df)
    data = prepare_data(collection, queries, qrels, config, candidates=random_candidates(collection.docids, qrels))
    torch.manual_seed(config.seed)
    model = build_model(data, config, device, init=True)
    optimizer = torch.optim.Adam(parameter_groups(model, config.lr, config.head_lr))
    examples = epoch_examples(data, config, 0)
    batches = [examples[i: i + config.batch_size] for i in range(0, len(examples), config.batch_size)]
    doc_terms = config.train_doc_terms or model.config.max_doc_terms
    model.train()
    taken = [0]

    def run_steps(n: int) -> None:
        for _ in range(n):
            train_step(model, optimizer, batches[taken[0] % len(batches)], data, doc_terms, device, config)
            taken[0] += 1

    seconds, peak = timed(run_steps, steps, device)
    docs = len(batches[0]) * len(batches[0][0].docs)
    return [row("ndrm3", "", device, seconds, peak, docs, len(batches))]


def bench_rerankers(kind: str, device: torch.device, steps: int, queries, qrels) -> list[dict]:
    from ckqti.train import rerankers
    from ckqti.train.reranker_config import RerankerTrainConfig
    from ckqti.train.reranker_data import build_text, prepare_pairs
    from ckqti.train.reranker_epoch import train_epoch
    from ckqti.train.reranker_idcm import idcm_stage_setup
    from ckqti.train.reranker_tk import new_term_model

    config = RerankerTrainConfig(kind=kind, embeddings="random", device=str(device), progress=False)
    text, docids, doc_texts, collection = build_text(kind, DATA / "corpus.jsonl", config, None)
    max_q, max_d = rerankers._config_defaults(kind, config)
    doc_rows = (text.ids_many(doc_texts, max_d) if doc_texts is not None
                else [np.asarray(collection.doc(i)[:max_d], dtype=np.int64) for i in range(len(collection))])
    data = prepare_pairs(text, docids, doc_rows, queries, qrels, random_candidates(docids, qrels), config, max_q)
    epoch_steps = math.ceil(len(data.train_qids) / config.batch_size)
    torch.manual_seed(config.seed)
    if kind == "idcm":
        from ckqti.models.idcm import IDCM, IDCMConfig

        model = IDCM.from_minilm(IDCMConfig(**config.model_options), device=device)
        stages = [(f"stage {s}", *idcm_stage_setup(model, s, config)) for s in config.stages]
    else:
        model = new_term_model(kind, text, collection, config).to(device)
        stages = [("", model, None, torch.optim.Adam(model.parameter_groups(config.lr_encoder, config.lr_rest)))]
    rows = []
    for name, score, loss_fn, optimizer in stages:
        def run_steps(n: int, score=score, loss_fn=loss_fn, optimizer=optimizer) -> None:
            train_epoch(None if loss_fn else score, loss_fn, model, optimizer, data, replace(config, max_steps=n), 0,
                          device)

        seconds, peak = timed(run_steps, steps, device)
        rows.append(row(kind, name, device, seconds, peak, 2 * config.batch_size, epoch_steps))
    return rows


def row(model: str, stage: str, device: torch.device, seconds: float, peak: float | None, docs: int,
        epoch_steps: int) -> dict:
    return {"model": model, "stage": stage, "device": device.type,
            "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
            "seconds_per_step": seconds, "steps_per_second": 1.0 / seconds, "documents_per_step": docs,
            "documents_per_second": docs / seconds, "epoch_steps": epoch_steps, "epoch_seconds": epoch_steps * seconds,
            "peak_cuda_gib": peak}


def print_table(rows: list[dict]) -> None:
    print(f"{'model':<6} {'stage':<8} {'device':<6} {'steps/s':>8} {'docs/s':>9} {'s/epoch':>8} {'peak GiB':>8}")
    for r in rows:
        peak = "" if r["peak_cuda_gib"] is None else f"{r['peak_cuda_gib']:.2f}"
        print(f"{r['model']:<6} {r['stage']:<8} {r['device']:<6} {r['steps_per_second']:>8.2f} "
              f"{r['documents_per_second']:>9.1f} {r['epoch_seconds']:>8.1f} {peak:>8}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options; unknown models or devices, a count below 1 or an output path that cannot be
    written are usage errors here, before any training step."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    ap.add_argument("--models", type=names_from(MODELS), default=",".join(MODELS),
                    help=f"comma-separated, among {', '.join(MODELS)}")
    ap.add_argument("--devices", type=names_from(("cpu", "cuda")), default="cpu,cuda",
                    help="comma-separated; cuda is skipped where absent")
    ap.add_argument("--steps", type=positive_int, default=8, help="timed steps a row (after 2 untimed)")
    ap.add_argument("--out", type=output_file, default=str(ROOT / "docs" / "results" / "bench_train.json"),
                    help="JSON to write")
    args = ap.parse_args(argv)
    args.devices = usable_devices(ap, args.devices)
    return args


def main(argv: list[str] | None = None) -> None:
    from indexer.readers import read_qrels, read_queries

    args = parse_args(argv)
    models, devices = list(dict.fromkeys(args.models)), args.devices
    queries, qrels = read_queries(DATA / "queries.jsonl"), read_qrels(DATA / "qrels" / "train.tsv")
    rows = []
    for device in devices:
        for m in models:
            started = time.perf_counter()
            new = (bench_ndrm3(device, args.steps, queries, qrels) if m == "ndrm3"
                   else bench_rerankers(m, device, args.steps, queries, qrels))
            print(f"{m} on {device}: {time.perf_counter() - started:.0f} s with set-up", file=sys.stderr, flush=True)
            rows += new
    print_table(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": command_line("bench_train.py", argv), "torch": torch.__version__, "threads": torch.get_num_threads(),
                                    "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(run(main))
