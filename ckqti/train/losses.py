"""Training losses: RankNet over every ordered pair of documents with a higher label (NDRM training, SPEC),
a listwise softmax cross-entropy of each row's best-labelled document, and listwise distillation from a
teacher's scores."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ckqti.errors import CkqtiError


def ranknet_loss(scores: Tensor, labels: Tensor, valid: Tensor | None = None) -> Tensor:
    """Mean over pairs ``(i, j)`` of one row with ``labels[i] > labels[j]`` of ``log(1 + exp(s_j - s_i))``.

    Args:
        scores: model scores of each row's documents.
        labels: their integer labels (higher is better).
        valid: True where a document exists (rows may hold fewer documents); None: all.

    Returns:
        A scalar; 0 (with a gradient path) when no row has a pair.

    Shape:
        scores ``[B, N]``, labels ``[B, N]``, valid ``[B, N]`` bool -> ``[]``.
    """
    if scores.shape != labels.shape:
        raise ValueError(f"scores {tuple(scores.shape)} and labels {tuple(labels.shape)} differ")
    ok = torch.ones_like(labels, dtype=torch.bool) if valid is None else valid
    better = (labels.unsqueeze(2) > labels.unsqueeze(1)) & ok.unsqueeze(2) & ok.unsqueeze(1)  # [B, N, N]
    diff = scores.unsqueeze(2) - scores.unsqueeze(1)  # [B, N, N]: s_i - s_j
    losses = F.softplus(-diff)[better]  # [pairs]
    if losses.numel() == 0:
        return scores.sum() * 0.0
    return losses.mean()


def listwise_loss(scores: Tensor, labels: Tensor, relevant: int | None = None) -> Tensor:
    """Mean over rows with exactly one document of the row's highest label, itself above another, of
    ``-log softmax(scores)[that document]`` (the relevant document against every other one of its row).

    Args:
        relevant: the lowest label of a relevant document: a row whose highest label is below it adds
            nothing (None: every row's single best document counts as its relevant one).

    Returns:
        A scalar; 0 (with a gradient path) when no row has such a document.

    Shape:
        scores ``[B, N]``, labels ``[B, N]`` -> ``[]``.
    """
    if scores.shape != labels.shape:
        raise ValueError(f"scores {tuple(scores.shape)} and labels {tuple(labels.shape)} differ")
    top = labels.max(dim=-1, keepdim=True).values  # [B, 1]
    best = labels == top  # [B, N]
    rows = (best.sum(-1) == 1) & (labels.min(dim=-1).values < top.squeeze(-1))  # [B]
    if relevant is not None:
        rows &= top.squeeze(-1) >= relevant
    if not rows.any():
        return scores.sum() * 0.0
    logp = torch.log_softmax(scores[rows], dim=-1)  # [B', N]
    return -(logp * best[rows]).sum(-1).mean()


def distill_loss(student: Tensor, teacher: Tensor) -> Tensor:
    """Cross-entropy of the student's softmax against the teacher's, each ``[B, k]`` -> scalar.

    Listwise and free of the two models' score scales; equals KL(teacher || student) plus the
    teacher's entropy, so its gradient is the KL's.
    """
    return -(torch.softmax(teacher, dim=-1) * torch.log_softmax(student, dim=-1)).sum(-1).mean()


def finite_loss(loss: Tensor | float, where: str) -> float:
    """A step's loss as a float; a NaN or infinite one stops training, so that no model whose
    weights it has turned to NaN is saved (such a model fills an index with no postings)."""
    value = float(loss.detach()) if isinstance(loss, Tensor) else float(loss)
    if not math.isfinite(value):
        raise CkqtiError(f"training diverged: the loss is {value} at {where}; nothing of this epoch is saved "
                         "(try a lower learning rate; a teacher's scores must be finite)")
    return value
