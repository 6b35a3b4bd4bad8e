"""Word vectors moved back toward their start: weight-space interpolation of a trained checkpoint.

A model fine-tuned on one collection can lose on others what its starting point had (WiSE-FT,
Wortsman et al., CVPR 2022: interpolating a fine-tuned model's weights with its start keeps much
of the gain and recovers robustness under distribution shift). NDRM3's trained word vectors carry
both its SciFact gain and its zero-shot loss, so :func:`interpolate_embeddings` writes a
checkpoint whose embedding matrices are ``E0 + alpha (E1 - E0)``: ``E1`` the trained rows, ``E0``
the rows training started from, recomputed from the checkpoint's training settings
(``embeddings="minilm"``: all-MiniLM-L6-v2's WordPiece compositions, which need no training and
come back bit for bit). Every other weight is the checkpoint's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ckqti.errors import CkqtiError
from ckqti.train.checkpoint import EMBEDDING_SUFFIX, Checkpoint, load_checkpoint, save_checkpoint


def starting_embeddings(ckpt: Checkpoint, dim: int) -> np.ndarray:
    """``[len(ckpt.vocab), dim]``: the rows the checkpoint's training started from.

    Raises:
        CkqtiError: the checkpoint records no start that can be recomputed (only
            ``embeddings="minilm"`` can: skip-gram and random starts are not kept).
    """
    from ckqti.embeddings import minilm_embeddings

    start = (ckpt.meta.get("config") or {}).get("embeddings")
    if start != "minilm":
        raise CkqtiError(f"its word vectors started from {start!r}; only a 'minilm' start can be recomputed",
                         ckpt.path)
    return minilm_embeddings(ckpt.vocab, dim)


def interpolate_embeddings(source: str | Path, alpha: float, out: str | Path) -> Checkpoint:
    """Write ``source`` with every embedding matrix at ``E0 + alpha (E1 - E0)`` to ``out``.

    ``alpha = 1`` is the source model, ``0`` its architecture and trained weights over the
    starting word vectors. Matrices are saved in the source's dtype; ``meta["interpolated"]``
    records the source id and ``alpha``.

    Shape:
        each ``*embedding.weight`` ``[len(vocab), D]`` -> the same.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    ckpt = load_checkpoint(source)
    model = ckpt.build()
    dtypes = set()
    with torch.no_grad():
        for key, value in model.state_dict().items():
            if key.endswith(EMBEDDING_SUFFIX) and value.shape[0] == len(ckpt.vocab):
                dtypes.add(ckpt.state_dict[key].dtype)
                start = torch.from_numpy(starting_embeddings(ckpt, value.shape[1])).to(value)
                value.copy_(start + alpha * (value - start))
    if not dtypes:
        raise CkqtiError("the checkpoint has no word embedding matrix", ckpt.path)
    dtype = "float16" if dtypes == {torch.float16} else "float32"
    meta = {**ckpt.meta, "interpolated": {"from": ckpt.id, "alpha": float(alpha), "start": "minilm"}}
    return save_checkpoint(out, model, ckpt.kind, ckpt.config, ckpt.vocab, ckpt.analyzer, meta, dtype, ckpt.fallback)
