"""Training NDRM models: sampling, RankNet, the training loop.

``from ckqti.train import train, TrainConfig, TrainResult`` is the training API (``ckqti
train``). The checkpoints it writes are in :mod:`ckqti.models.checkpoint`'s format, beside the
models: indexing, search, rerank and explain read them without importing this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ckqti.train.loop import train
    from ckqti.train.ndrm_config import TrainConfig, TrainResult

__all__ = ["TrainConfig", "TrainResult", "train"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ckqti.train import loop

        return getattr(loop, name)
    raise AttributeError(f"module 'ckqti.train' has no attribute {name!r}")
