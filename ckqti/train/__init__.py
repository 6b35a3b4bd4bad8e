"""Training NDRM models: sampling, RankNet, the training loop, checkpoints.

``from ckqti.train import train, TrainConfig, TrainResult`` is the training API (``ckqti
train``); :mod:`ckqti.train.checkpoint` is the checkpoint format and is light to import
(the index builder loads models through it without importing the training loop).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ckqti.train.loop import TrainConfig, TrainResult, train

__all__ = ["TrainConfig", "TrainResult", "train"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ckqti.train import loop

        return getattr(loop, name)
    raise AttributeError(f"module 'ckqti.train' has no attribute {name!r}")
