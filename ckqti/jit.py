"""Numba's ``njit``, with its on-disk cache where Numba has somewhere to write one.

``njit(cache=True)`` raises ``RuntimeError`` ("no locator available") when it is applied, that is
when the kernels' module is imported, if Numba can write neither beside the module (an install in
a read-only site-packages) nor in ``$NUMBA_CACHE_DIR`` nor in the user's cache folder
(``~/.cache/numba``; a service account's home may not exist). Then a kernel is compiled without
the cache: it still runs, compiled anew in each process.
"""

from __future__ import annotations

import numba

NO_CACHE = "no locator available"  # Numba's words when it has nowhere to keep a kernel


def njit(**options):
    """``numba.njit(**options)`` as a decorator; ``cache=True`` is dropped for a function whose
    compiled code Numba has nowhere to keep."""

    def decorate(fn):
        try:
            return numba.njit(**options)(fn)
        except RuntimeError as e:
            if not options.get("cache") or NO_CACHE not in str(e):
                raise
            return numba.njit(**{**options, "cache": False})(fn)

    return decorate


def cached(kernel) -> bool:
    """Whether Numba keeps ``kernel``'s compiled code on disk for later processes (a plain function,
    as with ``NUMBA_DISABLE_JIT=1``, has nothing to keep: True)."""
    from numba.core.caching import NullCache

    return not isinstance(getattr(kernel, "_cache", None), NullCache)
