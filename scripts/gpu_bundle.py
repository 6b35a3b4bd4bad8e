"""Pack what a lent GPU machine needs to train and measure, for the ``device`` tool's ``carry``.

The lent machine has PyTorch with CUDA but reaches no package registry and none of
``../shared``; the working tree it receives is capped at 64 MiB. This writes ``.gpu/``
(ignored by git: add ``/.gpu/`` to ``.git/info/exclude``)::

    data.tar.gz      the four collections of ../shared/data
    minilm/          all-MiniLM-L6-v2's config, vocabulary and weights, the weights in float16
                     (45 MB instead of 91; a relative rounding of about 5e-4, loaded back as float32)
    wheels/          packages the machine lacks: ir-measures, pytrec-eval-terrier, ftfy, wcwidth (wheels) and
                     the KrovetzStemmer source (built there)
    cache.tar.gz     caches made here with Pyserini, which needs Java: every collection's BM25 run and
                     SciFact train's BM25 top 100 (``scripts/effectiveness.py``), and the BM25 top 100 of
                     ``scripts/bench_rerank.py``

Then on the machine, in one command: ``source scripts/gpu_env.sh && python3 scripts/...``.

    python3 scripts/effectiveness.py --only bm25       # the BM25 runs, here (Java)
    python3 scripts/gpu_bundle.py                       # .gpu/, prints its size
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.args import HelpFormatter, output_dir, run  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
COLLECTIONS = ("scifact", "trecdl19-passage-subset", "cranfield", "vaswani")
WHEELS = ("ir-measures==0.4.3", "pytrec-eval-terrier==0.5.11", "ftfy==6.3.1", "wcwidth==0.7.0")
SOURCES = ("KrovetzStemmer==0.8",)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64")
CACHES = ("out/effectiveness/runs/*/bm25.*", "out/effectiveness/bm25/scifact-train-top100.json",
          "out/effectiveness/bm25/scifact-titles-top100.json",
          "out/bench_rerank.work/top100.json")
MINILM_FILES = ("config.json", "vocab.txt", "tokenizer.json", "special_tokens_map.json", "tokenizer_config.json")


def pack_data(out: Path) -> None:
    with tarfile.open(out / "data.tar.gz", "w:gz") as tar:
        for name in COLLECTIONS:
            tar.add(DATA / name, arcname=name)


def pack_minilm(out: Path) -> None:
    from safetensors.torch import load_file, save_file

    from ckqti.models.minilm import minilm_model_dir

    src, dst = minilm_model_dir(), out / "minilm"
    dst.mkdir(parents=True, exist_ok=True)
    for name in MINILM_FILES:
        if (src / name).is_file():
            shutil.copy2(src / name, dst / name)
    tensors = {k: (v.half() if v.is_floating_point() else v).contiguous()
               for k, v in load_file(str(src / "model.safetensors")).items()}
    save_file(tensors, str(dst / "model.safetensors"))


def pack_wheels(out: Path) -> None:
    dst = out / "wheels"
    dst.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(dst)]
    plats = [a for p in PLATFORMS for a in ("--platform", p)]
    subprocess.run([*pip, "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp", *plats,
                    *WHEELS], check=True)
    subprocess.run([*pip, "--no-binary=:all:", *SOURCES], check=True)


def pack_caches(out: Path, depth: int = 100) -> list[str]:
    """The caches; BM25 runs cut to their top ``depth`` (all that reranking reads), a fifth of the bytes."""
    import io

    files = sorted({p for pattern in CACHES for p in ROOT.glob(pattern)})
    with tarfile.open(out / "cache.tar.gz", "w:gz") as tar:
        for p in files:
            if p.suffix != ".trec":
                tar.add(p, arcname=str(p.relative_to(ROOT)))
                continue
            lines = [ln for ln in p.read_text().splitlines(keepends=True) if int(ln.split()[3]) <= depth]
            data = "".join(lines).encode()
            info = tarfile.TarInfo(str(p.relative_to(ROOT)))
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return [str(p.relative_to(ROOT)) for p in files]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    ap.add_argument("--out", type=output_dir, default=str(ROOT / ".gpu"), help="folder to fill")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    pack_data(args.out)
    pack_minilm(args.out)
    pack_wheels(args.out)
    cached = pack_caches(args.out)
    print(f"caches: {len(cached)} files ({', '.join(cached[:4])}{', ...' if len(cached) > 4 else ''})")
    if not cached:  # the lent machine has no Java: without the BM25 runs its training and reranking cannot start
        print("warning: no BM25 caches to pack: run `python3 scripts/effectiveness.py --only bm25` here first "
              "(Pyserini needs Java, which the GPU machine lacks)", file=sys.stderr)
    total = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(f"wrote {args.out}: {total / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
