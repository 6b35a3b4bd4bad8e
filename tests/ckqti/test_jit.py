"""``ckqti.jit.njit``: Numba's cache where it has somewhere to write one, the kernels regardless."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ckqti import jit

ROOT = Path(__file__).resolve().parents[2]

# Numba with no place it can write a cache: what an install in a read-only site-packages gets
# beside a home without a writable ~/.cache (a service account's), in a fresh process.
NO_LOCATOR = "import numba.core.caching as c; c.CacheImpl._locator_classes = [];"


def twice(x):
    return 2 * x


def test_a_function_numba_cannot_cache_is_compiled_without_the_cache(monkeypatch):
    import numba.core.caching

    monkeypatch.setattr(numba.core.caching.CacheImpl, "_locator_classes", [])
    with pytest.raises(RuntimeError, match=jit.NO_CACHE):  # what numba.njit does
        __import__("numba").njit(cache=True)(twice)
    kernel = jit.njit(cache=True, nogil=True)(twice)
    assert kernel(np.int64(21)) == 42 and not jit.cached(kernel)


def test_a_function_numba_can_cache_keeps_its_cache(tmp_path, monkeypatch):
    import numba.core.caching

    monkeypatch.setattr(numba.core.config, "CACHE_DIR", str(tmp_path))  # $NUMBA_CACHE_DIR, as Numba read it
    kernel = jit.njit(cache=True)(twice)
    assert jit.cached(kernel) and not jit.cached(jit.njit()(twice))
    assert Path(kernel._cache._impl.locator.get_cache_path()).is_relative_to(tmp_path)  # not the class: private in Numba 0.60


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="no caching without the JIT")
def test_the_kernels_import_and_run_where_numba_can_cache_nothing():
    """Importing retriever.kernel_saat (any search) or indexer.shards (any build) raised Numba's
    RuntimeError, a traceback, when the package sat in a read-only site-packages and the user had no
    writable ~/.cache (found from an installed wheel with both read-only)."""
    code = NO_LOCATOR + (
        "import numpy as np, indexer.shards, retriever.kernel_saat as k;"
        "from ckqti.jit import cached;"
        "print(k.next_term(np.array([0, 1]), np.array([1, 2]), np.array([3, 5], np.uint8), np.array([1, 1])),"
        " cached(k.saat_topk), cached(indexer.shards._by_term))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "False", "False"]


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="no caching without the JIT")
def test_the_api_says_whether_numba_keeps_the_search_kernels():
    """``api.kernels_cached``, which picks the CLI's compiling note: False where Numba can write no
    cache (each process compiles the kernels again), True from this checkout."""
    code = "from ckqti import api; print(api.kernels_cached(), api.kernels_cached(batch=True))"
    for prefix, expected in ((NO_LOCATOR, ["False", "False"]), ("", ["True", "True"])):
        out = subprocess.run([sys.executable, "-c", prefix + code], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0 and out.stdout.split() == expected, (prefix, out.stdout, out.stderr)


def test_another_runtime_error_of_numba_is_raised(monkeypatch):
    """Only Numba's "no locator available" drops the cache; any other error of ``njit(cache=True)`` is the
    caller's to see, not a kernel quietly compiled without its cache."""
    import numba

    def fails_with_cache(**options):
        if options.get("cache"):
            raise RuntimeError("something else went wrong")
        return lambda fn: fn

    monkeypatch.setattr(numba, "njit", fails_with_cache)
    with pytest.raises(RuntimeError, match="something else"):
        jit.njit(cache=True)(twice)
    assert jit.njit()(twice) is twice


CALLEE = "from ckqti.jit import njit\n\n\n@njit(cache=True)\ndef f(x):\n    return x + 1\n"
CALLER = "from callee import f\nfrom ckqti.jit import njit\n\n\n@njit(cache=True)\ndef g(x):\n    return f(x) * 10\n"


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="no caching without the JIT")
@pytest.mark.parametrize("callee_cached", [True, False])
def test_a_cached_kernel_compiles_again_when_a_callee_in_another_module_changes(tmp_path, callee_cached):
    """Numba checks only a kernel's own file: once the kernels were split into modules
    (retriever/kernel_*.py), an edit to a callee's module left the caller running the old callee
    from the cache. Unchanged, the caller still loads from the cache. A callee compiled without
    the cache (Numba keeps no stamp for it) is stamped by its file's text."""
    (tmp_path / "callee.py").write_text(CALLEE if callee_cached else CALLEE.replace("njit(cache=True)", "njit()"))
    (tmp_path / "caller.py").write_text(CALLER)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    code = "import caller; print(caller.g(1), sum(caller.g.stats.cache_hits.values()))"

    def run() -> str:
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert [run(), run()] == ["20 0", "20 1"]  # compiled, then loaded from the cache
    callee = tmp_path / "callee.py"
    callee.write_text(callee.read_text().replace("x + 1", "x + 2"))
    os.utime(callee, (callee.stat().st_atime, callee.stat().st_mtime + 5))  # a new stamp, whatever the clock's grain
    assert [run(), run()] == ["30 0", "30 1"]
