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
