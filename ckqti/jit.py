"""Numba's ``njit``, with its on-disk cache where Numba has somewhere to write one.

``njit(cache=True)`` raises ``RuntimeError`` ("no locator available") when it is applied, that is
when the kernels' module is imported, if Numba can write neither beside the module (an install in
a read-only site-packages) nor in ``$NUMBA_CACHE_DIR`` nor in the user's cache folder
(``~/.cache/numba``; a service account's home may not exist). Then a kernel is compiled without
the cache: it still runs, compiled anew in each process.

Numba keeps a kernel's cache while the kernel's own source file is unchanged, but the kernel's
compiled code holds its callees' too: after an edit to a kernel module's callee in another module,
the caller loaded the old callee from the cache. Here a cached kernel's cache also lapses when a
kernel it can call from another module (one in its module's globals) changes.
"""

from __future__ import annotations

import hashlib
import inspect

import numba

NO_CACHE = "no locator available"  # Numba's words when it has nowhere to keep a kernel


def njit(**options):
    """``numba.njit(**options)`` as a decorator; ``cache=True`` is dropped for a function whose
    compiled code Numba has nowhere to keep."""

    def decorate(fn):
        try:
            kernel = numba.njit(**options)(fn)
        except RuntimeError as e:
            if not options.get("cache") or NO_CACHE not in str(e):
                raise
            return numba.njit(**{**options, "cache": False})(fn)
        stamp_with_callees(kernel)
        return kernel

    return decorate


def source_stamp(kernel):
    """What Numba compares to decide whether ``kernel``'s cache is fresh (None: a kernel it keeps no cache
    for, or a Numba that no longer keeps the private attribute read here): its source file's stamp (in Numba 0.68 a hash of its text; older versions stamped its modification
    time and size), with :func:`stamp_with_callees` its callees' too."""
    cache_file = getattr(getattr(kernel, "_cache", None), "_cache_file", None)
    return getattr(cache_file, "_source_stamp", None)  # private: a Numba without it stamps as before


def stamp_with_callees(kernel) -> None:
    """Make ``kernel``'s cache lapse when a kernel in its module's globals but defined in another file
    changes, as it does when its own file does (Numba compiles callees into the caller's cached code;
    a callee's stamp includes its own callees', so this reaches every module it calls through)."""
    if source_stamp(kernel) is None:  # nothing kept on disk to go stale
        return
    fn = kernel.py_func
    own = inspect.getfile(fn)
    callees = {}  # a file's kernels share its globals, so any of them stamps it
    for value in list(fn.__globals__.values()):
        if isinstance(value, numba.core.dispatcher.Dispatcher) and inspect.getfile(value.py_func) != own:
            path = inspect.getfile(value.py_func)
            stamp = source_stamp(value)
            if stamp is None:  # a callee compiled without the cache: its file's text stands for it
                with open(path, "rb") as f:
                    stamp = hashlib.sha256(f.read()).digest()
            callees.setdefault(path, stamp)
    if callees:
        kernel._cache._cache_file._source_stamp = (source_stamp(kernel), tuple(sorted(callees.items())))


def cached(kernel) -> bool:
    """Whether Numba keeps ``kernel``'s compiled code on disk for later processes (a plain function,
    as with ``NUMBA_DISABLE_JIT=1``, has nothing to keep: True)."""
    from numba.core.caching import NullCache

    return not isinstance(getattr(kernel, "_cache", None), NullCache)
