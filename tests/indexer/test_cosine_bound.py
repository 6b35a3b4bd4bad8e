"""The projection-bound threshold search answers exactly as the plain product does."""

from __future__ import annotations

import pytest
import torch

from indexer import cosine_bound
from indexer.cosine_bound import WATCH_DOCS, ThresholdCosines


def unit(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.normalize(x, dim=-1)


def clustered(n: int, dim: int, rank: int, gen: torch.Generator) -> torch.Tensor:
    """Unit vectors mostly inside a ``rank``-dimensional subspace (trained vectors are far from isotropic)."""
    basis = torch.linalg.qr(torch.randn(dim, dim, generator=gen))[0][:, :rank]
    return unit(torch.randn(n, rank, generator=gen) @ basis.T + 0.15 * torch.randn(n, dim, generator=gen))


def test_reaching_equals_the_plain_product_and_prunes_structured_vectors():
    gen = torch.Generator().manual_seed(0)
    terms = clustered(3000, 64, 12, gen)
    search = ThresholdCosines(terms)
    assert search.projection is not None and search.projection.shape == (64, 32)
    for threshold in (0.3, 0.6, 0.9):
        for n in (1, 7, 40):
            docs = clustered(n, 64, 12, gen)
            want = search.plain_max(docs) >= threshold
            assert torch.equal(search.reaching(docs, threshold), want)
    assert 0 < search.checked < 0.25 * search.seen  # most terms ruled out by the bound alone
    assert search.projection is not None  # so the bound stays in use


def test_a_vector_exactly_at_the_threshold_is_kept():
    gen = torch.Generator().manual_seed(1)
    terms = clustered(500, 32, 6, gen)
    search = ThresholdCosines(terms)
    doc = terms[17:18].clone()
    cos = (doc @ terms.T).squeeze(0)
    threshold = float(cos.sort().values[-5])  # five terms reach it, one of them exactly
    got = search.reaching(doc, threshold)
    assert torch.equal(got, cos >= threshold) and int(got.sum()) >= 5


def test_isotropic_vectors_fall_back_to_the_plain_product_with_the_same_answers():
    gen = torch.Generator().manual_seed(2)
    terms = unit(torch.randn(2000, 64, generator=gen))
    search = ThresholdCosines(terms)
    for _ in range(WATCH_DOCS + 5):
        docs = unit(torch.randn(30, 64, generator=gen))
        assert torch.equal(search.reaching(docs, 0.2), search.plain_max(docs) >= 0.2)
    assert search.projection is None  # the bound checked too much of the vocabulary to pay


def test_no_document_vectors_open_nothing_and_rank_zero_is_plain():
    terms = unit(torch.randn(100, 16, generator=torch.Generator().manual_seed(3)))
    assert not ThresholdCosines(terms).reaching(torch.zeros(0, 16), 0.5).any()
    assert ThresholdCosines(terms, rank=0).projection is None


@pytest.mark.parametrize("rows", [1024, 80, 1])
def test_a_padded_batch_answers_as_each_document_alone(rows, monkeypatch):
    """``reaching_batch`` bounds a padded batch's documents together (all five, two at a time, one
    at a time); each document's answer is ``reaching``'s on its real rows, an empty document's
    and a short one's among them."""
    monkeypatch.setattr(cosine_bound, "BOUND_ROWS", rows)
    gen = torch.Generator().manual_seed(4)
    terms = clustered(3000, 64, 12, gen)
    lengths = [40, 0, 3, 25, 1]
    vectors = torch.zeros(len(lengths), max(lengths), 64)  # padding rows are zero, as an encoder leaves them
    mask = torch.zeros(len(lengths), max(lengths), dtype=torch.bool)
    for b, n in enumerate(lengths):
        vectors[b, :n], mask[b, :n] = clustered(n, 64, 12, gen), True
    for threshold in (0.3, 0.6, 0.9):
        batch, alone = ThresholdCosines(terms), ThresholdCosines(terms)
        got = batch.reaching_batch(vectors, mask, threshold)
        assert len(got) == len(lengths)
        for b, n in enumerate(lengths):
            assert torch.equal(got[b], alone.reaching(vectors[b, :n], threshold))
            assert torch.equal(got[b], alone.plain_max(vectors[b, :n]) >= threshold)
        assert (batch.checked, batch.seen) == (alone.checked, alone.seen)


def test_a_batch_goes_plain_where_the_watch_drops_the_bound():
    gen = torch.Generator().manual_seed(5)
    terms = unit(torch.randn(2000, 64, generator=gen))
    search = ThresholdCosines(terms)
    vectors = unit(torch.randn(WATCH_DOCS + 5, 30, 64, generator=gen))
    mask = torch.ones(vectors.shape[:2], dtype=torch.bool)
    got = search.reaching_batch(vectors, mask, 0.2)
    assert search.projection is None and search.docs == WATCH_DOCS  # dropped mid-batch, the rest plain
    for b in range(vectors.shape[0]):
        assert torch.equal(got[b], search.plain_max(vectors[b]) >= 0.2)


def test_a_document_without_vectors_opens_nothing_at_any_threshold():
    """Every cosine is at least -1: an empty document reaches no threshold, even one of 0 or below."""
    terms = unit(torch.randn(100, 16, generator=torch.Generator().manual_seed(6)))
    for threshold in (0.0, -1.0):
        assert not ThresholdCosines(terms).reaching(torch.zeros(0, 16), threshold).any()
        assert not ThresholdCosines(terms, rank=0).reaching(torch.zeros(0, 16), threshold).any()
        empty = ThresholdCosines(terms).reaching_batch(torch.zeros(1, 3, 16), torch.zeros(1, 3, dtype=torch.bool), threshold)
        assert not empty[0].any()


def test_a_term_whose_bound_is_barely_above_the_threshold_is_still_checked():
    """Terms inside the kept principal directions have no residual: their bound is their cosine, up to
    float rounding, so a term a hair (1e-6, well over rounding) above the threshold has a bound just over
    it too; the slack below the threshold keeps it checked, and found."""
    gen = torch.Generator().manual_seed(7)
    basis = torch.linalg.qr(torch.randn(32, 32, generator=gen))[0][:, :8]
    terms = unit(torch.randn(500, 8, generator=gen) @ basis.T)  # [500, 32] inside an 8-dimensional subspace
    search = ThresholdCosines(terms, rank=8)
    for row in (3, 17, 111):
        doc = terms[row: row + 1].clone()
        cos = (doc @ terms.T).squeeze(0)
        for k in (2, 5, 20):
            threshold = float(cos.sort().values[-k]) - 1e-6
            assert torch.equal(search.reaching(doc, threshold), cos >= threshold)
            assert int(search.reaching(doc, threshold).sum()) >= k
