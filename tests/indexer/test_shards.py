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
