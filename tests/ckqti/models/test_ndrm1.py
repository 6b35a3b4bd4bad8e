"""NDRM1: window masking, the per-dimension embedding mix, the latent gate's open pairs."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from ckqti.models.kernels import ck_mus, rbf_kernels
from ckqti.models.ndrm1 import EmbeddingMix, LatentGate
from ckqti.vocab import Vocabulary
from tests.ckqti.models.ndrm_helpers import model


@torch.no_grad()
def test_all_padding_windows_are_masked_out_of_the_max():
    """With an MLP that rewards empty windows, only the one real window may count."""
    vocab = Vocabulary.build([["alpha", "beta", "gamma", "delta", "eps"]])
    m = model(vocab, "ndrm1").eval()  # windows of 20, stride 10
    first, second = m.pooling.mlp[0], m.pooling.mlp[3]
    first.weight.zero_()
    first.weight[0] = -1.0  # hidden unit 0 = -sum_k log(window_k + 1e-6)
    first.bias.zero_()
    second.weight.zero_()
    second.weight[0, 0] = 1.0
    second.bias.zero_()
    doc = torch.tensor([[2, 3, 4, 5, 6] + [0] * 195])  # 5 real terms, 20 windows of which 19 are all padding
    query = torch.tensor([[4]])
    enc = m.encode_documents(doc)
    cos = enc.vectors[0, :5] @ m.term_vectors(query[0]).t()  # [5, 1]
    sums = rbf_kernels(cos[:, 0], torch.tensor(ck_mus(10)), torch.tensor(0.1)).sum(0)  # [K]
    expected = F.relu(-torch.log(sums + 1e-6).sum())
    empty_window = -10 * math.log(1e-6)  # what an unmasked all-padding window would score
    score = m(query, doc)
    assert score.item() == pytest.approx(expected.item(), rel=1e-5)
    assert score.item() < empty_window - 1.0
    assert m(query, doc[:, :5]).item() == pytest.approx(score.item(), rel=1e-5)


def test_document_mix_weighs_each_dimension_of_each_representation_by_its_own_weight():
    """SPEC's per-dimension mix ``w0[h] emb[h] + w1[h] ctx[h] + b[h]``: the contextual vector has its own
    weights (they start equal to the raw embedding's, 0.5, so only a trained mix tells them apart)."""
    mix = EmbeddingMix(3)
    with torch.no_grad():
        mix.weight.copy_(torch.tensor([[1.0, 2.0, 3.0], [-4.0, 5.0, 0.5]]))
        mix.bias.copy_(torch.tensor([0.1, 0.2, 0.3]))
    emb, ctx = torch.tensor([[1.0, 1.0, 2.0]]), torch.tensor([[2.0, -1.0, 4.0]])
    expected = torch.tensor([[1.0 - 8.0 + 0.1, 2.0 - 5.0 + 0.2, 6.0 + 2.0 + 0.3]])
    torch.testing.assert_close(mix(emb, ctx), expected)


@pytest.mark.parametrize("tau", [0.3, 1.0])
@torch.no_grad()
def test_latent_gate_scores_exactly_the_open_pairs(scifact, tau):
    vocab, q, pos, _ = scifact
    m = model(vocab, "ndrm1", latent_gate=tau).eval()
    dense = model(vocab, "ndrm1").eval()  # same seed: the same weights without the gate
    enc = m.encode_documents(pos)
    terms = torch.arange(2, len(vocab))
    cos = m.term_vectors(terms) @ enc.vectors.transpose(1, 2)  # [B, T, L]
    near = cos.masked_fill(~enc.mask.unsqueeze(1), -2.0).max(-1).values >= tau  # [B, T]
    own = torch.stack([torch.isin(terms, pos[b][pos[b] != 0]) for b in range(pos.shape[0])])  # [B, T]
    open_ = near | own
    assert own.any() and (~open_).any()
    if tau == 1.0:
        assert torch.equal(open_, own)  # only a document's own terms
    else:
        assert (open_ & ~own).any()  # embedding neighbours open too
    scores = m.score_encoded(terms, enc)  # [B, T]
    assert torch.all(scores[~open_] == 0)
    assert torch.all(scores[open_] > 0)
    # an open pair scores softplus of the dense model's score
    ref = F.softplus(dense.score_encoded(terms, dense.encode_documents(pos)))
    assert torch.allclose(scores[open_], ref[open_], atol=1e-5)


def test_latent_gate_opens_a_pair_at_exactly_tau_and_reads_only_real_positions():
    """A pair is open when its best cosine over the document's real terms *reaches* tau (the indexer's
    ``best >= gate``, so ``latent_gate=1.0`` still opens a vector match of cosine 1), or when the term
    occurs in the document; a cosine at a padded position opens nothing."""
    gate = LatentGate(0.5)
    cos = torch.tensor([[[0.5, 0.1, 0.9], [0.49, 0.2, 0.9], [0.0, 0.1, 0.9]]])  # [B=1, Q=3, L=3]
    query = torch.tensor([[7, 8, 9]])
    ids = torch.tensor([[4, 9, 0]])  # term 9 occurs; position 2 is padding
    mask = ids != 0
    assert gate.open_pairs(cos, query, ids, mask).tolist() == [[True, False, True]]
    exact = LatentGate(1.0).open_pairs(torch.ones(1, 1, 2), torch.tensor([[7]]), ids[:, :2], mask[:, :2])
    assert exact.tolist() == [[True]]
