"""NDRM3: a fixed explicit channel, frozen embeddings, a gated model's closed-pair constant."""

from __future__ import annotations

import json
import math

import pytest
import torch

from ckqti.models.ndrm import build_ndrm
from ckqti.models.ndrm_config import NDRMConfig
from ckqti.vocab import Vocabulary
from tests.ckqti.models.ndrm_helpers import _hand_vocab, model, pad, tiny


def test_fixed_explicit_channel_stays_bm25_through_training_and_on_a_new_collection():
    vocab = _hand_vocab()
    x, y, z, v = (vocab.id(t) for t in "xyzv")
    m = build_ndrm(tiny(len(vocab), "ndrm3", bm25_init=(0.9, 0.4), explicit_fixed=True), vocab).train()
    assert not m.explicit.length_weight.requires_grad and not m.explicit.length_bias.requires_grad
    opt = torch.optim.Adam([p for p in m.parameters() if p.requires_grad], lr=1e-2)
    latent_before = [p.detach().clone() for p in m.latent.parameters()]
    for _ in range(3):
        opt.zero_grad()
        m(pad([[x, z], [v, y]]), pad([[x, y, x, z], [z, z, z, vocab.id("u"), v]])).sum().backward()
        opt.step()
    assert any(not torch.equal(a, b) for a, b in zip(m.latent.parameters(), latent_before))  # the latent trains
    assert (m.explicit.length_weight.item(), m.explicit.length_bias.item()) == pytest.approx((0.36, 0.54))
    assert m.explicit.tf_scale.count.item() == 0 and m.explicit.length_scale.count.item() == 0
    # another collection: the channel is BM25 (k1 0.9, b 0.4) with that collection's idf and avgdl
    other = Vocabulary.build([d.split() for d in ["x x y", "z", "w w", "u v"]])  # N = 4, avgdl = 2
    m.set_collection(other)
    m.eval()
    ox = other.id("x")
    with torch.no_grad():
        score = m.explicit.term_scores(torch.tensor([[ox]]), pad([[ox, ox, other.id("y")]])).item()
    assert len(other) == len(vocab) and other.mean_doc_length == 2
    assert score == pytest.approx(math.log(3.5 / 1.5) * 2 / (2 + 0.9 * (1 - 0.4 + 0.4 * 3 / 2) + 1e-6), rel=1e-5)


def test_frozen_embeddings_keep_their_rows_while_the_rest_trains():
    from ckqti.train.ndrm_start import parameter_groups

    vocab = _hand_vocab()
    x, y, z, v = (vocab.id(t) for t in "xyzv")
    config = tiny(len(vocab), "ndrm3", train_embeddings=False)
    assert NDRMConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    m = build_ndrm(config, vocab).train()
    rows = m.latent.embedding.weight.detach().clone()
    others = {n: p.detach().clone() for n, p in m.named_parameters() if "embedding" not in n}
    opt = torch.optim.Adam(parameter_groups(m, 1e-2, 1e-2))
    for _ in range(3):
        opt.zero_grad()
        m(pad([[x, z], [v, y]]), pad([[x, y, x, z], [z, z, z, vocab.id("u"), v]])).sum().backward()
        opt.step()
    assert torch.equal(m.latent.embedding.weight, rows) and m.latent.embedding.weight.grad is None
    assert any(not torch.equal(p, others[n]) for n, p in m.named_parameters() if n in others)
    trainable = build_ndrm(tiny(len(vocab), "ndrm3"), vocab)  # the default trains them
    assert trainable.latent.embedding.weight.requires_grad


@torch.no_grad()
def test_gated_ndrm3_closed_pairs_score_its_constant(scifact):
    vocab, q, pos, _ = scifact
    m = model(vocab, "ndrm3", latent_gate=1.0).eval()
    m.combine.linear.weight.copy_(torch.tensor([[0.5, 1.0]]))
    a, b, c = m.combination()
    enc = m.encode_documents(pos)
    terms = torch.arange(2, len(vocab))
    channels = m.channel_scores(terms, enc)  # [B, T, 2]
    own = torch.stack([torch.isin(terms, pos[b][pos[b] != 0]) for b in range(pos.shape[0])])  # [B, T]
    assert torch.allclose(channels[..., 0][~own], torch.full_like(channels[..., 0][~own], m.closed_pair_score()))
    assert m.closed_pair_score() == pytest.approx(c)
    assert torch.all(channels[..., 0][own] > c)  # a > 0: an open pair scores above the closed ones
    assert torch.all(channels[..., 1][~own] == 0)
