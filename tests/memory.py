"""What a build or an append holds in memory at one step, for the indexer's memory tests."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable

import numpy as np
import pyarrow as pa


def long_random_lines(n: int = 600, words: int = 800) -> list[str]:
    """``n`` JSONL documents (``d0``, ``d1``, ...) of ``words`` words drawn from 300 (seed 0): at the
    defaults 2.9 MB of text and 1.9 MB of term ids, lines ending in a newline."""
    rng = np.random.default_rng(0)
    vocab = [f"w{i}x" for i in range(300)]
    return [json.dumps({"_id": f"d{i}", "title": "", "text": " ".join(rng.choice(vocab, words))}) + "\n"
            for i in range(n)]


def held_when_called(monkeypatch, module, name: str, run: Callable[[], object]) -> tuple[dict[str, int], object]:
    """Run ``run()`` and note the bytes held, above those held when it started, at the moment it calls
    ``module.name``: ``{"python": ..., "arrow": ...}`` (Python's objects and numpy's arrays counted by
    tracemalloc, Arrow's buffers by its pool), and ``run``'s result."""
    held, original, start = {}, getattr(module, name), {}

    def measured(*args, **kwargs):
        held["python"] = tracemalloc.get_traced_memory()[0] - start["python"]
        held["arrow"] = pa.total_allocated_bytes() - start["arrow"]
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, measured)
    tracemalloc.start()
    try:
        start.update(python=tracemalloc.get_traced_memory()[0], arrow=pa.total_allocated_bytes())
        result = run()
    finally:
        tracemalloc.stop()
    return held, result

