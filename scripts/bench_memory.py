"""Peak memory and time of one encoder forward against document length: Conformer vs Transformer.

Seed paper 002 (Fig. 2) shows that the Conformer's separable self-attention needs memory
linear in the document length while a Transformer's needs quadratic. This script measures
both encoders of :mod:`ckqti.models.conformer` (the NDRM document encoder: 2 layers,
width 256, 32 heads) on random embedded inputs of 256 to 8,192 terms, batch 1:

- ``conformer``: grouped convolution + separable self-attention (``attention="separable"``);
- ``transformer``: standard attention with an explicit ``n x n`` score matrix, no
  convolution (the reference code's ``--no_conformer``).

Every (encoder, length) point runs in a fresh subprocess. Peak memory is the growth during
the measured forwards: on CUDA ``torch.cuda.max_memory_allocated`` over the allocation
before them; on CPU the process's peak resident set (``VmHWM``, reset through
``/proc/self/clear_refs`` where Linux allows it, else ``ru_maxrss``) over the resident set
before them. The CPU child runs with ``MALLOC_MMAP_THRESHOLD_=65536`` so that glibc maps
every tensor of 64 KiB or more on its own and unmaps it when freed: the resident set then
follows the live tensors instead of the allocator's cache (after a warm-up, freed heap
memory would otherwise be reused and hide the growth). Time is the median of ``--repeats``
forwards after one warm-up (one timed forward when the warm-up took over 2 s). Forwards
run under ``torch.no_grad`` unless ``--backward`` (forward + backward, training memory).
CPU runs default to 1 thread: on a shared machine, OpenMP threads that wait for busy cores
slowed small forwards a hundredfold in our runs.
Points whose ``n x n`` attention tensor alone would exceed ``--max-attention-gib`` are
skipped and reported as such (that is the Transformer running out of memory).

    python3 scripts/bench_memory.py                       # CPU, about 2 minutes on 2 cores
    python3 scripts/bench_memory.py --device cuda --out out/bench_memory_gpu.json --plot out/bench_memory_gpu.png
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.args import (  # noqa: E402
    HelpFormatter,
    output_file,
    positive_float,
    positive_int,
    positive_ints,
    run,
    torch_device,
)

ENCODERS = {"conformer": dict(attention="separable", conv=True), "transformer": dict(attention="standard", conv=False)}
DEFAULT_LENGTHS = "256,512,1024,2048,4096,8192"


@dataclass(frozen=True)
class Point:
    """One measurement (or why there is none)."""

    encoder: str
    length: int
    status: str  # "ok", "skipped: ...", "error: ..."
    peak_mib: float | None = None
    ms: float | None = None


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _reset_cpu_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _cpu_peak_kib(reset_worked: bool) -> int:
    if reset_worked:
        return _status_kib("VmHWM")
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def measure(encoder: str, length: int, device: str, repeats: int, backward: bool, threads: int) -> Point:
    """Measure one point in this process (the parent runs this in a fresh subprocess)."""
    import torch

    from ckqti.models.conformer import ConformerConfig, ConformerEncoder
    from ckqti.threads import torch_threads

    with torch_threads(threads):
        torch.manual_seed(0)
        model = ConformerEncoder(ConformerConfig(**ENCODERS[encoder], dropout=0.0)).to(device).eval()
        x = torch.randn(1, length, model.config.dim, device=device, requires_grad=backward)
        mask = torch.ones(1, length, dtype=torch.bool, device=device)
        return _run(model, x, mask, encoder, device, repeats, backward)


def _forward(model, x, mask, backward: bool) -> None:
    import torch

    if backward:
        model(x, mask).sum().backward()
        x.grad = None
        model.zero_grad(set_to_none=True)
    else:
        with torch.no_grad():
            model(x, mask)


def _run(model, x, mask, encoder: str, device: str, repeats: int, backward: bool) -> Point:
    import torch

    cuda = device.startswith("cuda")
    start = time.perf_counter()
    _forward(model, x, mask, backward)  # warm-up: allocator, kernels, thread pool
    if time.perf_counter() - start > 2.0:
        repeats = 1
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        reset = _reset_cpu_peak()
        base = _status_kib("VmRSS") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        _forward(model, x, mask, backward)
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    if cuda:
        peak_mib = (torch.cuda.max_memory_allocated() - base) / 2**20
    else:
        peak_mib = max(0, _cpu_peak_kib(reset) - base) / 1024
    return Point(encoder, x.shape[1], "ok", round(peak_mib, 2), round(1000 * statistics.median(times), 2))


def attention_gib(length: int, heads: int = 32) -> float:
    """Size of one float32 ``[1, heads, n, n]`` attention tensor."""
    return heads * length * length * 4 / 2**30


def run_point(encoder: str, length: int, device: str, repeats: int, backward: bool, threads: int, timeout: float) -> Point:
    """Measure one point in a fresh Python process; a crash or timeout becomes an error point."""
    args = [sys.executable, str(Path(__file__).resolve()), "--child", encoder, str(length), "--device", device,
            "--repeats", str(repeats), "--threads", str(threads)] + (["--backward"] if backward else [])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env["MALLOC_MMAP_THRESHOLD_"] = "65536"
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return Point(encoder, length, f"error: timed out after {timeout:.0f} s")
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["killed (out of memory?)"])[-1]
        return Point(encoder, length, f"error: {tail[:120]}")
    return Point(**json.loads(done.stdout.strip().splitlines()[-1]))


def growth_exponent(points: list[Point], key: str) -> float | None:
    """Slope of log(value) against log(length) between the two longest measured points."""
    ok = [p for p in points if p.status == "ok" and getattr(p, key)]
    if len(ok) < 2:
        return None
    a, b = sorted(ok, key=lambda p: p.length)[-2:]
    return round(math.log(getattr(b, key) / getattr(a, key)) / math.log(b.length / a.length), 3)


def table(points: list[Point]) -> str:
    lines = [f"{'length':>7} | {'conformer MiB':>13} {'ms':>9} | {'transformer MiB':>15} {'ms':>9}"]
    by = {(p.encoder, p.length): p for p in points}
    for n in sorted({p.length for p in points}):
        cells = []
        for enc, width in (("conformer", 13), ("transformer", 15)):
            p = by.get((enc, n))
            if p is None or p.status != "ok":
                cells.append(f"{(p.status if p else '-')[:width + 10]:>{width + 10}}")
            else:
                cells.append(f"{p.peak_mib:>{width}.1f} {p.ms:>9.1f}")
        lines.append(f"{n:>7} | {cells[0]} | {cells[1]}")
    return "\n".join(lines)


def plot(points: list[Point], path: Path, device: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, label in ((axes[0], "peak_mib", "peak memory (MiB)"), (axes[1], "ms", "time per forward (ms)")):
        for enc, style in (("conformer", "o-"), ("transformer", "s--")):
            ok = sorted((p for p in points if p.encoder == enc and p.status == "ok"), key=lambda p: p.length)
            ax.plot([p.length for p in ok], [getattr(p, key) for p in ok], style, label=enc)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("document length (terms)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    missing = [f"{p.encoder} {p.length}: {p.status}" for p in points if p.status != "ok"]
    if missing:
        axes[0].text(0.98, 0.02, "\n".join(missing), transform=axes[0].transAxes, ha="right", va="bottom", fontsize=8)
    fig.suptitle(f"NDRM document encoder, batch 1, {device}: separable (linear) vs standard (quadratic) attention")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def bench_memory(lengths: list[int], device: str, repeats: int, backward: bool, threads: int,
                 max_attention_gib: float, timeout: float) -> dict:
    """Measure every (encoder, length) point; returns the JSON-ready report."""
    points = []
    for n in lengths:
        for enc in ENCODERS:
            if enc == "transformer" and attention_gib(n) > max_attention_gib:
                need = attention_gib(n)
                points.append(Point(enc, n, f"skipped: n*n {need:.0f} GiB"))
                continue
            points.append(run_point(enc, n, device, repeats, backward, threads, timeout))
            print(f"  {enc:11s} {n:5d}: {points[-1].status} {points[-1].peak_mib} MiB {points[-1].ms} ms", flush=True)
    return {
        "device": device,
        "platform": platform.platform(),
        "threads": threads,
        "mode": "forward+backward" if backward else "forward (no_grad)",
        "batch": 1,
        "encoders": {k: {**v, "dim": 256, "num_layers": 2, "num_heads": 32} for k, v in ENCODERS.items()},
        "points": [asdict(p) for p in points],
        "memory_growth_exponent": {e: growth_exponent([p for p in points if p.encoder == e], "peak_mib") for e in ENCODERS},
        "time_growth_exponent": {e: growth_exponent([p for p in points if p.encoder == e], "ms") for e in ENCODERS},
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options; a bad value (CUDA asked for where there is none, a length or count below 1, a
    limit that is not a positive number, an output path that cannot be written) is a usage error
    here, before any point is measured."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--lengths", type=positive_ints, default=DEFAULT_LENGTHS, help="comma-separated document lengths")
    ap.add_argument("--device", type=torch_device, default=None, help="cpu or cuda (default: cuda when available)")
    ap.add_argument("--repeats", type=positive_int, default=3, help="timed forwards per point (median)")
    ap.add_argument("--backward", action="store_true", help="time and measure forward + backward")
    ap.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads")
    ap.add_argument("--max-attention-gib", type=positive_float, default=None,
                    help="skip points whose n x n tensor exceeds this (default: 2.5 on the CPU, 40 on CUDA)")
    ap.add_argument("--timeout", type=positive_float, default=120.0, help="seconds per point")
    ap.add_argument("--out", type=output_file, default="out/bench_memory.json", help="JSON to write")
    ap.add_argument("--plot", dest="plot_path", type=output_file, default="out/bench_memory.png", help="PNG to write")
    ap.add_argument("--child", nargs=2, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child and (args.child[0] not in ENCODERS or not args.child[1].isdigit()):
        ap.error(f"--child takes an encoder ({', '.join(ENCODERS)}) and a length, got {' '.join(args.child)}")
    return args


def main(argv: list[str] | None = None) -> None:
    """Peak memory and time of the Conformer and Transformer encoders against document length."""
    args = parse_args(argv)
    device = args.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.child:
        point = measure(args.child[0], int(args.child[1]), device, args.repeats, args.backward, args.threads)
        print(json.dumps(asdict(point)))
        return
    max_attention_gib = args.max_attention_gib
    if max_attention_gib is None:
        max_attention_gib = 2.5 if device == "cpu" else 40.0
    report = bench_memory(args.lengths, device, args.repeats, args.backward, args.threads, max_attention_gib,
                          args.timeout)
    points = [Point(**p) for p in report["points"]]
    print(table(points))
    print("memory growth exponent (log-log slope, two longest points):", report["memory_growth_exponent"])
    print("time growth exponent:", report["time_growth_exponent"])
    out = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    plot(points, args.plot_path, device)
    print(f"wrote {out} and {args.plot_path}")


if __name__ == "__main__":
    sys.exit(run(main))
