"""Every search kernel compiled into Numba's cache ahead of use: ``make setup`` runs
``python -m retriever.warm``, so that no search compiles.

Without it the first search after an install compiles its kernels (10-20 s on 2 cores), and so
does the first query of the other accumulator width (uint16 while a query's largest possible score
fits, else uint32: a long or heavily weighted query), and the first batch run of each width: four
waits of 10-20 s, the later ones long after the first. Numba keeps compiled kernels under
``$NUMBA_CACHE_DIR`` when set, else beside the modules, else in the user's cache folder
(``~/.cache/numba``), the first of these it can write; every later process loads them there. Where
it can write none, each process compiles them again, and this says so (exit status 1).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ckqti.jit import cached
from retriever.kernel_saat import saat_batch, saat_topk
from retriever.workspace import ACC16_MAX

DOCUMENTS = "w1\tcells divide and grow\nw2\tproteins fold in cells\nw3\tgenes express proteins\n"


def compile_kernels() -> float:
    """Build a three-document index in a temporary folder and search it once a kernel and
    accumulator width; returns the seconds it took (loading kernels already in the cache, a second)."""
    from ckqti import api

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ckqti-warm-") as tmp:
        corpus = Path(tmp) / "warm.tsv"
        corpus.write_text(DOCUMENTS, encoding="utf-8")
        api.index(corpus, Path(tmp) / "index", model="ndrm2", progress=False)
        with api.open_searcher(Path(tmp) / "index") as searcher:
            terms = np.array(sorted(searcher.index.term_ids.values())[2:4], dtype=np.int64)  # past padding, unknown
            for weight in (1, ACC16_MAX // 255 + 1):  # uint16, then uint32 accumulators
                weights = np.full(terms.size, weight, dtype=np.int64)
                searcher.topk_arrays(terms, weights, 2)
                searcher.topk_batch([terms], [weights], 2)
    return time.perf_counter() - started


NO_CACHE = ("error: Numba has nowhere to keep the compiled search kernels (it can write neither beside ckqti's modules "
            "nor in ~/.cache/numba), so each process compiles them again: set NUMBA_CACHE_DIR to a writable folder")


def main() -> int:
    """Compile the kernels into Numba's cache; status 1, with nothing compiled, where there is none."""
    if not (cached(saat_topk) and cached(saat_batch)):
        print(NO_CACHE, file=sys.stderr)
        return 1
    seconds = compile_kernels()
    if compiled_kernels():
        print(f"search kernels compiled into Numba's cache in {seconds:.1f} s")
    else:
        print(f"search kernels already in Numba's cache: loaded in {seconds:.1f} s")
    return 0


def compiled_kernels() -> int:
    """How many kernel signatures this process compiled rather than loaded from Numba's cache."""
    return sum(sum(k.stats.cache_misses.values()) for k in (saat_topk, saat_batch))


if __name__ == "__main__":
    sys.exit(main())
