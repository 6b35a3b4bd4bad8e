"""Batch search cut into chunks of queries, spread over threads."""

from __future__ import annotations

import itertools

BATCH_CHUNK = 64  # queries a kernel call takes at a time in one-thread batch search

# With several threads, a batch is cut into CHUNKS_PER_THREAD chunks a thread, taken in turn: every
# chunk after a thread's first waits for the GIL between two kernel calls, and that hand-off cost
# about 100 us here (1M synthetic index, 300 tail queries at 2 threads, out-of-tree A/B in session 19:
# 85k QPS at 8 chunks a thread, 91k at 4, 99k at 2, 104k at 1; head-heavy 7.1k, 7.4k, 7.2k, 6.9k).
# Two keep a slow query from holding up the whole batch on one thread.
CHUNKS_PER_THREAD = 2

MAX_CHUNK_HITS = 1 << 21  # a multi-shard chunk holds [shards, queries, k] hits twice: at most this many (16 MB) each, unless one query holds more



def batch_chunk(nq: int, threads: int, num_shards: int, k: int) -> int:
    """Queries a kernel call takes at a time in a batch of ``nq`` (see :data:`CHUNKS_PER_THREAD`)."""
    size = BATCH_CHUNK if threads <= 1 else -(-nq // (CHUNKS_PER_THREAD * threads))
    if num_shards > 1:  # a chunk's [shards, queries, k] hits: at most MAX_CHUNK_HITS unless one query holds more
        size = min(size, MAX_CHUNK_HITS // (num_shards * k))
    return max(1, size)



def run_chunks(fn, starts: list[int], threads: int, submit=None) -> None:
    """``fn(start)`` for every start: in this thread, or on this thread and ``threads - 1`` helpers
    (``submit(worker, n)`` starts ``worker`` on ``n`` threads and returns their futures), which
    take the next start from a shared counter (``next()`` on it is atomic under the GIL), so a
    batch pays one hand-off per helper, not per chunk. No more helpers than chunks after this
    thread's first: ``threads`` past that would start idle threads (a mistyped ``--threads
    100000000`` asked the pool for that many, until memory ran out)."""
    if threads <= 1 or len(starts) <= 1 or submit is None:
        for lo in starts:
            fn(lo)
        return
    taken = itertools.count()

    def worker() -> None:
        while (i := next(taken)) < len(starts):
            fn(starts[i])

    helpers = submit(worker, min(threads, len(starts)) - 1)
    try:
        worker()
    finally:  # the helpers write into the caller's arrays: never return before they are done
        for f in helpers:
            f.result()
