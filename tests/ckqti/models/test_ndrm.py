import json
import math
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ckqti.models.kernels import ck_mus, rbf_kernels
from ckqti.models.ndrm import build_ndrm
from ckqti.models.ndrm1 import EmbeddingMix, LatentGate
from ckqti.models.ndrm2 import NDRM2, BatchScale
from ckqti.models.ndrm_config import NDRMConfig
from ckqti.models.qti import DocumentEncoding, QTIModel
from ckqti.text import Analyzer
from ckqti.vocab import Vocabulary

SCIFACT = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "scifact"
VARIANTS = ("ndrm1", "ndrm2", "ndrm3")


def tiny(vocab_size: int, variant: str, **kw) -> NDRMConfig:
    base = dict(dim=16, num_heads=4, conv_window=5, ff_dim=16, mlp_hidden=16, pool_window=20, pool_stride=10)
    return NDRMConfig(vocab_size=vocab_size, variant=variant, **{**base, **kw})


def pad(rows: list[list[int]], width: int | None = None) -> torch.Tensor:
    width = width or max(len(r) for r in rows)
    return torch.tensor([r + [0] * (width - len(r)) for r in rows], dtype=torch.long)


@pytest.fixture(scope="module")
def scifact():
    """8 SciFact train claims, each with one relevant abstract and one other abstract (60 terms max)."""
    qrels = [line.split("\t") for line in (SCIFACT / "qrels" / "train.tsv").read_text().splitlines()[1:]]
    pairs = [(q, d) for q, d, _ in qrels][:8]
    queries = {}
    for line in (SCIFACT / "queries.jsonl").open():
        row = json.loads(line)
        queries[row["_id"]] = row["text"]
    docs = {}
    for line in (SCIFACT / "corpus.jsonl").open():
        row = json.loads(line)
        docs[row["_id"]] = row["title"] + " " + row["text"]
        if len(docs) >= 400:
            break
    analyzer = Analyzer()
    relevant = {d for _, d in pairs}
    others = [d for d in docs if d not in relevant][:8]
    for _, d in pairs:  # relevant abstracts may lie beyond the first 400 lines
        docs.setdefault(d, None)
    if any(v is None for v in docs.values()):
        for line in (SCIFACT / "corpus.jsonl").open():
            row = json.loads(line)
            if docs.get(row["_id"], "") is None:
                docs[row["_id"]] = row["title"] + " " + row["text"]
    analyzed = {d: analyzer(docs[d])[:60] for d in list(relevant) + others}
    vocab = Vocabulary.build(analyzed.values())
    q = pad([vocab.ids(analyzer(queries[qid]))[:10] for qid, _ in pairs])
    pos = pad([vocab.ids(analyzed[d]) for _, d in pairs])
    neg = pad([vocab.ids(analyzed[d]) for d in others])
    return vocab, q, pos, neg


def model(vocab: Vocabulary, variant: str, seed: int = 0, **kw):
    torch.manual_seed(seed)
    return build_ndrm(tiny(len(vocab), variant, **kw), vocab)


def test_config_validation_and_round_trip():
    config = NDRMConfig(vocab_size=100)
    assert config.variant == "ndrm3" and config.dim == 256 and config.num_kernels == 10
    assert (config.pool_window, config.pool_stride, config.num_layers, config.num_heads) == (300, 100, 2, 32)
    assert NDRMConfig.from_dict(config.to_dict()) == config
    for bad in (dict(variant="ndrm4"), dict(vocab_size=1), dict(dim=30), dict(pool_stride=400), dict(attention="x")):
        with pytest.raises(ValueError):
            NDRMConfig(**{"vocab_size": 100, **bad})
    with pytest.raises(ValueError):
        NDRMConfig.from_dict({**config.to_dict(), "colour": "red"})


@pytest.mark.parametrize("variant", VARIANTS)
def test_shapes_and_interface(scifact, variant):
    vocab, q, pos, _ = scifact
    m = model(vocab, variant).eval()
    assert isinstance(m, QTIModel)
    assert m(q, pos).shape == (8,)
    assert m.term_scores(q, pos).shape == q.shape
    enc = m.encode_documents(pos)
    assert isinstance(enc, DocumentEncoding) and enc.lengths.tolist() == (pos != 0).sum(1).float().tolist()
    terms = torch.arange(len(vocab))
    assert m.score_encoded(terms, enc).shape == (8, len(vocab))
    assert m.is_latent == (variant != "ndrm2")
    if variant == "ndrm2":
        assert enc.vectors is None and m.term_vectors(terms) is None
    else:
        norms = enc.vectors.norm(dim=-1)
        assert torch.allclose(norms[enc.mask], torch.ones(int(enc.mask.sum())), atol=1e-5)
        assert torch.all(norms[~enc.mask] == 0)
        assert torch.allclose(m.term_vectors(terms).norm(dim=-1), torch.ones(len(vocab)), atol=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
@torch.no_grad()
def test_qti_additivity_and_score_encoded_consistency(scifact, variant):
    vocab, q, pos, _ = scifact
    m = model(vocab, variant, score_chunk_elements=50_000).eval()  # score_encoded in chunks of a few terms
    total = m(q, pos)
    singles = torch.stack([m(q[:, i : i + 1], pos) for i in range(q.shape[1])], dim=1)  # [B, Q]
    assert torch.allclose(total, singles.sum(1), atol=1e-4)
    assert torch.allclose(m.term_scores(q, pos), singles, atol=1e-5)
    assert torch.all(singles[q <= 1] == 0)  # padding and unknown query terms score 0
    encoded = m.score_encoded(torch.arange(len(vocab)), m.encode_documents(pos))  # [B, V]
    assert torch.allclose(encoded.gather(1, q) * (q > 1), singles, atol=1e-5)
    rows = torch.randint(0, len(vocab), (pos.shape[0], 37))  # each document's own terms, padding among them
    rows[:, -5:] = 0
    own = m.score_encoded(rows, m.encode_documents(pos))  # [B, 37]: the [V] scores of those terms, in chunks
    assert own.shape == rows.shape and torch.allclose(own, encoded.gather(1, rows) * (rows > 1), atol=1e-5)


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


def _hand_vocab() -> Vocabulary:
    docs = ["x y x z", "y w", "z z z u v", "y u", "w w"]
    return Vocabulary.build([d.split() for d in docs])  # N = 5, avgdl = 3


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


def test_bm25_init_is_validated_and_survives_json():
    config = NDRMConfig(vocab_size=10, variant="ndrm2", bm25_init=(0.9, 0.4))
    back = NDRMConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert back == config and back.bm25_init == (0.9, 0.4) and hash(back) == hash(config)
    for bad in [(0.0, 0.4), (0.9, 1.5), (0.9,), (1.0, -0.1)]:
        with pytest.raises(ValueError, match="bm25_init"):
            NDRMConfig(vocab_size=10, variant="ndrm2", bm25_init=bad)


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


# -- the gated latent channel (NDRMConfig.latent_gate) -----------------------------------------


def test_latent_gate_config_is_validated():
    assert NDRMConfig(vocab_size=100, latent_gate=0.6).latent_gate == 0.6
    assert NDRMConfig.from_dict(NDRMConfig(vocab_size=100, latent_gate=1.0).to_dict()).latent_gate == 1.0
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError):
            NDRMConfig(vocab_size=100, latent_gate=bad)


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
