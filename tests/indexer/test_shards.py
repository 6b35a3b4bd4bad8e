"""Writing a shard: postings in impact order, cut into segments (docs/INDEX.md, issue 2)."""

from __future__ import annotations

import numpy as np

from indexer.shards import ImpactPostings, decode_segments, segment_postings


def test_segments_order_postings_by_impact_then_document_whatever_the_input_order():
    """``ImpactPostings`` may come in any order: each list's postings are stored by impact descending,
    documents ascending inside an impact, one segment per distinct impact; zero impacts are dropped."""
    rng = np.random.default_rng(0)
    lists, docs = np.divmod(rng.choice(12 * 40, size=300, replace=False), 40)  # distinct (list, doc) pairs
    impacts = rng.integers(0, 4, lists.size)  # few levels: segments of several documents
    perm = rng.permutation(lists.size)  # documents out of order, as a caller may hand them
    p = ImpactPostings(lists[perm].astype(np.int32), docs[perm].astype(np.uint32), impacts[perm].astype(np.uint8))
    seg = segment_postings(p, 12)
    got = decode_segments(seg["postings"], seg["seg_start"], seg["seg_impact"], seg["seg_ptr"])
    want = sorted((int(t), -int(v), int(d)) for t, d, v in zip(lists, docs, impacts) if v > 0)
    assert [(int(t), -int(v), int(d)) for t, d, v in zip(*got)] == want
    assert seg["seg_ptr"].size == 13 and seg["seg_ptr"][-1] == seg["seg_start"].size - 1
    for t in range(12):  # one segment per distinct impact of the list, strictly descending
        levels = seg["seg_impact"][seg["seg_ptr"][t]: seg["seg_ptr"][t + 1]].tolist()
        assert levels == sorted({-v for tt, v, _ in want if tt == t}, reverse=True) and 0 not in levels


def test_segmenting_a_shard_holds_few_bytes_a_posting_beyond_its_input():
    """A shard's postings are sorted into impact order with counting sorts that copy documents and
    impacts (5 bytes a posting), not int64 permutations and int64 copies of every column (47 bytes
    a posting before: 4 GB for MS MARCO's ~85M postings a shard). Output, segments and per-list
    counts here come to ~11 bytes a posting. numpy's and Numba's arrays are counted by tracemalloc."""
    import tracemalloc

    rng = np.random.default_rng(0)
    lists = np.concatenate([np.sort(rng.choice(20_000, 100, replace=False)) for _ in range(2_000)]).astype(np.int32)
    docs = np.repeat(np.arange(2_000, dtype=np.uint32), 100)  # as a build hands them: documents ascending
    p = ImpactPostings(lists, docs, rng.integers(0, 16, lists.size).astype(np.uint8))
    want = segment_postings(p, 20_000)  # compiled (or loaded) before counting
    tracemalloc.start()
    try:
        got = segment_postings(p, 20_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert all(np.array_equal(got[k], want[k]) for k in want)
    assert peak / lists.size < 25, peak / lists.size
