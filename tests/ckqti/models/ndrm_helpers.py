"""Tiny NDRM settings and hand-made inputs shared by the NDRM tests (test_ndrm*.py)."""

from __future__ import annotations

import torch

from ckqti.models.ndrm import build_ndrm
from ckqti.models.ndrm_config import NDRMConfig
from ckqti.vocab import Vocabulary

VARIANTS = ("ndrm1", "ndrm2", "ndrm3")


def tiny(vocab_size: int, variant: str, **kw) -> NDRMConfig:
    base = dict(dim=16, num_heads=4, conv_window=5, ff_dim=16, mlp_hidden=16, pool_window=20, pool_stride=10)
    return NDRMConfig(vocab_size=vocab_size, variant=variant, **{**base, **kw})


def pad(rows: list[list[int]], width: int | None = None) -> torch.Tensor:
    width = width or max(len(r) for r in rows)
    return torch.tensor([r + [0] * (width - len(r)) for r in rows], dtype=torch.long)


def model(vocab: Vocabulary, variant: str, seed: int = 0, **kw):
    torch.manual_seed(seed)
    return build_ndrm(tiny(len(vocab), variant, **kw), vocab)


def _hand_vocab() -> Vocabulary:
    docs = ["x y x z", "y w", "z z z u v", "y u", "w w"]
    return Vocabulary.build([d.split() for d in docs])  # N = 5, avgdl = 3
