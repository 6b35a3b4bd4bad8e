"""What a shard derives for the kernels: per-posting impacts."""

from __future__ import annotations

import numpy as np

from retriever.kernel_postings import posting_impacts
from tests.retriever.kernel_cases import HAND, build


def test_posting_impacts_only_for_short_segments():
    short = build(HAND, 5)  # 6 postings in 5 segments
    imps = posting_impacts(short["postings"], short["seg_start"], short["seg_impact"])
    assert imps.dtype == np.uint8
    assert imps.tolist() == [5, 3, 3, 9, 4, 1]  # term 2: 5 | 3 3; term 3: 9 | 4; term 4: 1 (segments by impact)
    long = build([(2, d, 7) for d in range(40)], 3)  # one segment of 40 postings
    assert posting_impacts(long["postings"], long["seg_start"], long["seg_impact"]).shape == (0,)


def walked_to(skips, p, hi, d):
    """:func:`retriever.kernel_postings.skip_to` one entry at a time: the last entry from ``p`` (below ``hi``) at most ``d``."""
    while p + 1 < hi and skips[p + 1] <= d:
        p += 1
    return p


def test_skip_to_over_a_long_skip_list_lands_where_a_walk_one_entry_at_a_time_does():
    """A segment's skip entries are walked SKIP_STRIDE (8) at a time, then one by one: no kernel test had a
    segment of more than 8 skip entries (576 postings), so the strides never ran. Over 300 ascending entries,
    from starts inside the list, to every document around each entry (on it, just before, just after, and
    beyond the last), bounded by the list's end or a bound inside it: the entry a one-by-one walk reaches."""
    from retriever.kernel_postings import SKIP_STRIDE, skip_to

    rng = np.random.default_rng(5)
    skips = np.cumsum(rng.integers(1, 50, 300)).astype(np.uint32)
    targets = sorted({int(v) + off for v in skips for off in (-1, 0, 1)} | {0, int(skips[-1]) + 100})
    strided = 0
    for p, hi in ((0, 300), (0, 9), (7, 300), (13, 290), (150, 300), (299, 300)):
        for d in targets:
            want = walked_to(skips, p, hi, d)
            assert skip_to(skips, p, hi, d) == want, (p, hi, d)
            strided += want - p >= SKIP_STRIDE
    assert strided > 1000  # most landings are more than a stride away

