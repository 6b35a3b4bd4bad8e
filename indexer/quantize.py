"""Impact quantization: float term-document scores to small integers.

Linear quantization with one global step over the whole index, as in learned-sparse
indexes served by PISA/Anserini: ``q = round(s / step)``, ``step = max_score / (2**bits - 1)``.
A global step keeps sums of impacts over query terms proportional to sums of scores,
so ranking by integer sums equals ranking by the (rounded) float sums. Scores that
quantize to 0 are not stored.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class Quantizer:
    """Args:
    bits: 8 (uint8 impacts; the index format stores impacts per segment, so at most 8 bits).
    step: score units per impact unit.
    """

    step: float
    bits: int = 8

    def __post_init__(self) -> None:
        if self.bits != 8:
            raise ValueError("only 8-bit impacts are supported")
        if not (self.step > 0 and np.isfinite(self.step)):
            raise ValueError(f"quantization step must be positive and finite, got {self.step}")

    @property
    def levels(self) -> int:
        return (1 << self.bits) - 1

    @classmethod
    def fit(cls, max_score: float, bits: int = 8) -> "Quantizer":
        max_score = float(max_score)
        if not max_score > 0:
            max_score = 1.0
        return cls(step=max_score / ((1 << bits) - 1), bits=bits)

    def quantize(self, scores: np.ndarray) -> np.ndarray:
        q = np.rint(np.asarray(scores, dtype=np.float64) / self.step)
        return np.clip(q, 0, self.levels).astype(np.uint8)

    def dequantize(self, impacts: np.ndarray) -> np.ndarray:
        return np.asarray(impacts, dtype=np.float64) * self.step

    def to_dict(self) -> dict:
        return {"scheme": "linear-global", **asdict(self)}

    @classmethod
    def from_dict(cls, d: dict) -> "Quantizer":
        return cls(step=float(d["step"]), bits=int(d["bits"]))
