"""ckqti: full-retrieval neural search with a learned, impact-ordered inverted index."""

import os

# MKL (torch's CPU matrix products on x86) rounds a product otherwise on 2 threads than on 1, and a build or a
# rerank picks each batch's thread count by how fast batches go (ckqti/threads.py): the same rerank wrote scores
# 1e-7 relative apart, run to run. MKL's strict conditional numerical reproducibility gives results that do not
# depend on the thread count; MKL reads it at its first product, so before any (a user's own setting is kept).
# Not every product is MKL's: torch's own batched products of small shapes ([1, 7, 64] @ [1, 64, 17]) still round
# by thread count, so a run is the same to float32 rounding, byte for byte only where none of those ran (session 44).
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")


def __getattr__(name: str) -> str:
    """``ckqti.__version__``, read from the installed package's metadata when first asked for: importing
    importlib.metadata took ~20 ms of every command's start, before the command line could take a Ctrl-C."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("ckqti")  # pyproject.toml's, the one place it is written
    except PackageNotFoundError:  # the source tree on the path without an install
        found = "0+unknown"
    globals()["__version__"] = found
    return found
