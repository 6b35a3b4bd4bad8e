"""``python -m retriever.warm`` (run by ``make setup``) leaves nothing for a search to compile."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

# A fresh process: searches of both accumulator widths, one query a call and in a batch, on another
# index than the warm-up's (built before the kernels are imported), then how many kernels compiled.
SEARCHES = """
import sys
import numpy as np
from ckqti import api
from retriever import kernel_saat as K
api.index(sys.argv[1], sys.argv[2], model="ndrm2", progress=False)
with api.open_searcher(sys.argv[2]) as s:
    assert s.search("cells", 2).hits and all(r.hits for r in s.search_many(["cells proteins", "genes"], 2))
    terms = np.array([2, 3], np.int64)
    s.topk_arrays(terms, np.array([300, 1], np.int64), 2)  # uint32 accumulators
    s.topk_batch([terms], [np.array([1, 300], np.int64)], 2)
    print(sum(sum(k.stats.cache_misses.values()) for k in (K.saat_topk, K.saat_batch)),
          sum(sum(k.stats.cache_hits.values()) for k in (K.saat_topk, K.saat_batch)))
"""


def test_after_the_warm_up_no_search_compiles(tmp_path):
    """The first search after an install compiled its kernels for 10-20 s, and the first query needing the other
    accumulator width (or a first batch run) compiled again, silently, long after."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    corpus = tmp_path / "c.tsv"
    corpus.write_text("a\tcells grow\nb\tproteins fold in cells\nc\tgenes and proteins\nd\tcells cells genes\n"
                      + "".join(f"x{i}\tother words {i}\n" for i in range(6)))  # idf > 0: each word in under half

    warm = subprocess.run([sys.executable, "-m", "retriever.warm"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert warm.returncode == 0 and warm.stdout.startswith("search kernels compiled into Numba's cache in"), warm.stderr
    out = subprocess.run([sys.executable, "-c", SEARCHES, str(corpus), str(tmp_path / "index")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert [int(x) for x in out.stdout.split()] == [0, 4]  # nothing compiled: 2 kernels x 2 widths from the cache
    again = subprocess.run([sys.executable, "-m", "retriever.warm"], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=600)  # said "compiled" again, having only loaded them
    assert again.returncode == 0 and again.stdout.startswith("search kernels already in Numba's cache: loaded in")


def test_the_warm_up_searches_both_accumulator_widths(monkeypatch):
    """In process: each kernel is called with uint16 and with uint32 accumulators."""
    from retriever import kernel_saat, warm

    seen = []
    for name in ("saat_topk", "saat_batch"):
        real = getattr(kernel_saat, name)

        def record(*args, real=real, name=name):  # uint16 accumulators, or uint32 ones beside the uint32 touched list
            narrow = any(isinstance(a, np.ndarray) and a.dtype == np.uint16 for a in args)
            seen.append((name, np.dtype("uint16" if narrow else "uint32")))
            return real(*args)

        monkeypatch.setattr(kernel_saat, name, record)
    assert warm.compile_kernels() > 0
    assert sorted(set(seen)) == [("saat_batch", np.dtype("uint16")), ("saat_batch", np.dtype("uint32")),
                                 ("saat_topk", np.dtype("uint16")), ("saat_topk", np.dtype("uint32"))]


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="no caching without the JIT")
def test_the_warm_up_says_when_numba_has_nowhere_to_keep_the_kernels():
    """From a read-only install beside a home without a writable ~/.cache it stopped on Numba's
    RuntimeError, a traceback; now one line says so and what to do, with nothing compiled."""
    code = ("import numba.core.caching as c, runpy; c.CacheImpl._locator_classes = [];"
            "runpy.run_module('retriever.warm', run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in out.stderr, out.stderr
    from retriever.warm import NO_CACHE

    assert (out.returncode, out.stdout, out.stderr) == (1, "", NO_CACHE + "\n")
