"""Impact channels: ``score_encoded == sum_c weight_c(t) * channel_scores[..., c]`` for NDRM1-3."""

from __future__ import annotations

import pytest
import torch

from ckqti.models.ndrm import NDRMConfig, build_ndrm
from ckqti.models.qti import CHANNEL_WEIGHTS, QTIModel
from ckqti.vocab import Vocabulary
from indexer import format as index_format


def tiny(vocab_size: int, variant: str) -> NDRMConfig:
    return NDRMConfig(vocab_size=vocab_size, variant=variant, dim=16, num_heads=4, conv_window=5, ff_dim=16,
                      mlp_hidden=16, pool_window=20, pool_stride=10, score_chunk_elements=20_000)


@pytest.fixture(scope="module")
def corpus():
    """40 random documents over 60 words (Zipf-like), so idf varies and some idf are 0."""
    g = torch.Generator().manual_seed(0)
    words = [f"w{i}" for i in range(60)]
    p = 1.0 / torch.arange(1, 61, dtype=torch.float64)
    docs = [[words[j] for j in torch.multinomial(p, int(n), replacement=True, generator=g)]
            for n in torch.randint(5, 50, (40,), generator=g)]
    vocab = Vocabulary.build(docs)
    ids = torch.zeros(8, 50, dtype=torch.long)
    for b, d in enumerate(docs[:8]):
        ids[b, : len(d)] = torch.tensor(vocab.ids(d))
    return vocab, ids


def model(vocab: Vocabulary, variant: str, seed: int = 0):
    torch.manual_seed(seed)
    m = build_ndrm(tiny(len(vocab), variant), vocab)
    with torch.no_grad():
        if variant in ("ndrm2", "ndrm3"):  # move the learned length normalisation off its init
            explicit = m if variant == "ndrm2" else m.explicit
            explicit.length_weight.fill_(0.7)
            explicit.length_bias.fill_(0.3)
        if variant == "ndrm3":  # trained-looking BatchNorm statistics and combination weights
            m.combine.norm.running_mean.copy_(torch.tensor([0.4, 1.3]))
            m.combine.norm.running_var.copy_(torch.tensor([2.0, 0.6]))
            m.combine.norm.weight.copy_(torch.tensor([1.5, 0.8]))
            m.combine.norm.bias.copy_(torch.tensor([-0.2, 0.1]))
            m.combine.linear.weight.copy_(torch.tensor([[0.9, 1.1]]))
            m.combine.linear.bias.fill_(0.05)
    return m.eval()


@pytest.mark.parametrize("variant,channels", [("ndrm1", ("one",)), ("ndrm2", ("idf",)), ("ndrm3", ("one", "idf"))])
@torch.no_grad()
def test_channels_recombine_into_the_score(corpus, variant, channels):
    vocab, ids = corpus
    m = model(vocab, variant)
    assert isinstance(m, QTIModel) and m.impact_channels == channels
    terms = torch.arange(len(vocab))  # includes padding (0) and unknown (1): they score 0
    enc = m.encode_documents(ids)
    scores = m.score_encoded(terms, enc)  # [B, T]
    ch = m.channel_scores(terms, enc)  # [B, T, C]
    assert ch.shape == (ids.shape[0], len(vocab), len(channels))
    idf = torch.as_tensor(vocab.idf(), dtype=torch.float32)
    weight = torch.stack([idf if c == "idf" else torch.ones_like(idf) for c in channels], dim=-1)  # [T, C]
    assert torch.allclose((ch * weight).sum(-1), scores, atol=1e-5, rtol=1e-5)
    assert torch.all(ch[:, :2] == 0)
    if "idf" in channels:
        g = ch[..., channels.index("idf")]
        assert torch.all(g >= 0)
        present = torch.zeros_like(g, dtype=torch.bool)
        for b in range(ids.shape[0]):
            present[b, ids[b][ids[b] > 1]] = True
        assert torch.all(g[~present] == 0) and torch.all(g[present] > 0)  # exact match only
        assert (g[present][idf.expand_as(g)[present] == 0]).numel() > 0  # terms with idf 0 keep a channel value


def test_ndrm3_combination_is_its_eval_mode_combiner():
    vocab = Vocabulary.build([["a", "b"], ["b", "c"]])
    m = model(vocab, "ndrm3")
    a, b, c = m.combination()
    x = torch.tensor([[0.3, 2.0], [-1.0, 0.5], [4.0, 0.0]])
    with torch.no_grad():
        want = m.combine.linear(m.combine.norm(x)).squeeze(-1)
    assert torch.allclose(a * x[:, 0] + b * x[:, 1] + c, want, atol=1e-6)


def test_negative_explicit_weight_and_training_mode_are_refused(corpus):
    vocab, ids = corpus
    m = model(vocab, "ndrm3")
    with torch.no_grad():
        m.combine.linear.weight[0, 1] = -0.5
    with pytest.raises(ValueError, match="negatively"):
        m.channel_scores(torch.arange(2, 5), m.encode_documents(ids))
    for variant in ("ndrm1", "ndrm2", "ndrm3"):
        with pytest.raises(RuntimeError, match="eval mode"):
            model(vocab, variant).train().channel_scores(torch.arange(2, 5), m.encode_documents(ids))


@torch.no_grad()
def test_index_constants_round_trip(corpus):
    vocab, ids = corpus
    for variant in ("ndrm2", "ndrm3"):
        m = model(vocab, variant)
        assert m.index_constants() == {"length_prior": pytest.approx(vocab.mean_doc_length)}
        other = model(vocab, variant, seed=0)
        other.set_index_constants({"length_prior": 3.0})
        terms = torch.arange(2, len(vocab))
        assert not torch.allclose(other.score_encoded(terms, other.encode_documents(ids)),
                                  m.score_encoded(terms, m.encode_documents(ids)))
        other.set_index_constants(m.index_constants())
        assert torch.allclose(other.score_encoded(terms, other.encode_documents(ids)),
                              m.score_encoded(terms, m.encode_documents(ids)))
        with pytest.raises(ValueError):
            m.set_index_constants({"colour": 1.0})
    assert model(vocab, "ndrm1").index_constants() == {}


def test_a_trained_length_mean_records_no_prior(corpus):
    """Once training samples set the length mean, the prior no longer counts: an index of the
    trained model records no length_prior (it read as if it mattered), a fixed BM25 channel does."""
    vocab, ids = corpus
    m = model(vocab, "ndrm2")
    m.train().length_scale(torch.tensor([10.0, 30.0]))  # a training batch's lengths
    assert m.eval().index_constants() == {}
    fixed = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant="ndrm2", bm25_init=(0.9, 0.4), explicit_fixed=True),
                       vocab)
    fixed.train().length_scale(torch.tensor([10.0, 30.0]))
    assert fixed.eval().index_constants() == {"length_prior": pytest.approx(vocab.mean_doc_length)}


def test_channel_weight_names_agree_with_the_index_format():
    assert CHANNEL_WEIGHTS == index_format.CHANNEL_WEIGHTS
