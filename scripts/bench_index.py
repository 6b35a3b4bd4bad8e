"""Indexing throughput: the single-process build against the Ray build with 1 and 2 CPU workers.

Each run builds an index of a corpus (default: all 5,183 SciFact documents) in a fresh
subprocess and reports wall-clock seconds of the whole build (model loading, analysis,
offsets, Ray start-up and actor start-up included: what ``ckqti index`` costs), documents
per second, and peak resident memory. Memory is sampled every 0.2 s over the build's whole
process tree, read from ``/proc``: the driver alone, the largest other process (a Ray
worker), and the sum over the tree (driver, Ray's GCS and raylet, workers; shared library
pages are counted once per process, so the sum overstates the physical memory in use).

Runs (``--modes``):

- ``single``: :func:`indexer.build.build_index`, torch with ``--threads`` intra-op threads
  (default: every core);
- ``ray1``, ``ray2``: :func:`indexer.distributed.build_index_ray` on a local Ray started by
  the build, with 1 or 2 CPU actors (each 1 torch thread, Ray's default for a 1-CPU actor).

Shards are the Ray build's unit of work, so every run uses ``--shard-size`` (default 500:
11 shards). Each Ray index is compared with the single-process index of the same model
(manifest without its ``build`` entry: every file's checksum), recorded as ``same_as_single``.

    nice -n 10 python3 scripts/bench_index.py                      # ndrm2 and the bundled NDRM3
    python3 scripts/bench_index.py --models ndrm2 --docs 1000 --out out/bench_index.json   # a quick look (the default --out is the committed report)
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ckqti.errors import InputError  # noqa: E402
from scripts.args import (  # noqa: E402
    HelpFormatter,
    existing_file,
    names_from,
    output_file,
    positive_int,
    run,
    shown,
    torch_device,
)

MODES = {"single": 0, "ray1": 1, "ray2": 2}
NAMED_MODELS = ("ndrm2", "ndrm2-anserini", "default")  # --models besides checkpoints ("default": the bundled NDRM3)


def tree_rss_kib(root: int) -> dict[int, int]:
    """Resident set (KiB) of ``root`` and every process below it."""
    parents, rss = {}, {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            status = (d / "status").read_text().splitlines()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status if ":" in line)
        parents[int(d.name)] = int(fields.get("PPid", "0").strip() or 0)
        rss[int(d.name)] = int(fields.get("VmRSS", "0 kB").split()[0]) if "VmRSS" in fields else 0
    keep, frontier = {root}, [root]
    while frontier:
        kids = [p for p, pp in parents.items() if pp in frontier and p not in keep]
        keep.update(kids)
        frontier = kids
    return {p: rss.get(p, 0) for p in keep}


class PeakMemory:
    """Samples the process tree's memory in a thread until stopped."""

    def __init__(self, every: float = 0.2):
        self.every, self.pid = every, os.getpid()
        self.driver = self.other = self.total = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = tree_rss_kib(self.pid)
            self.driver = max(self.driver, rss.get(self.pid, 0))
            self.other = max([self.other] + [v for p, v in rss.items() if p != self.pid])
            self.total = max(self.total, sum(rss.values()))
            self._stop.wait(self.every)

    def __enter__(self) -> "PeakMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def mib(self) -> dict[str, float]:
        return {k: round(getattr(self, k) / 1024, 1) for k in ("driver", "other", "total")}


def run_one(corpus: Path, out: Path, model: str, mode: str, shard_size: int, threads: int, device: str = "cpu") -> dict:
    """One build in this process (the child); returns its measurements."""
    import torch

    from ckqti import api
    from ckqti.threads import torch_threads

    workers = MODES[mode]
    with torch_threads(threads):
        t0 = time.perf_counter()
        with PeakMemory() as mem:
            m = api.index(corpus, out, model=None if model == "default" else model, shard_size=shard_size,
                          device=device, progress=False, ray_address="local" if workers else None,
                          workers=workers or None)
        seconds = time.perf_counter() - t0
    return {
        "model": model, "model_id": m.model.get("id"), "mode": mode, "workers": workers,
        "device": torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else "cpu",
        "torch_threads": 1 if workers else threads, "docs": m.num_docs, "shards": len(m.shards),
        "postings": m.num_postings, "seconds": round(seconds, 2), "docs_per_s": round(m.num_docs / seconds, 1),
        "peak_rss_mib": mem.mib(), "index": str(out),
    }


def same_index(a: Path, b: Path) -> bool:
    from indexer.format import Manifest

    da, db = (json.loads(Manifest.read(p).to_json()) for p in (a, b))
    da.pop("build"), db.pop("build")
    da.pop("corpus"), db.pop("corpus")
    return da == db


def ray_leftovers() -> int:
    """Ray worker processes still alive (after ``ray.shutdown`` they take a while to exit)."""
    n = 0
    for d in Path("/proc").iterdir():
        try:
            n += d.name.isdigit() and (d / "cmdline").read_bytes().startswith(b"ray::")
        except OSError:
            continue
    return n


def bench(corpus: Path, models: list[str], modes: list[str], shard_size: int, threads: int, work: Path,
          device: str = "cpu") -> list[dict]:
    rows = []
    for (i, model), mode in itertools.product(enumerate(models), modes):
        deadline = time.time() + 120
        while ray_leftovers() and time.time() < deadline:  # the previous run's workers still exiting
            time.sleep(1)
        # named by position: a checkpoint's absolute path joined to ``work`` would put the index beside the checkpoint
        out = work / f"model{i}-{mode}"
        cmd = [sys.executable, __file__, "--child", model, mode, str(out), "--corpus", str(corpus),
               "--shard-size", str(shard_size), "--threads", str(threads), "--device", device]
        load = os.getloadavg()[0]
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if res.returncode != 0:
            raise SystemExit(f"{Path(__file__).name}: error: the {model} {mode} build failed: {child_error(res.stderr)}")
        row = json.loads(res.stdout.strip().splitlines()[-1])
        row["model"] = model_label(model)
        row["load_before"], row["load_after"] = round(load, 2), round(os.getloadavg()[0], 2)
        single = work / f"model{i}-single"
        row["same_as_single"] = same_index(single, out) if mode != "single" and single.is_dir() else None
        rows.append(row)
        print(table([row], header=len(rows) == 1), flush=True)
    return rows


def model_label(model: str) -> str:
    """A model as the report records it: its name, or a checkpoint's path relative to the repository."""
    return model if model in NAMED_MODELS else shown(model)


def child_error(stderr: str) -> str:
    """What a failed build said: its one-line error (the child is this script, so the line repeats
    this script's ``<name>: error:`` prefix, dropped here), else the end of its output (a traceback)."""
    lines = stderr.strip().splitlines()
    prefix = f"{Path(__file__).name}: error: "
    if lines and lines[-1].startswith(prefix):
        return lines[-1][len(prefix):]
    return "\n" + stderr[-3000:]


def same(row: dict) -> str:
    """The table's last column: whether a Ray index equals the single-process one (n/a: a
    single-process row, or no single-process index of that model in this run to compare with)."""
    return {True: "yes", False: "NO"}.get(row.get("same_as_single"), "n/a")


def table(rows: list[dict], header: bool = True) -> str:
    head = f"{'model':<20} {'mode':<7} {'thr':>3} {'docs':>6} {'shards':>6} {'s':>8} {'docs/s':>8} {'driver MiB':>10} {'worker MiB':>10} {'tree MiB':>9} {'load':>5} same as single"
    lines = [head] if header else []
    for r in rows:
        mem = r["peak_rss_mib"]
        lines.append(
            f"{r['model_id']:<20} {r['mode'] + ('/gpu' if r.get('device', 'cpu') != 'cpu' else ''):<7} {r['torch_threads']:>3} {r['docs']:>6} {r['shards']:>6} {r['seconds']:>8.1f} {r['docs_per_s']:>8.1f} "
            f"{mem['driver']:>10.0f} {mem['other']:>10.0f} {mem['total']:>9.0f} {r.get('load_before', 0):>5.1f} {same(r)}"
        )
    return "\n".join(lines)


def merged(old: list[dict], new: list[dict]) -> list[dict]:
    """``old`` rows with ``new`` ones added, a new row replacing an old one of the same run."""
    key = lambda r: (r["model"], r["mode"], r["torch_threads"], r["docs"], r["shards"], r.get("device", "cpu"))  # noqa: E731
    fresh = {key(r) for r in new}
    return [r for r in old if key(r) not in fresh] + new


SCIFACT = DATA / "scifact" / "corpus.jsonl"


def corpus_slice(n: int | None, work: Path) -> Path:
    if n is None:
        return SCIFACT
    out = work / f"scifact-{n}.jsonl"
    with open(SCIFACT) as f, open(out, "w") as g:
        g.writelines(itertools.islice(f, n))
    return out


def corpus_label(corpus: Path | None, docs: int | None) -> str:
    """The report's corpus: ``--corpus``, else SciFact's (with ``--docs``, its first N; the report
    used to name the deleted temporary copy of them)."""
    path = os.path.relpath(corpus or SCIFACT, ROOT)
    return path if docs is None else f"{path} (first {docs} documents)"


def model_names(text: str) -> list[str]:
    """argparse type: comma-separated models, each ``ndrm2``, ``ndrm2-anserini``, ``default`` or a checkpoint file."""
    names = [n.strip() for n in text.split(",")]
    bad = [n for n in names if n not in NAMED_MODELS and not Path(n).is_file()]
    if bad or not text.strip():
        raise argparse.ArgumentTypeError(f"expected {', '.join(NAMED_MODELS)} or checkpoint files, got {text!r}")
    # checkpoints made absolute: the builds run in child processes started from the repository root
    return [n if n in NAMED_MODELS else str(Path(n).resolve()) for n in names]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options; a bad value is a usage error here, before any build."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--models", type=model_names, default="ndrm2,default",
                    help="comma-separated: 'ndrm2', 'default' (bundled NDRM3) or checkpoints")
    ap.add_argument("--modes", type=names_from(tuple(MODES)), default=",".join(MODES), help="comma-separated runs")
    ap.add_argument("--docs", type=positive_int, default=None, help="only the first N SciFact documents (default: all)")
    ap.add_argument("--corpus", type=existing_file, default=None, help="another corpus (default: SciFact)")
    ap.add_argument("--shard-size", type=positive_int, default=500, help="documents a shard")
    ap.add_argument("--threads", type=positive_int, default=os.cpu_count() or 1,
                    help="torch threads of the single-process build")
    ap.add_argument("--out", type=output_file, default="docs/results/bench_index.json", help="JSON to write")
    ap.add_argument("--merge", action="store_true",
                    help="keep --out's other rows (a row of the same run and corpus size: replaced)")
    ap.add_argument("--device", type=torch_device, default="cpu", help="torch device of the builds (cuda: single mode only)")
    ap.add_argument("--child", nargs=3, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.docs is not None and args.corpus is not None:
        ap.error("--docs cuts SciFact: give --docs or --corpus, not both")
    return args


def earlier_report(out: Path, corpus: str, shard_size: int) -> dict | None:
    """``--merge``: the report at ``out`` when there is one, checked before any build.

    Raises:
        InputError: ``out`` is not a report this script wrote, or one of another corpus (``corpus``,
            :func:`corpus_label`) or shard size: the merged report names one of each for all its rows.
    """
    if not out.is_file():
        return None
    try:
        old = json.loads(out.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError("not JSON: --merge keeps the rows of a report this script wrote", out) from None
    if not isinstance(old, dict) or not isinstance(old.get("rows"), list):
        raise InputError("not a bench_index report (no rows): drop --merge or pick another --out", out)
    if (old.get("corpus"), old.get("shard_size")) != (corpus, shard_size):
        raise InputError(f"--merge keeps rows of {old.get('corpus')} in shards of {old.get('shard_size')}, not of "
                         f"{corpus} in shards of {shard_size}: pick another --out", out)
    return old


def main(argv: list[str] | None = None) -> None:
    """Documents per second, seconds and peak memory of single-process and Ray index builds."""
    args = parse_args(argv)
    if args.child:
        model, mode, out = args.child
        print(json.dumps(run_one(args.corpus, Path(out), model, mode, args.shard_size, args.threads, args.device)))
        return
    out = args.out
    label = corpus_label(args.corpus, args.docs)
    old = earlier_report(out, label, args.shard_size) if args.merge else None
    models, modes = ",".join(map(model_label, args.models)), ",".join(args.modes)
    with tempfile.TemporaryDirectory(prefix="bench_index-") as tmp:
        corpus = args.corpus or corpus_slice(args.docs, Path(tmp))
        start = [round(x, 2) for x in os.getloadavg()]
        rows = bench(corpus, args.models, args.modes, args.shard_size, args.threads, Path(tmp), args.device)
    for r in rows:
        r.pop("index")
    runs = [{"models": models, "modes": modes, "single_threads": args.threads, "device": args.device,
             "loadavg_at_start": start, "loadavg_at_end": [round(x, 2) for x in os.getloadavg()]}]
    if old is not None:
        rows, runs = merged(old["rows"], rows), old.get("invocations", []) + runs
    report = {
        "platform": platform.platform(), "cpus": os.cpu_count(), "corpus": label,
        "shard_size": args.shard_size, "invocations": runs, "rows": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(run(main))
