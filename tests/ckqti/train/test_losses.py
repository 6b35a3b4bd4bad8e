import math

import torch

from ckqti.train.losses import listwise_loss, ranknet_loss


def test_matches_the_pairwise_formula():
    scores = torch.tensor([[3.0, 1.0, 0.0, -1.0]])
    labels = torch.tensor([[2, 1, 0, 0]])
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3)]
    expected = sum(math.log1p(math.exp(-(scores[0, i] - scores[0, j]).item())) for i, j in pairs) / len(pairs)
    assert math.isclose(ranknet_loss(scores, labels).item(), expected, rel_tol=1e-6)


def test_ties_cost_log_two_and_wide_margins_cost_nothing():
    labels = torch.tensor([[1, 0, 0, 0]])
    assert math.isclose(ranknet_loss(torch.zeros(1, 4), labels).item(), math.log(2), rel_tol=1e-6)
    assert ranknet_loss(torch.tensor([[50.0, 0.0, 0.0, 0.0]]), labels).item() < 1e-12


def test_invalid_documents_leave_every_pair():
    scores = torch.tensor([[1.0, 2.0, -9.0]])
    labels = torch.tensor([[1, 0, 0]])
    only_first_pair = ranknet_loss(scores, labels, torch.tensor([[True, True, False]]))
    assert math.isclose(only_first_pair.item(), math.log1p(math.exp(1.0)), rel_tol=1e-6)


def test_gradient_raises_the_better_document():
    scores = torch.zeros(2, 4, requires_grad=True)
    labels = torch.tensor([[2, 1, 0, 0], [1, 0, 0, 0]])
    ranknet_loss(scores, labels).backward()
    assert scores.grad[0, 0] < 0 and scores.grad[1, 0] < 0  # gradient descent raises them
    assert scores.grad[0, 3] > 0 and scores.grad[1, 3] > 0


def test_no_pairs_gives_a_zero_with_a_graph():
    scores = torch.ones(1, 3, requires_grad=True)
    loss = ranknet_loss(scores, torch.zeros(1, 3, dtype=torch.long))
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(scores.grad, torch.zeros(1, 3))


def test_listwise_loss_is_the_relevant_documents_softmax_cross_entropy():
    scores = torch.tensor([[2.0, 1.0, 0.5, -1.0, 0.0], [0.3, 0.2, 0.1, 0.0, -0.1]], requires_grad=True)
    labels = torch.tensor([[2, 1, 1, 0, 0], [1, 1, 0, 0, 0]])  # the second row has no single best document
    loss = listwise_loss(scores, labels)
    expected = -torch.log_softmax(scores[0].detach(), -1)[0].item()
    assert math.isclose(loss.item(), expected, rel_tol=1e-6)
    loss.backward()
    assert scores.grad[0, 0] < 0 and (scores.grad[0, 1:] > 0).all()  # descent raises the relevant document
    assert (scores.grad[1] == 0).all()
    assert listwise_loss(torch.zeros(1, 3, requires_grad=True), torch.tensor([[1, 1, 1]])).item() == 0.0


def test_listwise_and_distillation_losses_are_means_over_rows():
    """A batch's loss is the mean of its rows' (a sum would scale the step with the batch size)."""
    from ckqti.train.losses import distill_loss

    scores = torch.tensor([[2.0, 1.0, 0.0, -1.0], [0.0, 3.0, 1.0, 0.5]])
    labels = torch.tensor([[2, 1, 0, 0], [1, 0, 0, 0]])
    rows = [-torch.log_softmax(scores[0], -1)[0].item(), -torch.log_softmax(scores[1], -1)[0].item()]
    assert math.isclose(listwise_loss(scores, labels).item(), sum(rows) / 2, rel_tol=1e-6)
    teacher = torch.tensor([[1.0, 0.0, 0.0, 2.0], [0.0, 0.0, 5.0, 1.0]])
    rows = [-(torch.softmax(teacher[i], -1) * torch.log_softmax(scores[i], -1)).sum().item() for i in range(2)]
    assert math.isclose(distill_loss(scores, teacher).item(), sum(rows) / 2, rel_tol=1e-6)


def test_listwise_rows_below_the_relevant_label_add_nothing():
    scores = torch.tensor([[2.0, 1.0, 0.0, -1.0], [0.0, 3.0, 1.0, 0.5]], requires_grad=True)
    labels = torch.tensor([[2, 1, 0, 0], [1, 0, 0, 0]])  # the second row has no relevant document (label 2)
    loss = listwise_loss(scores, labels, relevant=2)
    assert math.isclose(loss.item(), -torch.log_softmax(scores[0].detach(), -1)[0].item(), rel_tol=1e-6)
    loss.backward()
    assert (scores.grad[1] == 0).all()
    assert listwise_loss(scores, labels[1:2].expand(2, -1), relevant=2).item() == 0.0
