"""Impact quantization (indexer/quantize.py) by hand: the step formula, rounding, clipping."""

from __future__ import annotations

import numpy as np
import pytest

from indexer.quantize import Quantizer


def test_fit_maps_the_largest_score_to_the_top_level():
    """``step = max_score / ((1 << bits) - 1)``: 255 levels above 0 for 8 bits, so the largest
    score quantizes to 255 exactly (not 256 levels, which would leave it at 254.0...)."""
    q = Quantizer.fit(510.0)
    assert q.levels == 255 and q.steps == (2.0,) and q.step == 2.0
    assert q.quantize(np.array([510.0])).tolist() == [255]
    two = Quantizer.fit([25.5, 0.0], weights=("one", "idf"))  # a channel without a positive score: step 1/255
    assert two.steps == pytest.approx((0.1, 1 / 255)) and two.weights == ("one", "idf")


def test_quantize_rounds_to_nearest_and_clips_at_255():
    """``q = rint(s / step)`` (halves to even, as numpy rounds), not truncation; negatives go to 0
    and values above 255 steps are stored as 255 and counted by ``clipped``."""
    q = Quantizer(steps=1.0)
    scores = np.array([-3.0, 0.49, 0.5, 0.51, 0.99, 1.5, 2.5, 2.51, 7.7, 254.5, 254.6, 255.4, 255.5, 300.0])
    got = q.quantize(scores)
    assert got.dtype == np.uint8
    assert got.tolist() == [0, 0, 0, 1, 1, 2, 2, 3, 8, 254, 255, 255, 255, 255]
    # rint(255.4) = 255 is the top level, not above it; rint(255.5) = 256 and 300 are
    assert q.clipped(scores) == 2
    assert q.clipped(np.array([255.0, 255.49])) == 0
    assert q.dequantize(got[:4]).tolist() == [0.0, 0.0, 0.0, 1.0]


def test_quantize_uses_each_scores_channel_step():
    q = Quantizer(steps=(1.0, 2.0), weights=("one", "idf"))
    scores = np.array([1.5, 3.0, 2.9, 5.2, 600.0, 600.0])
    channels = np.array([0, 1, 0, 1, 0, 1])
    # s / step: 1.5, 1.5, 2.9, 2.6, 600, 300
    assert q.quantize(scores, channels).tolist() == [2, 2, 3, 3, 255, 255]
    assert q.clipped(scores, channels) == 2
    assert q.dequantize(np.array([3, 3]), np.array([0, 1])).tolist() == [3.0, 6.0]
    with pytest.raises(ValueError, match="one step per channel"):
        q.quantize(scores)  # two channels: a channel per score is needed
