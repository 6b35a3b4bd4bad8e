"""Distilling IDCM's window selector from its frozen cross-encoder (ckqti.train.losses_idcm)."""

from __future__ import annotations

import pytest
import torch

from ckqti.models.idcm import IDCM
from ckqti.train.losses_idcm import (
    lambda_loss,
    selector_distillation_loss,
    selector_kl_loss,
    selector_lambda_loss,
    selector_mse_loss,
    teacher_gains,
)
from tests.ckqti.models.test_idcm import random_batch, tiny


def test_teacher_gains_and_lambda_loss():
    teacher = torch.tensor([[0.1, 0.9, 0.5, 0.7, 0.3, 9.0]])
    valid = torch.tensor([[True, True, True, True, True, False]])
    assert teacher_gains(teacher, valid, 3).tolist() == [[0.0, 3.0, 1.0, 2.0, 0.0, 0.0]]
    gains = teacher_gains(teacher, valid, 3)
    agree = torch.tensor([[0.0, 9.0, 5.0, 7.0, 0.0, -50.0]])
    reverse = -agree
    assert lambda_loss(agree, gains, valid) < 0.1 * lambda_loss(reverse, gains, valid)
    changed = agree.clone()
    changed[0, 5] = 100.0  # an invalid window does not count, whatever its score
    torch.testing.assert_close(lambda_loss(changed, gains, valid), lambda_loss(agree, gains, valid))
    student = torch.zeros(1, 6, requires_grad=True)
    selector_lambda_loss(student, teacher, valid, 3).backward()
    assert torch.isfinite(student.grad).all() and student.grad[0, 5] == 0
    assert student.grad[0, 1] < 0 < student.grad[0, 0]  # push the teacher's best up, a zero-gain one down
    torch.testing.assert_close(selector_mse_loss(teacher, teacher, valid), torch.tensor(0.0))


def test_selector_kl_loss_is_the_kl_divergence_over_valid_windows():
    """SPEC's KL alternative: KL(teacher softmax || student softmax) over a document's valid windows."""
    teacher = torch.tensor([[2.0, 0.0, 1.0, 5.0], [0.5, -1.0, 3.0, 0.0]])
    student = torch.tensor([[0.0, 1.0, 0.5, -7.0], [1.0, 1.0, 1.0, 1.0]], requires_grad=True)
    valid = torch.tensor([[True, True, True, False], [True, True, True, True]])
    expected = 0.0
    for b in range(2):
        n = int(valid[b].sum())
        p, r = teacher[b, :n].softmax(0), student[b, :n].detach().softmax(0)
        expected += float((p * (p / r).log()).sum())
    loss = selector_kl_loss(student, teacher, valid)
    assert loss.item() == pytest.approx(expected / 2, rel=1e-6)
    changed = student.detach().clone()
    changed[0, 3] = 100.0  # an invalid window does not count, whatever its score
    assert selector_kl_loss(changed, teacher, valid).item() == pytest.approx(loss.item(), rel=1e-6)
    assert selector_kl_loss(teacher + 3.0, teacher, valid).item() == pytest.approx(0.0, abs=1e-6)  # shift-invariant
    loss.backward()
    assert student.grad[0, 3] == 0 and student.grad[0, 0] < 0  # the teacher's best valid window pushed up
    none = torch.zeros(1, 4, dtype=torch.bool)  # a document without a valid window adds nothing, no NaN
    assert selector_kl_loss(student.detach()[:1], teacher[:1], none).item() == 0.0


def test_distillation_trains_the_selector_not_the_cross_encoder():
    torch.manual_seed(0)
    model = IDCM(tiny())
    q, d = random_batch()
    selector_distillation_loss(model, q, d, kind="mse").backward()
    assert model.conv.weight.grad is not None
    assert all(p.grad is None or torch.count_nonzero(p.grad) == 0 for p in model.bert.parameters())
    with pytest.raises(ValueError, match="kind must be one of"):
        selector_distillation_loss(model, q, d, kind="hinge")


@pytest.mark.parametrize("kind", ["lambda", "mse", "kl"])
def test_distillation_lowers_the_selector_loss(kind):
    torch.manual_seed(0)
    model = IDCM(tiny())
    q, d = random_batch()
    selector = [model.conv.weight, model.conv.bias, model.kernel_scale, *model.bin_weights.parameters()]
    opt = torch.optim.Adam(selector, lr=1e-2 if kind == "lambda" else 1e-3)
    first = selector_distillation_loss(model, q, d, kind).item()
    before = [p.detach().clone() for p in model.bert.parameters()]
    for _ in range(30):
        opt.zero_grad()
        selector_distillation_loss(model, q, d, kind).backward()
        opt.step()
    assert selector_distillation_loss(model, q, d, kind).item() < 0.7 * first
    assert all(torch.equal(a, b) for a, b in zip(before, model.bert.parameters()))  # the teacher is frozen


def test_selector_mse_loss_is_the_mean_over_valid_windows_only():
    """Windows past a document's end neither add error nor count in the mean, whatever their scores."""
    student = torch.tensor([[1.0, 2.0, 50.0], [0.0, 9.0, 0.0]])
    teacher = torch.tensor([[0.0, 0.0, -7.0], [1.0, 0.0, 3.0]])
    valid = torch.tensor([[True, True, False], [True, False, False]])
    assert selector_mse_loss(student, teacher, valid).item() == pytest.approx((1 + 4 + 1) / 3)


def test_the_teacher_scores_without_dropout_and_the_kind_picks_the_loss():
    """The frozen cross-encoder's window scores are its eval-mode ones (dropout would make the target
    noise), its training mode is restored; each ``kind`` is the loss it names."""
    from dataclasses import replace

    from tests.ckqti.models.test_idcm import TINY_BERT

    torch.manual_seed(0)
    model = IDCM(tiny(bert=replace(TINY_BERT, dropout=0.5)))
    model.train()
    q, d = random_batch()
    first = selector_distillation_loss(model, q, d, kind="mse")
    assert torch.equal(first, selector_distillation_loss(model, q, d, kind="mse")) and model.bert.training
    model.eval()
    with torch.no_grad():
        teacher, student = model.all_window_scores(q, d), model.selector_scores(q, d)
        losses = {"mse": selector_mse_loss(student.scores, teacher.scores, teacher.valid),
                  "kl": selector_kl_loss(student.scores, teacher.scores, teacher.valid),
                  "lambda": selector_lambda_loss(student.scores, teacher.scores, teacher.valid, model.config.sample_n)}
        for kind, expected in losses.items():
            torch.testing.assert_close(selector_distillation_loss(model, q, d, kind), expected)
    assert len({round(v.item(), 6) for v in losses.values()}) == 3


def test_lambda_loss_matches_its_formula_on_a_small_list():
    """NDCG-Loss2 by the docstring's formula, written out: G is normalised by the ideal DCG (gains
    sorted), pairs are ranks of the list sorted by score with a higher gain first."""
    import math

    scores, gains = [0.5, 0.1, 0.9, -0.3], [1.0, 3.0, 2.0, 0.0]
    order = sorted(range(4), key=lambda i: -scores[i])
    max_dcg = sum((2 ** g - 1) / math.log2(2 + r) for r, g in enumerate(sorted(gains, reverse=True)))
    expected = 0.0
    for ri, i in enumerate(order):
        for rj, j in enumerate(order):
            if gains[i] > gains[j]:
                n = abs(ri - rj)
                delta = abs(1 / math.log2(1 + n) - 1 / math.log2(2 + n)) * abs(2 ** gains[i] - 2 ** gains[j]) / max_dcg
                expected -= delta * math.log2(1 / (1 + math.exp(-(scores[i] - scores[j]))))
    valid = torch.ones(1, 4, dtype=torch.bool)
    got = lambda_loss(torch.tensor([scores]), torch.tensor([gains]), valid)
    assert got.item() == pytest.approx(expected, rel=1e-5)


def test_a_short_documents_missing_windows_gain_nothing():
    """A document with fewer valid windows than ``sample_n`` (a short abstract): the teacher's ranks run
    out among its own windows, and the windows it does not have get gain 0, as the docstring says."""
    teacher = torch.tensor([[0.2, 0.8, 5.0, 7.0]])
    valid = torch.tensor([[True, True, False, False]])
    assert teacher_gains(teacher, valid, 3).tolist() == [[2.0, 3.0, 0.0, 0.0]]
