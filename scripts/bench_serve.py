"""Load test of ``ckqti serve`` on loopback: QPS and latency at 1, 4 and 16 concurrent clients.

    python scripts/bench_serve.py                                   # the bundled sample, NDRM2
    python scripts/bench_serve.py --index out/scifact-ndrm2 \\
        --queries ../shared/data/scifact/queries.jsonl --out docs/results/bench_serve_scifact.json

Without ``--index`` it builds an NDRM2 index of ``--corpus`` (default: the bundled sample) in a
temporary directory. It starts ``ckqti serve`` as a subprocess on 127.0.0.1 and a free port
(never another address), waits for ``/health``, and runs closed-loop clients: each client is a
thread with one keep-alive ``http.client`` connection that sends ``POST /search`` for the
queries in turn, the next request as soon as the previous answer is in. Each concurrency level
stops after ``--requests`` requests or ``--max-seconds``, whichever comes first. Every answer
is compared with the CLI's for that query (``retriever.results.search_json`` over the same index,
the function ``ckqti search --json`` prints, checked once against the real command). The same
closed loop over ``Searcher.search`` + ``search_json`` in this process is the comparison point
that shows the HTTP overhead. The server is always stopped. Prints a markdown table, writes
JSON, and exits non-zero on any error or mismatch.
"""

from __future__ import annotations

import argparse
import http.client
import inspect
import itertools
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ckqti import api  # noqa: E402
from ckqti.children import preexec_die_with_parent  # noqa: E402
from ckqti.errors import InputError, QueryError  # noqa: E402
from indexer.readers import read_queries  # noqa: E402
from retriever.results import search_json  # noqa: E402
from scripts.args import (  # noqa: E402
    HelpFormatter,
    command_line,
    existing_dir,
    existing_file,
    int_range,
    output_file,
    positive_float,
    positive_int,
    positive_ints,
    run,
    shown,
)

SAMPLE = ROOT / "ckqti" / "data" / "sample"
MAX_K = inspect.signature(api.serve).parameters["max_k"].default  # the largest k ``ckqti serve`` answers by default


@dataclass
class Level:
    """One closed-loop run: ``clients`` concurrent clients against one engine."""

    engine: str
    clients: int
    requests: int = 0
    seconds: float = 0.0
    qps: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    errors: int = 0
    mismatches: int = 0
    error_examples: list[str] = field(default_factory=list)


class HttpClient:
    """One keep-alive connection to the service; ``ask`` returns the parsed answer or raises."""

    def __init__(self, port: int, k: int):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.k = k

    def ask(self, query: str) -> dict:
        body = json.dumps({"query": query, "k": self.k})
        self.conn.request("POST", "/search", body=body, headers={"Content-Type": "application/json"})
        resp = self.conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {data[:200]!r}")
        return json.loads(data)

    def close(self) -> None:
        self.conn.close()


class InProcessClient:
    """The comparison point: the same answer computed in this process, no HTTP."""

    def __init__(self, searcher, k: int):
        self.searcher, self.k = searcher, k

    def ask(self, query: str) -> dict:
        return search_json(self.searcher, self.searcher.search(query, self.k))

    def close(self) -> None:
        pass


def closed_loop(make_client, queries: list[str], want: dict, level: Level, max_requests: int, max_seconds: float) -> Level:
    """Run ``level.clients`` clients until ``max_requests`` requests are sent or ``max_seconds`` pass."""
    counter = itertools.count()
    lock = threading.Lock()
    latencies: list[float] = []
    t0 = time.perf_counter()
    deadline = t0 + max_seconds

    def client(c: int) -> None:
        cl = make_client()
        try:
            while time.perf_counter() < deadline and (i := next(counter)) < max_requests:
                q = queries[i % len(queries)]
                start = time.perf_counter()
                try:
                    got, error = cl.ask(q), None
                except Exception as e:  # noqa: BLE001 - every failure is counted and reported
                    got, error = None, f"{q!r}: {e!r}"
                took = time.perf_counter() - start
                with lock:
                    level.requests += 1
                    if error is not None:
                        level.errors += 1
                        level.error_examples = (level.error_examples + [error])[:5]
                        continue
                    latencies.append(took)
                    level.mismatches += got != want[q]
        finally:
            cl.close()

    with ThreadPoolExecutor(level.clients) as pool:
        list(pool.map(client, range(level.clients)))
    level.seconds = time.perf_counter() - t0
    level.qps = len(latencies) / level.seconds if level.seconds > 0 else 0.0
    if latencies:
        level.p50_ms, level.p99_ms = (float(x) * 1000 for x in np.percentile(latencies, [50, 99]))
    return level


def references(searcher, queries: dict[str, str], k: int) -> tuple[list[str], dict[str, dict], int]:
    """The CLI's answer for every searchable query; queries with no searchable terms are left out."""
    texts, want, skipped = [], {}, 0
    for text in queries.values():
        try:
            answer = search_json(searcher, searcher.search(text, k))
        except QueryError:
            skipped += 1
            continue
        if text not in want:
            texts.append(text)
            want[text] = answer
    return texts, want, skipped


def cli_answer(index: Path, query: str, k: int) -> dict:
    """What ``ckqti search --json`` prints for ``query``."""
    cmd = [sys.executable, "-m", "ckqti.cli", "search", query, "--index", str(index), "-k", str(k), "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT, timeout=300)
    return json.loads(out.stdout)


def start_server(index: Path, workers: int | None, timeout: float = 120.0) -> tuple[subprocess.Popen, int]:
    """``ckqti serve`` on 127.0.0.1 and a free port; returns the process and the port once /health answers."""
    cmd = [sys.executable, "-m", "ckqti.cli", "serve", "--index", str(index), "--host", "127.0.0.1", "--port", "0"]
    if workers:
        cmd += ["--threads", str(workers)]
    # dies with this script (a kill -9 of it left the server running); started from the main thread,
    # which outlives it (Linux signals the child when the thread that started it ends)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT, preexec_fn=preexec_die_with_parent())
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if not first or not first[0].startswith("serving "):
        stop_server(proc)
        raise RuntimeError(f"ckqti serve did not start (first line: {first[:1]!r}, exit code {proc.poll()})")
    port = int(first[0].split()[3].rsplit(":", 1)[1])
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                conn.close()
                return proc, port
        except OSError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            stop_server(proc)
            raise RuntimeError("ckqti serve never answered /health")
        time.sleep(0.1)


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def table(levels: list[Level]) -> str:
    rows = ["| engine | clients | requests | seconds | QPS | p50 ms | p99 ms | errors | mismatches |",
            "|---|---|---|---|---|---|---|---|---|"]
    for lv in levels:
        rows.append(f"| {lv.engine} | {lv.clients} | {lv.requests} | {lv.seconds:.1f} | {lv.qps:.0f} | "
                    f"{lv.p50_ms:.2f} | {lv.p99_ms:.2f} | {lv.errors} | {lv.mismatches} |")
    return "\n".join(rows)


def measure(index: Path, args, texts: list[str], want: dict, searcher) -> list[Level]:
    """In-process levels first, then the same levels over HTTP against a ``ckqti serve`` subprocess."""
    levels = []
    for clients in args.levels:
        lv = Level("in-process", clients)
        levels.append(closed_loop(lambda: InProcessClient(searcher, args.k), texts, want, lv, args.requests, args.max_seconds))
    proc, port = start_server(index, args.workers)
    try:
        warm = Level("warm-up", 1)
        closed_loop(lambda: HttpClient(port, args.k), texts, want, warm, min(len(texts), 50), args.max_seconds)
        for clients in args.levels:
            lv = Level("http", clients)
            levels.append(closed_loop(lambda: HttpClient(port, args.k), texts, want, lv, args.requests, args.max_seconds))
    finally:
        stop_server(proc)
    return levels


def bench(args, index: Path) -> dict:
    """The report of one run over ``index`` (all but the command, which :func:`main` adds)."""
    load_before = os.getloadavg()
    searcher = api.open_searcher(index)
    texts, want, skipped = references(searcher, read_queries(args.queries), args.k)
    if not texts:
        raise InputError("no searchable queries", args.queries)
    cli_ok = cli_answer(index, texts[0], args.k) == want[texts[0]]
    levels = measure(index, args, texts, want, searcher)
    idx = searcher.index
    return {
        "index": {"path": shown(args.index) if args.index else f"NDRM2 index of {shown(args.corpus)}", "num_docs": idx.num_docs, "shards": len(idx.shards),
                  "model": idx.model_id},
        "queries": {"file": shown(args.queries), "distinct_searched": len(texts), "skipped_no_terms": skipped},
        "k": args.k, "requests_per_level": args.requests, "max_seconds_per_level": args.max_seconds,
        "server_workers": args.workers or min(8, os.cpu_count() or 1),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "load_average_1min_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)]},
        "cli_answer_equals_reference": cli_ok,
        "levels": [asdict(lv) for lv in levels],
    }


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    p.add_argument("--index", type=existing_dir, default=None, help="An existing index (default: one built from --corpus).")
    p.add_argument("--corpus", type=existing_file, default=str(SAMPLE / "corpus.jsonl"), help="Corpus indexed with NDRM2 without --index.")
    p.add_argument("--queries", type=existing_file, default=str(SAMPLE / "queries.tsv"), help="Queries sent in turn.")
    p.add_argument("-k", "--k", type=int_range(1, MAX_K), default=10,
                   help=f"Hits a request asks for (at most ckqti serve's --max-k, {MAX_K}).")
    p.add_argument("--levels", type=positive_ints, default="1,4,16", help="Client counts, comma-separated.")
    p.add_argument("--requests", type=positive_int, default=5000, help="Requests per level (at most).")
    p.add_argument("--max-seconds", type=positive_float, default=30.0, help="Seconds per level (at most).")
    p.add_argument("--workers", type=positive_int, default=None,
                   help="Server search threads (ckqti serve --threads; default: its own).")
    p.add_argument("--out", type=output_file, default=str(ROOT / "docs" / "results" / "bench_serve.json"), help="JSON to write.")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        index = args.index
        if index is None:
            index = Path(tmp) / "index"
            api.index(args.corpus, index, model="ndrm2", progress=False)
        result = {"command": command_line("bench_serve.py", argv), **bench(args, index)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    levels = [Level(**lv) for lv in result["levels"]]
    print(f"{result['index']['num_docs']} documents, {result['queries']['distinct_searched']} queries, k={args.k}, "
          f"CLI answer equals reference: {result['cli_answer_equals_reference']}, "
          f"load average {result['machine']['load_average_1min_before_after']} on {os.cpu_count()} CPUs")
    print(table(levels))
    print(f"-> {args.out}")
    bad = sum(lv.errors + lv.mismatches for lv in levels) + (not result["cli_answer_equals_reference"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(run(main))
