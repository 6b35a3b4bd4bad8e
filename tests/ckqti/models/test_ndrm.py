"""The NDRM family built by build_ndrm, across its variants: padding, gradients and training, the frozen-weights block, the gated latent channel's QTI behaviour, the BM25 start of the explicit channel."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ckqti.models.ndrm import build_ndrm
from tests.ckqti.models.ndrm_helpers import VARIANTS, _hand_vocab, model, pad, tiny


@pytest.mark.parametrize("variant", VARIANTS)
@torch.no_grad()
def test_padding_invariance(scifact, variant):
    vocab, q, pos, _ = scifact
    m = model(vocab, variant).eval()
    base = m.term_scores(q, pos)
    padded = m.term_scores(F.pad(q, (0, 7)), F.pad(pos, (0, 95)))
    assert torch.allclose(padded[:, : q.shape[1]], base, atol=1e-5)
    assert torch.all(padded[:, q.shape[1] :] == 0)
    # one document scored alone (no padding at all) equals its score inside the batch
    n = int((pos[3] != 0).sum())
    alone = m.term_scores(q[3:4], pos[3:4, :n])
    assert torch.allclose(alone[0], base[3], atol=1e-5)


@pytest.mark.parametrize("variant", ["ndrm2", "ndrm3"])
def test_padding_does_not_change_training_statistics(scifact, variant):
    vocab, q, pos, _ = scifact
    stats = []
    for extra_q, extra_d in ((0, 0), (5, 50)):
        m = model(vocab, variant, dropout=0.0).train()
        m(F.pad(q, (0, extra_q)), F.pad(pos, (0, extra_d)))
        stats.append({k: v.clone() for k, v in m.state_dict().items() if "scale" in k or "running" in k})
    assert stats[0].keys() == stats[1].keys() and stats[0]
    for k in stats[0]:
        assert torch.allclose(stats[0][k].double(), stats[1][k].double()), k


@pytest.mark.parametrize("variant", VARIANTS)
def test_gradients_reach_every_parameter(scifact, variant):
    vocab, q, pos, neg = scifact
    m = model(vocab, variant, dropout=0.1).train()
    scores = m(torch.cat([q, q]), torch.cat([pos, neg]))
    loss = ((scores - torch.tensor([1.0, 0.0]).repeat_interleave(8)) ** 2).mean()  # pointwise: biases get gradients
    loss.backward()
    for name, p in m.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    if variant == "ndrm2":
        assert sum(p.numel() for p in m.parameters()) == 2


@pytest.mark.parametrize("variant", VARIANTS)
def test_adam_steps_lower_ranknet_loss(scifact, variant):
    vocab, q, pos, neg = scifact
    m = model(vocab, variant, dropout=0.0).train()
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    losses = []
    for _ in range(25):
        opt.zero_grad()
        s_pos, s_neg = m(torch.cat([q, q]), torch.cat([pos, neg])).chunk(2)  # one call: NDRM3's BatchNorm sees both
        loss = F.softplus(s_neg - s_pos).mean()  # RankNet: -log sigmoid(s_pos - s_neg)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    factor = 0.98 if variant == "ndrm2" else 0.5
    assert losses[-1] < factor * losses[0], losses


@torch.no_grad()
@pytest.mark.parametrize("variant", ["ndrm2", "ndrm3"])
def test_bm25_init_starts_the_explicit_channel_as_bm25_with_those_parameters(variant):
    vocab = _hand_vocab()
    x, y, z, v = (vocab.id(t) for t in "xyzv")
    m = build_ndrm(tiny(len(vocab), variant, bm25_init=(0.9, 0.4)), vocab).eval()
    ndrm2 = m if variant == "ndrm2" else m.explicit
    assert (ndrm2.length_weight.item(), ndrm2.length_bias.item()) == pytest.approx((0.36, 0.54))
    docs = pad([[x, y, x, z], [z, z, z, vocab.id("u"), v]])
    scores = ndrm2.term_scores(torch.tensor([[x, z, y], [x, z, y]]), docs)

    def bm25(idf, tf, dl, k1=0.9, b=0.4, avgdl=3.0):  # without the constant k1 + 1
        return idf * tf / (tf + k1 * (1 - b + b * dl / avgdl) + 1e-6)

    idf_x, idf_z = math.log(4.5 / 1.5), math.log(3.5 / 2.5)
    expected = [bm25(idf_x, 2, 4), bm25(idf_z, 1, 4), 0.0, 0.0, bm25(idf_z, 3, 5), 0.0]
    assert scores.flatten().tolist() == pytest.approx(expected, rel=1e-5)
    paper = build_ndrm(tiny(len(vocab), variant), vocab).eval()  # the default stays the paper's w = 1, b = 0
    paper2 = paper if variant == "ndrm2" else paper.explicit
    assert (paper2.length_weight.item(), paper2.length_bias.item()) == (1.0, 0.0)


@pytest.mark.parametrize("variant", ["ndrm1", "ndrm3"])
@torch.no_grad()
def test_frozen_weights_read_the_term_table_and_hold_only_inside_the_block(scifact, variant):
    """Indexing scores every document inside ``frozen_weights(table)``: query vectors are the rows of
    the table (every term's vector, computed once), equal to the model's own for any terms, and NDRM3's
    combination is the one of the block's start; outside it, both follow the weights again."""
    vocab, _, pos, _ = scifact
    m = model(vocab, variant).eval()
    docs = m.encode_documents(pos)
    table = m.term_vectors(torch.arange(len(vocab)))  # [V, D]
    terms = torch.from_numpy(np.random.default_rng(0).permutation(np.arange(2, len(vocab)))[:40])
    before = m.channel_scores(terms, docs)
    with m.frozen_weights(table):
        assert torch.equal(m.term_vectors(terms), table[terms])
        assert torch.equal(m.term_vectors(terms[None]), table[terms][None])  # [1, T] query rows
        torch.testing.assert_close(m.channel_scores(terms, docs), before, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(m.term_vectors(terms), table[terms], rtol=1e-5, atol=1e-6)  # the model's own
    shifted = table.roll(1, 0)  # another table: read as given, not recomputed
    with m.frozen_weights(shifted):
        assert torch.equal(m.term_vectors(terms), shifted[terms])
        if variant == "ndrm3":  # the combination is fixed at the block's start
            m.combine.linear.bias += 1.0
            frozen = m.channel_scores(terms, docs)
    latent = m if variant == "ndrm1" else m.latent
    latent.query_proj.weight.mul_(2.0)
    assert not torch.allclose(m.term_vectors(terms), table[terms])  # after the block: the weights again
    if variant == "ndrm3":
        assert not torch.allclose(m.channel_scores(terms, docs)[..., 0], frozen[..., 0])
    with pytest.raises(KeyError), m.frozen_weights(table):
        raise KeyError("x")
    assert not torch.allclose(m.term_vectors(terms), table[terms])  # restored after an error too


@pytest.mark.parametrize("variant", ["ndrm1", "ndrm3"])
@torch.no_grad()
def test_latent_gate_keeps_qti_additivity_and_padding_invariance(scifact, variant):
    vocab, q, pos, _ = scifact
    m = model(vocab, variant, latent_gate=0.5, score_chunk_elements=50_000).eval()
    total = m(q, pos)
    singles = torch.stack([m(q[:, i : i + 1], pos) for i in range(q.shape[1])], dim=1)  # [B, Q]
    assert torch.allclose(total, singles.sum(1), atol=1e-4)
    encoded = m.score_encoded(torch.arange(len(vocab)), m.encode_documents(pos))  # [B, V]
    assert torch.allclose(encoded.gather(1, q) * (q > 1), singles, atol=1e-5)
    padded = m.term_scores(F.pad(q, (0, 7)), F.pad(pos, (0, 95)))
    assert torch.allclose(padded[:, : q.shape[1]], m.term_scores(q, pos), atol=1e-5)


@pytest.mark.parametrize("variant", ["ndrm1", "ndrm3"])
def test_latent_gate_passes_gradients_and_trains(scifact, variant):
    vocab, q, pos, neg = scifact
    m = model(vocab, variant, latent_gate=0.3, dropout=0.0).train()
    scores = m(torch.cat([q, q]), torch.cat([pos, neg]))
    ((scores - torch.tensor([1.0, 0.0]).repeat_interleave(8)) ** 2).mean().backward()
    for name, p in m.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    m.zero_grad()
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    losses = []
    for _ in range(25):
        opt.zero_grad()
        s_pos, s_neg = m(torch.cat([q, q]), torch.cat([pos, neg])).chunk(2)
        loss = F.softplus(s_neg - s_pos).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses
