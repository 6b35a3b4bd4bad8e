"""SPEC facts (../shared/SPEC.md, beside the repository) pinned against the code, expected values computed by hand.

Every expected value is recomputed from the SPEC's formulas with plain torch ops, never by calling
the helper the model itself uses; each docstring names the SPEC line (``SPEC:<n>``) it pins. Where
a module docstring documents a deliberate deviation from SPEC, the documented behaviour is pinned
and the test says so.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch
import torch.nn.functional as F

from ckqti.models.conformer import ConformerConfig, ConformerEncoder, ConformerLayer
from ckqti.models.idcm import IDCM, IDCMConfig
from ckqti.models.minilm import BertConfig
from ckqti.models.ndrm1 import NDRM1
from ckqti.models.ndrm2 import NDRM2
from ckqti.models.ndrm_config import NDRMConfig
from ckqti.models.tk import TK, TKConfig
from ckqti.models.tkl import TKL, Saturation, TKLConfig
from ckqti.train.ndrm_config import TrainConfig
from ckqti.train.options import train_config
from ckqti.train.reranker_config import RerankerTrainConfig
from ckqti.train.sampling import LABELS_WITH_RELEVANT, LABELS_WITHOUT_RELEVANT, ranknet_pairs

SPEC_TK_MUS = [1.0, 0.9, 0.7, 0.5, 0.3, 0.1, -0.1, -0.3, -0.5, -0.7, -0.9]  # SPEC:10, typed out
SPEC_CK_MUS = [1.0, 0.8, 0.6, 0.4, 0.2, 0.0, -0.2, -0.4, -0.6, -0.8]  # SPEC:11, 1 - 2i/10 typed out
TINY_BERT = BertConfig(vocab_size=128, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
                       max_position_embeddings=128)


def close(got: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(got.double(), expected.double(), rtol=1e-5, atol=1e-5)


def rbf(cos: torch.Tensor, mus: list[float], sigma: float = 0.1) -> torch.Tensor:
    """SPEC:9 ``exp(-(cos - mu)^2 / (2 sigma^2))`` -> ``[..., K]``."""
    mu = torch.tensor(mus, dtype=torch.float64)
    return torch.exp(-((cos.double().unsqueeze(-1) - mu) ** 2) / (2 * sigma**2))


def unit(x: torch.Tensor) -> torch.Tensor:
    """Rows divided by their L2 norm; zero rows stay zero."""
    x = x.double()
    n = torch.sqrt((x * x).sum(-1, keepdim=True))
    return torch.where(n > 0, x / torch.where(n > 0, n, torch.ones_like(n)), torch.zeros_like(x))


def test_kernel_centres_widths_and_formula():
    """SPEC:9-11: 11 TK/TKL/IDCM centres and 10 CK centres (every value), all sigma 0.1, non-trainable,
    activation ``exp(-(cos - mu)^2 / (2 sigma^2))``."""
    tk, tkl, idcm = TKConfig(vocab_size=10), TKLConfig(vocab_size=10), IDCMConfig()
    for cfg in (tk, tkl, idcm):
        assert list(cfg.kernel_mus) == SPEC_TK_MUS and cfg.kernel_sigma == 0.1
    model = TK(tk)
    assert model.kernels.mu.tolist() == pytest.approx(SPEC_TK_MUS, abs=1e-7)
    assert model.kernels.sigma.tolist() == pytest.approx([0.1] * 11)
    assert not [n for n, _ in model.named_parameters() if n.startswith("kernels.")]
    cos = torch.linspace(-1, 1, 41).view(1, 41)
    close(model.kernels(cos), rbf(cos, SPEC_TK_MUS))
    ndrm1 = NDRM1(NDRMConfig(vocab_size=10, variant="ndrm1"))
    assert ndrm1.kernels.mu.tolist() == pytest.approx(SPEC_CK_MUS, abs=1e-7)
    assert ndrm1.kernels.sigma.tolist() == pytest.approx([0.1] * 10)
    assert not [n for n, _ in ndrm1.named_parameters() if n.startswith("kernels.")]


def tk_hybrid(model: TK, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """SPEC:16-17: shared Transformer over embeddings + positions, then ``alpha*emb + (1-alpha)*ctx``."""
    mask = ids != 0
    emb = model.embedding.weight[ids] * mask.unsqueeze(-1)
    ctx = model.contextualizer(emb + model.positions[: ids.shape[1]], src_key_padding_mask=~mask)
    alpha = model.mixer.item()
    return (alpha * emb + (1 - alpha) * ctx) * mask.unsqueeze(-1), mask


def test_tk_score_by_hand():
    """SPEC:12 and SPEC:16-18: cosine matrix, 11 RBF kernels summed over real document terms per
    query term; log branch ``log2(clamp(sum, 1e-10)) * scale``, length branch ``sum / (doc_len + 1) *
    scale`` (no log, as the code; the module docstring documents that choice), each summed over real
    query terms -> K -> 1 without bias, then 2 -> 1 without bias. Document capped (max_doc_length)."""
    torch.manual_seed(0)
    cfg = TKConfig(vocab_size=30, embedding_dim=12, num_heads=3, ff_dim=16, max_doc_length=7)
    model = TK(cfg).double().eval()
    with torch.no_grad():  # asymmetric values, so a swapped alpha, branch or weight cannot pass
        model.mixer.fill_(0.7)
        model.scale.fill_(0.05)
        model.dense_log.weight.copy_(torch.linspace(-1.0, 1.0, 11).view(1, 11))
        model.dense_length.weight.copy_(torch.linspace(1.5, 0.5, 11).view(1, 11))
        model.dense_combine.weight.copy_(torch.tensor([[0.8, -1.3]]))
    q = torch.tensor([[2, 5, 7, 0], [3, 3, 9, 11]])
    d = torch.tensor([[5, 6, 7, 8, 2, 0, 0, 0, 0], [4, 12, 13, 3, 14, 15, 16, 17, 18]])  # row 1 is cut to 7
    with torch.no_grad():
        got = model(q, d)
        hq, qm = tk_hybrid(model, q)
        hd, dm = tk_hybrid(model, d[:, : cfg.max_doc_length])
        cos = unit(hq) @ unit(hd).transpose(1, 2)  # [B, Q, L]
        pair = (qm.unsqueeze(2) & dm.unsqueeze(1)).unsqueeze(-1)
        sums = (rbf(cos, SPEC_TK_MUS) * pair).sum(2)  # [B, Q, K]
        qmask = qm.unsqueeze(-1).double()
        log_branch = (torch.log2(torch.clamp(sums, min=1e-10)) * 0.05 * qmask).sum(1)  # [B, K]
        doc_len = dm.sum(1).double().view(-1, 1, 1)
        len_branch = (sums / (doc_len + 1) * 0.05 * qmask).sum(1)  # [B, K]
        feats = torch.stack([log_branch @ torch.linspace(-1.0, 1.0, 11).double(),
                             len_branch @ torch.linspace(1.5, 0.5, 11).double()], dim=1)
        expected = feats @ torch.tensor([0.8, -1.3], dtype=torch.float64)
    assert (sums < 1e-10).any() and (sums > 1e-10).any(), "the clamp must be exercised"
    assert doc_len.flatten().tolist() == [5.0, 7.0]
    close(got, expected)


def test_tk_defaults_and_init():
    """SPEC:16 (300-d, 2 layers, 10 heads, ff 100), SPEC:17 (alpha learned, init 0.5), SPEC:18 (scale
    learned, init 0.01; K->1 without bias, init U(-0.014, 0.014); 2->1 without bias), SPEC:19 (caps:
    query 30, document 200)."""
    cfg = TKConfig(vocab_size=10)
    assert (cfg.embedding_dim, cfg.num_layers, cfg.num_heads, cfg.ff_dim) == (300, 2, 10, 100)
    assert (cfg.max_query_length, cfg.max_doc_length) == (30, 200)
    torch.manual_seed(0)
    model = TK(cfg)
    assert len(model.contextualizer.layers) == 2
    for layer in model.contextualizer.layers:
        assert layer.self_attn.num_heads == 10 and layer.linear1.out_features == 100
    assert model.mixer.item() == 0.5 and model.mixer.requires_grad
    assert model.scale.item() == pytest.approx(0.01) and model.scale.requires_grad
    for dense in (model.dense_log, model.dense_length):
        assert dense.bias is None and tuple(dense.weight.shape) == (1, 11)
        assert 0.005 < dense.weight.abs().max().item() <= 0.014
    assert model.dense_combine.bias is None and tuple(model.dense_combine.weight.shape) == (1, 2)


def test_conformer_layer_order_by_hand():
    """SPEC:31-32: grouped Conv1d (no activation) -> separable self-attention (shared Q/K projection,
    Q * head_dim^-0.5, softmax of K over the sequence with padding excluded, ``A = K^T V``, output
    ``softmax(Q over head_dim) @ A`` -> output projection) -> residual from the layer input ->
    LayerNorm -> FF d->ff->d (ReLU) with residual -> LayerNorm. Documented deviations pinned:
    padding zeroed before the convolution, outputs zero at padding."""
    torch.manual_seed(0)
    d, heads, hd = 8, 2, 4
    layer = ConformerLayer(ConformerConfig(dim=d, num_heads=heads, conv_window=3, ff_dim=12)).double().eval()
    with torch.no_grad():  # LayerNorms and biases away from their init, so a swapped order shows
        for p in layer.parameters():
            p.add_(0.3 * torch.randn_like(p))
    x = torch.randn(2, 6, d, dtype=torch.float64)  # padded positions hold noise too
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], dtype=torch.bool)
    with torch.no_grad():
        got = layer(x, mask)
        keep = mask.unsqueeze(-1).double()
        h = F.conv1d((x * keep).transpose(1, 2), layer.conv.weight, layer.conv.bias, padding=1, groups=heads)
        h = h.transpose(1, 2)
        w, b = layer.attention.in_proj.weight, layer.attention.in_proj.bias
        k = (h @ w[:d].T + b[:d]).view(2, 6, heads, hd)
        v = (h @ w[d:].T + b[d:]).view(2, 6, heads, hd)
        q = k * hd**-0.5
        keys = k.masked_fill(~mask[:, :, None, None], float("-inf")).softmax(dim=1)
        a = torch.einsum("blhi,blhj->bhij", keys, v)  # [B, H, hd, hd]
        att = torch.einsum("blhi,bhij->blhj", q.softmax(dim=-1), a).reshape(2, 6, d)
        att = att @ layer.attention.out_proj.weight.T + layer.attention.out_proj.bias
        n1, n2, ff1, ff2 = layer.norm1, layer.norm2, layer.feed_forward[0], layer.feed_forward[3]
        y = F.layer_norm(x + att, (d,), n1.weight, n1.bias, n1.eps)
        ff = torch.relu(y @ ff1.weight.T + ff1.bias) @ ff2.weight.T + ff2.bias
        expected = F.layer_norm(y + ff, (d,), n2.weight, n2.bias, n2.eps) * keep
    close(got, expected)


def test_conformer_adds_sinusoid_positions_to_the_document_input():
    """SPEC:31: sinusoid positions on the document input (``sin`` / ``cos`` of ``p / 10000^(2i/d)`` on
    even / odd dimensions), then the layers; output zero at padding."""
    torch.manual_seed(0)
    d = 8
    encoder = ConformerEncoder(ConformerConfig(dim=d, num_heads=2, conv_window=3, ff_dim=12, dropout=0.0)).double().eval()
    x = torch.randn(2, 6, d, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]], dtype=torch.bool)
    p = torch.arange(6, dtype=torch.float64).view(6, 1)
    angle = p / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)  # [6, d/2]
    pe = torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1).reshape(6, d)  # sin, cos interleaved
    with torch.no_grad():
        got = encoder(x, mask)
        h = x + pe
        for layer in encoder.layers:
            h = layer(h, mask)
    close(got, h * mask.unsqueeze(-1))


def test_conformer_defaults():
    """SPEC:31: window 31, groups = heads = 32, 2 layers, hidden 256, FF d->256->d, dropout 0.2."""
    c = ConformerConfig()
    assert (c.dim, c.num_layers, c.num_heads, c.conv_window, c.ff_dim, c.dropout) == (256, 2, 32, 31, 256, 0.2)
    assert c.attention == "separable" and c.conv
    assert NDRMConfig(vocab_size=10).conformer() == c
    encoder = ConformerEncoder(c)
    assert len(encoder.layers) == 2
    layer = encoder.layers[0]
    assert layer.conv.kernel_size == (31,) and layer.conv.groups == 32 and layer.conv.padding == (15,)
    assert layer.attention.num_heads == 32 and layer.attention.in_proj.out_features == 2 * 256  # shared Q/K, V
    assert [type(m).__name__ for m in layer.feed_forward] == ["Linear", "ReLU", "Dropout", "Linear"]
    assert layer.feed_forward[0].out_features == 256 and layer.feed_forward[2].p == 0.2


def test_idcm_defaults():
    """SPEC:50-52 and SPEC:55: windows 50 + 7 on each side (64) over up to 2,000 tokens; Conv1d kernel 3;
    11 kernels -> linear 11->1; sample_n 4 windows to the cross-encoder, best 3 combined, weights init
    ones; all-MiniLM-L6-v2 shape (6 layers, hidden 384, vocab 30,522)."""
    c = IDCMConfig()
    assert (c.window, c.overlap, c.window_length, c.max_doc_length, c.sample_n, c.top_k) == (50, 7, 64, 2000, 4, 3)
    bert = BertConfig()
    assert (bert.num_layers, bert.hidden_size, bert.vocab_size) == (6, 384, 30522)
    torch.manual_seed(0)
    model = IDCM(dataclasses.replace(c, bert=TINY_BERT)).eval()
    assert model.conv.kernel_size == (3,) and model.kernel_scale.numel() == 11
    assert (model.bin_weights.in_features, model.bin_weights.out_features) == (11, 1)
    assert model.top_k_weights.tolist() == [1.0, 1.0, 1.0]
    doc = torch.randint(2, 128, (1, 2100))
    windows, valid = model.windows(doc)
    assert tuple(windows.shape) == (1, 40, 64) and bool(valid.all())  # 2,000 / 50: the cap applies
    with torch.no_grad():
        ex = model.explain(torch.tensor([[5, 6, 7]]), doc)
    assert tuple(ex.selected.shape) == (1, 4) and int(ex.used.sum()) == 3


def hand_windows(doc: torch.Tensor, w: int, o: int) -> torch.Tensor:
    """Window i = positions ``[i*w - o, (i+1)*w + o)``, 0 outside the document (SPEC:50)."""
    n = max(1, -(-doc.shape[1] // w))
    out = torch.zeros(doc.shape[0], n, w + 2 * o, dtype=torch.long)
    for i in range(n):
        for j in range(w + 2 * o):
            if 0 <= i * w - o + j < doc.shape[1]:
                out[:, i, j] = doc[:, i * w - o + j]
    return out


def test_idcm_selector_by_hand():
    """SPEC:50-51: windows with an all-padding centre dropped; selector = detached embedding-layer output
    -> Conv1d kernel 3 + ReLU -> L2 normalise -> 11 kernels per window -> ``log(clamp(sum * per-kernel
    scale, 1e-4))`` summed over query tokens -> linear 11->1. Documented choices pinned: right padding 2
    for the convolution and padding embeddings zeroed before it (module docstring)."""
    torch.manual_seed(0)
    model = IDCM(IDCMConfig(bert=TINY_BERT, window=6, overlap=2)).double().eval()
    with torch.no_grad():
        model.kernel_scale.copy_(torch.linspace(0.5, 2.0, 11))
        model.bin_weights.weight.copy_(torch.linspace(-1.0, 1.0, 11).view(1, 11))
        model.bin_weights.bias.fill_(0.3)
    q = torch.tensor([[5, 9, 17, 0], [7, 7, 0, 0]])
    d = torch.randint(2, 100, (2, 15))
    d[1, 4:] = 0  # row 1: one window with a real centre, two without
    windows = hand_windows(d, 6, 2)
    valid = (windows[:, :, 2:8] != 0).any(-1)
    assert valid.tolist() == [[True, True, True], [True, False, False]]

    def vectors(ids: torch.Tensor) -> torch.Tensor:
        emb = model.bert.embeddings.raw(ids) * (ids != 0).unsqueeze(-1)
        x = F.conv1d(F.pad(emb.transpose(1, 2), (0, 2)), model.conv.weight, model.conv.bias)
        return unit(torch.relu(x).transpose(1, 2))

    expected = torch.zeros(2, 3, dtype=torch.float64)
    clamped = []
    with torch.no_grad():
        got = model.selector_scores(q, d)
        for b, i in valid.nonzero().tolist():
            win = windows[b, i].unsqueeze(0)
            cos = vectors(q[b : b + 1])[0] @ vectors(win)[0].T  # [Q, 64]
            sums = (rbf(cos, SPEC_TK_MUS) * (win[0] != 0).view(1, -1, 1)).sum(1) * model.kernel_scale
            clamped.append(sums < 1e-4)
            logs = torch.log(torch.clamp(sums, min=1e-4)) * (q[b] != 0).view(-1, 1)
            expected[b, i] = logs.sum(0) @ model.bin_weights.weight[0] + model.bin_weights.bias[0]
    assert torch.equal(got.valid, valid)
    assert torch.cat(clamped).any() and not torch.cat(clamped).all(), "the clamp must be exercised"
    close(got.scores, expected)
    model.selector_scores(q, d).scores.sum().backward()  # the embeddings are detached: no gradient to BERT
    assert all(p.grad is None for p in model.bert.parameters()) and model.conv.weight.grad is not None


def test_ndrm_caps_and_heads():
    """SPEC:33-35 and SPEC:41: query up to 20 terms, document up to 4,000; windows 300 / stride 100,
    ``log(x + 1e-6)``, MLP K->256->ReLU->dropout->1; query = embedding -> one linear layer; document
    = per-dimension mix of embedding and Conformer output (init 0.5, 0.5, bias 0: the module docstring's
    documented choice); NDRM2 has only w (init 1) and b (init 0)."""
    c = NDRMConfig(vocab_size=10)
    assert (c.max_query_terms, c.max_doc_terms) == (20, 4000)
    assert (c.dim, c.num_kernels, c.kernel_sigma, c.pool_window, c.pool_stride, c.eps) == (256, 10, 0.1, 300, 100, 1e-6)
    m = NDRM1(dataclasses.replace(c, variant="ndrm1"))
    assert (m.pooling.window, m.pooling.stride, m.pooling.eps) == (300, 100, 1e-6)
    mlp = m.pooling.mlp
    assert [type(x).__name__ for x in mlp] == ["Linear", "ReLU", "Dropout", "Linear"]
    assert (mlp[0].in_features, mlp[0].out_features, mlp[3].out_features, mlp[2].p) == (10, 256, 1, 0.2)
    assert (m.query_proj.in_features, m.query_proj.out_features) == (256, 256)
    assert tuple(m.mix.weight.shape) == (2, 256) and bool((m.mix.weight == 0.5).all())
    assert bool((m.mix.bias == 0).all())
    n2 = NDRM2(dataclasses.replace(c, variant="ndrm2"))
    assert [p.item() for p in n2.parameters()] == [1.0, 0.0]


def test_tkl_defaults_and_saturation_init():
    """SPEC:23-28: chunks 40 with 5 overlap, saturation window 30 stride 2, top-3 regions with +-2
    neighbours weighted by ones (15), max document 2,000; a, b, c each a 2->1 linear layer on a LayerNorm
    of [scalar projection of the query term vector, window length], bias init 100, weights
    U(-0.014, 0.014); at init ``a * x^(1/b) - c`` is close to ``ln x``."""
    c = TKLConfig(vocab_size=10)
    assert (c.chunk_size, c.overlap, c.window_length, c.saturation_window, c.saturation_stride) == (40, 5, 50, 30, 2)
    assert (c.regions, c.neighbours, c.max_doc_length, c.saturation) == (3, 2, 2000, "embedding")
    torch.manual_seed(0)
    model = TKL(c)
    assert model.region_weights.tolist() == [1.0] * 15 and model.mixer.item() == 0.5
    assert model.dense.bias is None and model.dense.weight.abs().max().item() <= 0.014
    sat = model.saturation
    assert sat.project.bias is None and (sat.project.in_features, sat.project.out_features) == (300, 1)
    assert tuple(sat.norm.normalized_shape) == (2,)
    for lin in (sat.a, sat.b, sat.c):
        assert (lin.in_features, lin.out_features) == (2, 1) and lin.bias.item() == 100.0
        assert lin.weight.abs().max().item() <= 0.014
    x = torch.linspace(0.5, 5.0, 10).view(1, 1, 10, 1).expand(1, 2, 10, 11)
    with torch.no_grad():
        out = sat(x, torch.randn(1, 2, 300), torch.full((1, 10), 30.0))
    assert bool(torch.isfinite(out).all()) and (out - torch.log(x)).abs().max().item() < 0.1


def test_tkl_saturation_by_hand():
    """SPEC:25: ``a * x^(1/b) - c`` with a, b, c = Linear(2, 1)(LayerNorm([w . q_i, window length]))."""
    torch.manual_seed(0)
    sat = Saturation(6, "embedding").double()
    with torch.no_grad():
        for p in sat.parameters():
            p.add_(0.5 * torch.randn_like(p))
        sat.b.bias.fill_(2.0)
    x = torch.rand(2, 3, 4, 11, dtype=torch.float64) * 3
    query = torch.randn(2, 3, 6, dtype=torch.float64)
    lengths = torch.tensor([[30.0, 30.0, 12.0, 3.0], [30.0, 5.0, 1.0, 0.0]], dtype=torch.float64)
    with torch.no_grad():
        got = sat(x, query, lengths)
        sal = (query @ sat.project.weight[0]).unsqueeze(-1).expand(2, 3, 4)
        feats = torch.stack([sal, lengths.unsqueeze(1).expand(2, 3, 4)], dim=-1)
        feats = F.layer_norm(feats, (2,), sat.norm.weight, sat.norm.bias, sat.norm.eps)
        a, b, c = ((feats @ lin.weight[0] + lin.bias[0]).unsqueeze(-1) for lin in (sat.a, sat.b, sat.c))
        expected = a * x.clamp(min=1e-10) ** (1.0 / b) - c
    close(got, expected)


@pytest.mark.parametrize("kind", ["linear", "log"])
def test_tkl_saturation_ablations_by_hand(kind):
    """SPEC:25 ablation variants: linear (``b = 1``: ``a * x - c``, a and c as in the learned one) and log."""
    torch.manual_seed(0)
    sat = Saturation(6, kind).double()
    with torch.no_grad():
        for p in sat.parameters():
            p.add_(0.5 * torch.randn_like(p))
    x = torch.rand(2, 3, 4, 11, dtype=torch.float64) * 3 + 0.01
    query = torch.randn(2, 3, 6, dtype=torch.float64)
    lengths = torch.tensor([[30.0, 30.0, 12.0, 3.0], [30.0, 5.0, 1.0, 0.0]], dtype=torch.float64)
    with torch.no_grad():
        got = sat(x, query, lengths)
        if kind == "log":
            expected = torch.log(x)
        else:
            sal = (query @ sat.project.weight[0]).unsqueeze(-1).expand(2, 3, 4)
            feats = torch.stack([sal, lengths.unsqueeze(1).expand(2, 3, 4)], dim=-1)
            feats = F.layer_norm(feats, (2,), sat.norm.weight, sat.norm.bias, sat.norm.eps)
            a, c = ((feats @ lin.weight[0] + lin.bias[0]).unsqueeze(-1) for lin in (sat.a, sat.c))
            expected = a * x - c
    close(got, expected)


def test_training_defaults():
    """SPEC:19 (TK: margin ranking loss, margin 1; Adam 1e-4 embeddings/Transformer, 1e-3 the rest),
    SPEC:28 (TKL: Adam 1e-4 / 1e-3), SPEC:37 (NDRM: RankNet over ordered pairs, 1 relevant + 1 top-100
    candidate + 2 random -> 5 pairs, else 1 + 3 -> 3 pairs; top-100; Adam 1e-4; 32 queries a batch)."""
    r = {f.name: f.default for f in dataclasses.fields(RerankerTrainConfig)}
    assert (r["loss"], r["margin"], r["lr_encoder"], r["lr_rest"]) == ("margin", 1.0, 1e-4, 1e-3)
    for model_type in (TK, TKL):
        sig = inspect.signature(model_type.parameter_groups).parameters
        assert (sig["lr_encoder"].default, sig["lr_rest"].default) == (1e-4, 1e-3)
    model = TK(TKConfig(vocab_size=10, embedding_dim=20, num_heads=2))
    groups = model.parameter_groups()
    by_lr = {g["lr"]: {id(p) for p in g["params"]} for g in groups}
    assert id(model.embedding.weight) in by_lr[1e-4] and id(model.dense_log.weight) in by_lr[1e-3]
    assert id(next(model.contextualizer.parameters())) in by_lr[1e-4] and id(model.mixer) in by_lr[1e-3]
    n = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    assert (n["loss"], n["lr"], n["batch_size"], n["depth"]) == ("ranknet", 1e-4, 32, 100)
    assert inspect.signature(train_config).parameters["batch_size"].default == 32
    ndrm = train_config("ndrm3")
    assert (ndrm.lr, ndrm.batch_size, ndrm.loss) == (1e-4, 32, "ranknet")
    assert LABELS_WITH_RELEVANT == (2, 1, 0, 0) and len(ranknet_pairs(LABELS_WITH_RELEVANT)) == 5
    assert LABELS_WITHOUT_RELEVANT == (1, 0, 0, 0) and len(ranknet_pairs(LABELS_WITHOUT_RELEVANT)) == 3
