"""Whether this process holds the search kernels compiled, is compiling them, or can cache them:
read without loading Numba when no kernel was imported."""

from __future__ import annotations

import sys


def kernels_ready(batch: bool = False) -> bool:
    """Whether this process holds the search kernel (``batch``: batch search's) compiled or loaded
    from Numba's cache: the first search after an install compiles it, for 10-20 s on 2 cores. (A
    dispatcher's overloads appear when its compiling ends; a dict's truth is read atomically, so the
    check is safe from another thread while it compiles.) With ``NUMBA_DISABLE_JIT=1`` it is plain
    Python: always ready."""
    from retriever.kernel_saat import saat_batch, saat_topk

    return bool(getattr(saat_batch if batch else saat_topk, "overloads", True))



def kernels_compiling(batch: bool = False) -> bool:
    """Whether this process is compiling the search kernel (``batch``: batch search's) now: the
    first search after an install, 10-20 s on 2 cores. Not before its first call, nor while it
    loads from Numba's cache (:func:`compiling`)."""
    kernels = sys.modules.get("retriever.kernel_saat")  # not imported yet: nothing compiles (and no need to load Numba to say so)
    if kernels is None:
        return False
    return compiling(kernels.saat_batch if batch else kernels.saat_topk)



def kernels_cached(batch: bool = False) -> bool:
    """Whether Numba keeps the search kernel (``batch``: batch search's) on disk for later processes:
    False where it can write no cache folder (a read-only install beside a home without a writable
    ``~/.cache``), so that every process compiles it again (:func:`ckqti.jit.cached`)."""
    from ckqti.jit import cached
    from retriever.kernel_saat import saat_batch, saat_topk

    return cached(saat_batch if batch else saat_topk)



def compiling(kernel) -> bool:
    """Whether a Numba dispatcher is compiling now: it was called with argument types it found no
    usable cache entry for (Numba counts that miss before it starts compiling) and holds no compiled
    version for them yet. A kernel compiles once per accumulator width (uint16 for short queries,
    uint32 for long or heavily weighted ones), so a second compile may come long after the first.
    A plain function (``NUMBA_DISABLE_JIT=1``) never compiles."""
    overloads = getattr(kernel, "overloads", None)
    if overloads is None:
        return False
    missed = list(kernel.stats.cache_misses)  # one C-level copy: safe while the compiling thread counts a miss
    return any(sig not in overloads for sig in missed)
