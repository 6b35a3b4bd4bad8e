"""Losses that distil IDCM's cheap window selector from its frozen cross-encoder.

The teacher scores every window of a document; the student (the kernel selector) should
rank the teacher's best windows first, since only its top ``sample_n`` windows reach the
cross-encoder at inference. Three losses (IDCM, seed 003, and its reference code):

* :func:`selector_lambda_loss`: LambdaLoss (Wang et al., CIKM 2018) with the NDCG-Loss2
  weighting, over gains ``sample_n - i`` for the teacher's ``i``-th best window (``i < sample_n``)
  and 0 for the others; windows that do not exist are left out of every pair.
* :func:`selector_mse_loss`: mean squared error between student and teacher window scores;
* :func:`selector_kl_loss`: KL divergence from the teacher's softmax over a document's windows
  to the student's.

:func:`selector_distillation_loss` runs both on an IDCM model and applies one of them (training stage 3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    from ckqti.models.idcm import IDCM

SELECTOR_LOSSES = ("lambda", "mse", "kl")  # SPEC: LambdaLoss; MSE/KL alternatives


def teacher_gains(teacher: Tensor, valid: Tensor, sample_n: int) -> Tensor:
    """Gains ``sample_n - i`` for the teacher's ``i``-th best valid window, 0 for the rest.

    Shape:
        teacher ``[B, W]``, valid ``[B, W]`` bool -> ``[B, W]`` float.
    """
    order = teacher.masked_fill(~valid, float("-inf")).argsort(dim=1, descending=True)  # [B, W]
    top = min(sample_n, teacher.shape[1])
    gains = torch.zeros_like(teacher, dtype=torch.float32)
    values = torch.arange(sample_n, sample_n - top, -1, device=teacher.device, dtype=torch.float32)
    gains.scatter_(1, order[:, :top], values.expand(teacher.shape[0], -1))
    return gains * valid


def lambda_loss(scores: Tensor, gains: Tensor, valid: Tensor, sigma: float = 1.0, eps: float = 1e-10) -> Tensor:
    """LambdaLoss with NDCG-Loss2 weights, summed over pairs, averaged over lists.

    For the list sorted by ``scores``, every pair of ranks ``(i, j)`` of valid items with
    ``gain_i > gain_j`` adds ``-delta_ij * log2(sigmoid(sigma * (s_i - s_j)))`` with
    ``delta_ij = |1/D(|i-j|) - 1/D(|i-j|+1)| * |G_i - G_j|``, ``D(n) = log2(1 + n)`` and
    ``G = (2^gain - 1) / maxDCG``.

    Shape:
        scores, gains ``[B, W]``, valid ``[B, W]`` bool -> scalar.
    """
    w = scores.shape[1]
    s_sorted, order = scores.masked_fill(~valid, float("-inf")).sort(dim=1, descending=True)  # [B, W]
    g = gains.gather(1, order).masked_fill(~valid.gather(1, order), 0.0)  # [B, W]
    ok = valid.gather(1, order)  # [B, W]
    ranks = torch.arange(1, w + 1, device=scores.device, dtype=torch.float32)
    discount = torch.log2(1.0 + ranks)  # [W]
    ideal = (torch.pow(2.0, gains * valid).sort(dim=1, descending=True).values - 1.0) / discount
    g_norm = (torch.pow(2.0, g) - 1.0) / ideal.sum(1, keepdim=True).clamp(min=eps)  # [B, W]
    dist = (ranks[:, None] - ranks[None, :]).abs().long()  # [W, W]
    inv = torch.cat([discount.new_zeros(1), 1.0 / discount])  # inv[n] = 1 / D(n), inv[0] unused
    delta = (inv[dist] - inv[(dist + 1).clamp(max=w)]).abs()  # [W, W]
    weights = delta * (g_norm[:, :, None] - g_norm[:, None, :]).abs()  # [B, W, W]
    pairs = (g[:, :, None] > g[:, None, :]) & ok[:, :, None] & ok[:, None, :]
    diff = s_sorted[:, :, None] - s_sorted[:, None, :]  # [B, W, W]
    diff = torch.where(pairs, diff, torch.zeros_like(diff)).clamp(-1e8, 1e8)
    losses = -weights.detach() * torch.log2(torch.sigmoid(sigma * diff).clamp(min=eps))
    return (losses * pairs).sum() / scores.shape[0]


def selector_lambda_loss(student: Tensor, teacher: Tensor, valid: Tensor, sample_n: int) -> Tensor:
    """LambdaLoss of the selector's window scores against the teacher's top ``sample_n`` windows.

    Shape:
        student, teacher ``[B, W]``, valid ``[B, W]`` bool -> scalar.
    """
    return lambda_loss(student, teacher_gains(teacher.detach(), valid, sample_n), valid)


def selector_mse_loss(student: Tensor, teacher: Tensor, valid: Tensor) -> Tensor:
    """Mean squared error between selector and teacher scores over valid windows.

    Shape:
        student, teacher ``[B, W]``, valid ``[B, W]`` bool -> scalar.
    """
    diff = (student - teacher.detach()) * valid
    return diff.pow(2).sum() / valid.sum().clamp(min=1)


def selector_kl_loss(student: Tensor, teacher: Tensor, valid: Tensor) -> Tensor:
    """KL divergence ``KL(p_teacher || p_student)`` of the softmax distributions over each document's
    valid windows, averaged over documents (a document without a valid window adds 0).

    Shape:
        student, teacher ``[B, W]``, valid ``[B, W]`` bool -> scalar.
    """
    low = torch.finfo(student.dtype).min
    log_s = torch.log_softmax(student.masked_fill(~valid, low), dim=1)  # [B, W]
    log_t = torch.log_softmax(teacher.detach().masked_fill(~valid, low), dim=1)  # [B, W]
    kl = (log_t.exp() * (log_t - log_s)).masked_fill(~valid, 0.0)  # [B, W]
    return kl.sum() / student.shape[0]


def selector_distillation_loss(model: IDCM, query_ids: Tensor, doc_ids: Tensor, kind: str = "lambda") -> Tensor:
    """IDCM's selector loss against its frozen cross-encoder's window scores (training stage 3).

    The teacher (:meth:`IDCM.all_window_scores`) runs in eval mode without gradients; the student is
    :meth:`IDCM.selector_scores`. ``kind`` is ``"lambda"`` (:func:`selector_lambda_loss`, gains
    ``sample_n - i`` for the teacher's top windows), ``"mse"`` or ``"kl"``.

    Shape:
        query_ids ``[B, Q]``, doc_ids ``[B, L]`` -> scalar.
    """
    if kind not in SELECTOR_LOSSES:
        raise ValueError(f"kind must be one of {SELECTOR_LOSSES}, got {kind!r}")
    was_training = model.bert.training
    try:
        model.bert.eval()
        with torch.no_grad():
            teacher = model.all_window_scores(query_ids, doc_ids)
    finally:
        model.bert.train(was_training)
    student = model.selector_scores(query_ids, doc_ids)
    if kind == "mse":
        return selector_mse_loss(student.scores, teacher.scores, teacher.valid)
    if kind == "kl":
        return selector_kl_loss(student.scores, teacher.scores, teacher.valid)
    return selector_lambda_loss(student.scores, teacher.scores, teacher.valid, model.config.sample_n)
