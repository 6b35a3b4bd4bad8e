"""Weight-space interpolation of trained checkpoints: word vectors moved back toward their start,
and averages ("soups") of models trained from one start.

A model fine-tuned on one collection can lose on others what its starting point had (WiSE-FT,
Wortsman et al., CVPR 2022: interpolating a fine-tuned model's weights with its start keeps much
of the gain and recovers robustness under distribution shift). NDRM3's trained word vectors carry
both its SciFact gain and its zero-shot loss, so :func:`interpolate_embeddings` writes a
checkpoint whose embedding matrices are ``E0 + alpha (E1 - E0)``: ``E1`` the trained rows, ``E0``
the rows training started from, recomputed from the checkpoint's training settings
(``embeddings="minilm"``: all-MiniLM-L6-v2's WordPiece compositions, which need no training and
come back bit for bit). Every other weight is the checkpoint's.

:func:`average_checkpoints` averages every weight of models that share a start, a data order and
an architecture but were trained with different settings (a "model soup", Wortsman et al., ICML
2022: such averages often rank or classify better than either model, and hold up better under
shift, where the models stay in one basin of the loss).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ckqti.errors import CkqtiError
from ckqti.models.checkpoint import EMBEDDING_SUFFIX, Checkpoint, load_checkpoint, save_checkpoint


def stored_embedding_dtype(ckpt: Checkpoint) -> str:
    """``"float16"`` when every embedding matrix of the checkpoint is stored so, else ``"float32"``."""
    dtypes = {v.dtype for k, v in ckpt.state_dict.items() if k.endswith(EMBEDDING_SUFFIX)}
    return "float16" if dtypes == {torch.float16} else "float32"


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
    moved = 0
    with torch.no_grad():
        for key, value in model.state_dict().items():
            if key.endswith(EMBEDDING_SUFFIX) and value.shape[0] == len(ckpt.vocab):
                start = torch.from_numpy(starting_embeddings(ckpt, value.shape[1])).to(value)
                value.copy_(start + alpha * (value - start))
                moved += 1
    if not moved:
        raise CkqtiError("the checkpoint has no word embedding matrix", ckpt.path)
    meta = {**ckpt.meta, "interpolated": {"from": ckpt.id, "alpha": float(alpha), "start": "minilm"}}
    return save_checkpoint(out, model, ckpt.kind, ckpt.config, ckpt.vocab, ckpt.analyzer, meta,
                           stored_embedding_dtype(ckpt), ckpt.fallback)


#: Model config fields that only change how a model trains, never how it scores.
TRAINING_ONLY = ("train_embeddings",)


def scoring_config(model: torch.nn.Module) -> dict:
    """The model's config (a dataclass) as a dict, without the :data:`TRAINING_ONLY` fields."""
    from dataclasses import asdict

    return {k: v for k, v in asdict(model.config).items() if k not in TRAINING_ONLY}


def average_checkpoints(sources: list[str | Path], weights: list[float], out: str | Path) -> Checkpoint:
    """Write the weighted average of checkpoints of one kind, config, vocabulary and analyzer to ``out``.

    Floating-point tensors are averaged with ``weights`` (non-negative, summing to 1); integer ones
    (counters) are taken from the first checkpoint, as are its metadata (``meta["averaged"]``
    records the sources' ids and weights), fallback and embedding dtype.

    Raises:
        CkqtiError: checkpoints that differ in kind, config, vocabulary, analyzer or tensor names.
    """
    if len(sources) != len(weights) or len(sources) < 2:
        raise ValueError("average_checkpoints needs two or more sources and one weight each")
    if min(weights) < 0 or abs(sum(weights) - 1.0) > 1e-9:
        raise ValueError(f"weights must be non-negative and sum to 1, got {weights}")
    ckpts = [load_checkpoint(p) for p in sources]
    first = ckpts[0]
    model = first.build()
    for other in ckpts[1:]:
        same = (other.kind == first.kind and scoring_config(other.build()) == scoring_config(model)
                and other.analyzer == first.analyzer and other.vocab.terms == first.vocab.terms
                and other.state_dict.keys() == first.state_dict.keys())
        if not same:
            raise CkqtiError(f"not the same model as {first.path}: kind, config, vocabulary, analyzer and weights' "
                             "names must agree to average", other.path)
    state = model.state_dict()
    with torch.no_grad():
        for key, value in state.items():
            if value.is_floating_point():
                value.copy_(sum(w * c.state_dict[key].to(value.dtype) for w, c in zip(weights, ckpts)))
    meta = {**first.meta, "averaged": {"from": [c.id for c in ckpts], "weights": [float(w) for w in weights]}}
    return save_checkpoint(out, model, first.kind, first.config, first.vocab, first.analyzer, meta,
                           stored_embedding_dtype(first), first.fallback)
