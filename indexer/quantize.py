"""Impact quantization: float term-document scores to small integers, one step per channel.

A model's stored scores come in channels (:mod:`ckqti.models.qti`): channel ``c`` of term
``t`` is one posting list. Each channel has one global linear step over the whole index,
as in learned-sparse indexes served by PISA/Anserini: ``q = round(s / step_c)``,
``step_c = max_score_c / (2**bits - 1)``. A global step keeps sums of impacts over query
terms proportional to sums of scores; the query-time weight of a channel (its step, times
idf for ``"idf"`` channels) puts channels on one scale. Scores that quantize to 0 are not
stored; scores above ``255 * step_c`` (possible when documents are appended with an
existing index's steps) are clipped to 255.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from indexer.format import CHANNEL_WEIGHTS


@dataclass(frozen=True)
class Quantizer:
    """Args:
    steps: score units per impact unit, one per channel (a single float: one channel).
    bits: 8 (uint8 impacts; the index format stores impacts per segment, so at most 8 bits).
    weights: each channel's query-time weighting, ``"one"`` or ``"idf"`` (default: all ``"one"``).
    """

    steps: tuple[float, ...]
    bits: int = 8
    weights: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        steps = tuple(float(s) for s in np.atleast_1d(np.asarray(self.steps, dtype=np.float64)))
        weights = tuple(self.weights) or ("one",) * len(steps)
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "weights", weights)
        if self.bits != 8:
            raise ValueError("only 8-bit impacts are supported")
        if not steps or not all(s > 0 and np.isfinite(s) for s in steps):
            raise ValueError(f"quantization steps must be positive and finite, got {steps}")
        if len(weights) != len(steps) or any(w not in CHANNEL_WEIGHTS for w in weights):
            raise ValueError(f"need one weight in {CHANNEL_WEIGHTS} per step, got {weights} for {len(steps)} steps")

    @property
    def channels(self) -> int:
        return len(self.steps)

    @property
    def step(self) -> float:
        """The step of a single-channel quantizer."""
        if self.channels != 1:
            raise ValueError(f"a {self.channels}-channel quantizer has one step per channel")
        return self.steps[0]

    @property
    def levels(self) -> int:
        return (1 << self.bits) - 1

    @classmethod
    def fit(cls, max_score: float | Sequence[float] | np.ndarray, bits: int = 8, weights: Sequence[str] = ()) -> "Quantizer":
        """Steps that map each channel's largest score to the top level (a channel without a
        positive score gets the step of a largest score of 1)."""
        top = np.atleast_1d(np.asarray(max_score, dtype=np.float64))
        top = np.where(top > 0, top, 1.0)
        return cls(steps=tuple(top / ((1 << bits) - 1)), bits=bits, weights=tuple(weights))

    def _steps_of(self, channels: np.ndarray | None) -> np.ndarray | float:
        if channels is None:
            return self.step
        return np.asarray(self.steps, dtype=np.float64)[np.asarray(channels)]

    def quantize(self, scores: np.ndarray, channels: np.ndarray | None = None) -> np.ndarray:
        """``round(s / step)`` clipped to ``[0, 255]``; ``channels`` gives each score's channel
        (None: the single channel)."""
        scores = np.asarray(scores, dtype=np.float64)
        q = np.rint(scores / self._steps_of(channels))
        return np.clip(q, 0, self.levels).astype(np.uint8)

    def clipped(self, scores: np.ndarray, channels: np.ndarray | None = None) -> int:
        """How many scores lie above the top level (they are stored as 255)."""
        scores = np.asarray(scores, dtype=np.float64)
        return int(np.count_nonzero(np.rint(scores / self._steps_of(channels)) > self.levels))

    def dequantize(self, impacts: np.ndarray, channels: np.ndarray | None = None) -> np.ndarray:
        return np.asarray(impacts, dtype=np.float64) * self._steps_of(channels)

    def to_dict(self) -> dict:
        """The manifest's ``quantization`` entry (the steps are in its ``channels`` entry)."""
        return {"scheme": "linear-per-channel", "bits": self.bits}

    def channel_dicts(self) -> list[dict]:
        """The manifest's ``channels`` entry: ``[{"weight": ..., "step": ...}, ...]``."""
        return [{"weight": w, "step": s} for w, s in zip(self.weights, self.steps)]

    @classmethod
    def from_manifest(cls, quantization: dict, channels: list[dict]) -> "Quantizer":
        return cls(
            steps=tuple(float(c["step"]) for c in channels),
            bits=int(quantization["bits"]),
            weights=tuple(c["weight"] for c in channels),
        )
