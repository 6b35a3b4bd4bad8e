"""NDRM2: hand-computed scores, length saturation, trained statistics, BatchScale, set_collection."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import numpy as np
import pytest
import torch

from ckqti.models.ndrm import build_ndrm
from ckqti.models.ndrm2 import NDRM2, BatchScale
from ckqti.models.ndrm_config import NDRMConfig
from tests.ckqti.models.ndrm_helpers import _hand_vocab, model, pad


@torch.no_grad()
def test_ndrm2_untrained_equals_hand_computed_value():
    vocab = _hand_vocab()
    x, y, z, v = (vocab.id(t) for t in "xyzv")
    m = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant="ndrm2"), vocab).eval()
    docs = pad([[x, y, x, z], [z, z, z, vocab.id("u"), v]])
    scores = m.term_scores(torch.tensor([[x, z, y], [x, z, y]]), docs)
    idf_x, idf_z = math.log(4.5 / 1.5), math.log(3.5 / 2.5)  # df 1 and 2 of 5; y has df 3 -> idf 0
    expected = [
        [idf_x * 2 / (2 + 4 / 3 + 1e-6), idf_z * 1 / (1 + 4 / 3 + 1e-6), 0.0],
        [0.0, idf_z * 3 / (3 + 5 / 3 + 1e-6), 0.0],
    ]
    assert scores.flatten().tolist() == pytest.approx(sum(expected, []), rel=1e-5)


@torch.no_grad()
def test_a_float64_ndrm2_scores_in_float64():
    """Term counts, document lengths and idf were float32 in a float64 model (scores off by about 1e-7
    relative: tf / 1.3, dl / 3 and log 3 rounded); they follow the model's dtype now."""
    vocab = _hand_vocab()
    x, y, z, v = (vocab.id(t) for t in "xyzv")
    m = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant="ndrm2"), vocab).double().eval()
    m.set_collection(vocab)  # idf again, in the model's dtype
    m.tf_scale.prior.fill_(1.3)  # tf' = tf / 1.3, as a trained model's mean divides it
    docs = pad([[x, y, x, z], [z, z, z, vocab.id("u"), v]])
    scores = m.term_scores(torch.tensor([[x, z, y], [x, z, y]]), docs)
    idf_x, idf_z = math.log(4.5 / 1.5), math.log(3.5 / 2.5)
    expected = [idf_x * (2 / 1.3) / (2 / 1.3 + 4 / 3 + 1e-6), idf_z * (1 / 1.3) / (1 / 1.3 + 4 / 3 + 1e-6), 0.0,
                0.0, idf_z * (3 / 1.3) / (3 / 1.3 + 5 / 3 + 1e-6), 0.0]
    assert scores.dtype == torch.float64
    assert scores.flatten().tolist() == pytest.approx(expected, rel=1e-14, abs=0)


@torch.no_grad()
def test_ndrm2_length_saturation_is_clamped_at_zero():
    """SPEC: ``ReLU(w * dl' + b)``. With ``w < 0`` a long document's ``w * dl' + b`` is negative: the
    ReLU makes it 0, so the score is ``idf * tf' / (tf' + eps)``, not a larger or negative one."""
    vocab = _hand_vocab()
    x, z, v = (vocab.id(t) for t in "xzv")
    m = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant="ndrm2"), vocab).eval()
    m.length_weight.fill_(-0.5)
    m.length_bias.fill_(1.0)
    docs = pad([[x, vocab.id("y"), x, z], [z, z, z, vocab.id("u"), v]])
    scores = m.term_scores(torch.tensor([[x, z], [x, z]]), docs, torch.tensor([4.0, 12.0]))  # dl' = 4/3, 4
    idf_x, idf_z = math.log(4.5 / 1.5), math.log(3.5 / 2.5)
    expected = [
        [idf_x * 2 / (2 + (1.0 - 0.5 * 4 / 3) + 1e-6), idf_z * 1 / (1 + (1.0 - 0.5 * 4 / 3) + 1e-6)],  # > 0: kept
        [0.0, idf_z * 3 / (3 + 0.0 + 1e-6)],  # 1 - 0.5 * 4 < 0 -> 0
    ]
    assert scores.flatten().tolist() == pytest.approx(sum(expected, []), rel=1e-5)


def test_ndrm2_trained_statistics_and_parameters_hand_computed():
    vocab = _hand_vocab()
    x, z, v = (vocab.id(t) for t in "xzv")
    m = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant="ndrm2"), vocab).train()
    doc0, doc2 = [x, vocab.id("y"), x, z], [z, z, z, vocab.id("u"), v]
    m(pad([[x, z], [v]]), pad([doc0, doc2]))  # tf samples 2, 1, 1 -> mean 4/3; dl 4, 5 -> mean 4.5
    with torch.no_grad():
        m.length_weight.fill_(0.5)
        m.length_bias.fill_(0.25)
    m.eval()
    score = m.term_scores(torch.tensor([[x]]), pad([doc0])).item()
    tf, dl = 2 / (4 / 3), 4 / 4.5
    assert score == pytest.approx(math.log(3) * tf / (tf + max(0.5 * dl + 0.25, 0) + 1e-6), rel=1e-5)


@torch.no_grad()
def test_ndrm2_is_zero_when_term_absent(scifact):
    vocab, q, pos, _ = scifact
    m = model(vocab, "ndrm2").eval()
    m.length_weight.fill_(-0.3)
    m.length_bias.fill_(0.7)
    enc = m.encode_documents(pos)
    scores = m.score_encoded(torch.arange(len(vocab)), enc)  # [B, V]
    present = torch.zeros_like(scores, dtype=torch.bool)
    present.scatter_(1, pos, True)
    assert torch.all(scores[~present] == 0)
    assert torch.all(scores[present & (torch.as_tensor(vocab.idf()) > 0)] > 0)


def test_batch_scale_running_mean_is_exact():
    rng = random.Random(0)
    scale = BatchScale(prior=7.0).eval()
    assert scale(torch.tensor([14.0])).item() == 2.0  # prior before any sample
    scale.train()
    seen = []
    for _ in range(6):
        x = torch.tensor([rng.uniform(0, 30) for _ in range(11)], dtype=torch.float32)
        mask = torch.tensor([rng.random() < 0.6 for _ in range(11)])
        out = scale(x, mask)
        seen.extend(x[mask].double().tolist())
        assert torch.allclose(out, x / float(np.mean(seen)))
    assert scale.mean.item() == pytest.approx(float(np.mean(seen)), rel=1e-12)
    scale.eval()
    scale(torch.full((5,), 1000.0))
    assert scale.mean.item() == pytest.approx(float(np.mean(seen)), rel=1e-12)  # frozen at inference
    restored = BatchScale()
    restored.load_state_dict(scale.state_dict())
    assert restored.mean.item() == scale.mean.item()


def test_set_collection_checks_vocabulary_size():
    vocab = _hand_vocab()
    m = NDRM2(NDRMConfig(vocab_size=len(vocab) + 3, variant="ndrm2"))
    with pytest.raises(ValueError):
        m.set_collection(vocab)
    m = build_ndrm(replace(m.config, vocab_size=len(vocab)), vocab)
    assert m.idf.tolist() == pytest.approx(vocab.idf().tolist())
    assert m.length_scale.mean.item() == pytest.approx(3.0)
