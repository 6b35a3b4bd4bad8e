from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from ckqti.models.conformer import (
    ConformerConfig,
    ConformerEncoder,
    SeparableSelfAttention,
    StandardSelfAttention,
    sinusoid_positions,
)

TINY = ConformerConfig(dim=16, num_layers=2, num_heads=4, conv_window=5, ff_dim=16, dropout=0.0)


class LargestTensor(TorchDispatchMode):
    """Records the largest number of elements of any tensor an op produces (forward and backward)."""

    def __init__(self):
        super().__init__()
        self.largest = 0
        self.shape = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.numel() > self.largest:
                self.largest, self.shape = t.numel(), tuple(t.shape)
        return out


def _inputs(batch=2, length=12, dim=16, real=(12, 7), seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, length, dim, generator=g)
    mask = torch.arange(length).unsqueeze(0) < torch.tensor(real).unsqueeze(1)
    return x, mask


def test_config_validation():
    with pytest.raises(ValueError):
        ConformerConfig(dim=30, num_heads=4)
    with pytest.raises(ValueError):
        ConformerConfig(conv_window=4)
    with pytest.raises(ValueError):
        ConformerConfig(attention="linear")
    with pytest.raises(ValueError):
        ConformerConfig(dropout=1.0)


@pytest.mark.parametrize("attention,conv", [("separable", True), ("standard", False)])
def test_encoder_shapes_zero_padding_and_padding_invariance(attention, conv):
    torch.manual_seed(0)
    enc = ConformerEncoder(ConformerConfig(**{**TINY.__dict__, "attention": attention, "conv": conv})).eval()
    x, mask = _inputs()
    out = enc(x, mask)
    assert out.shape == (2, 12, 16)
    assert torch.all(out[1, 7:] == 0)
    # the second document with less padding (and garbage where padding was) encodes the same
    x2 = x[1:, :9].clone()
    x2[:, 7:] = 100.0
    out2 = enc(x2, mask[1:, :9])
    assert torch.allclose(out2[0, :7], out[1, :7], atol=1e-5)


def test_an_encoder_without_layers_is_positions_added_and_zero_at_padding():
    """``num_layers=0`` (the config allows it) keeps the encoder's contract: real positions get their
    sinusoid added, padded positions are zero."""
    enc = ConformerEncoder(replace(TINY, num_layers=0)).eval()
    x, mask = _inputs()
    out = enc(x, mask)
    expected = (x + sinusoid_positions(12, 16)) * mask.unsqueeze(-1)
    assert torch.allclose(out, expected, atol=1e-6)
    assert torch.all(out[1, 7:] == 0)


def test_separable_attention_matches_explicit_per_head_formula():
    torch.manual_seed(0)
    attn = SeparableSelfAttention(8, num_heads=2).eval()
    x, mask = _inputs(batch=1, length=5, dim=8, real=(4,))
    out = attn(x, mask)
    k, v = attn.in_proj(x[0, :4]).chunk(2, dim=-1)  # only the real positions
    heads = []
    for h in range(2):
        kh, vh = k[:, h * 4 : (h + 1) * 4], v[:, h * 4 : (h + 1) * 4]  # [n, 4]
        a = kh.t().softmax(dim=-1) @ vh  # [4, n] softmax over the sequence @ [n, 4] -> [4, 4]
        heads.append((kh * 4**-0.5).softmax(dim=-1) @ a)  # [n, 4]
    expected = attn.out_proj(torch.cat(heads, dim=-1))
    assert torch.allclose(out[0, :4], expected, atol=1e-5)


def test_standard_attention_matches_torch_sdpa():
    torch.manual_seed(0)
    attn = StandardSelfAttention(8, num_heads=2).eval()
    x, mask = _inputs(batch=2, length=6, dim=8, real=(6, 3))
    q, k, v = (t.reshape(2, 6, 2, 4).transpose(1, 2) for t in attn.in_proj(x).chunk(3, dim=-1))
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :])
    expected = attn.out_proj(ref.transpose(1, 2).reshape(2, 6, 8))
    assert torch.allclose(attn(x, mask), expected, atol=1e-5)


def _largest_intermediate(attention: str, n: int) -> tuple[int, tuple]:
    torch.manual_seed(0)
    config = ConformerConfig(dim=16, num_layers=1, num_heads=4, conv_window=5, ff_dim=16, attention=attention)
    enc = ConformerEncoder(config)
    x, mask = _inputs(batch=1, length=n, dim=16, real=(n - 10,))
    x.requires_grad_(True)
    with LargestTensor() as probe:
        enc(x, mask).sum().backward()
    return probe.largest, probe.shape


def test_separable_attention_never_builds_n_by_n_tensor():
    n = 1024
    largest, shape = _largest_intermediate("separable", n)
    assert largest < n * n // 8, f"an intermediate of shape {shape} is quadratic-sized"
    assert largest <= 4 * n * 16  # a few [n, d] tensors at most
    # the probe does see the quadratic tensor of standard attention
    largest_std, shape_std = _largest_intermediate("standard", n)
    assert largest_std >= n * n and shape_std[-2:] == (n, n)


def test_gradients_reach_every_encoder_parameter():
    torch.manual_seed(0)
    enc = ConformerEncoder(TINY).train()
    x, mask = _inputs()
    enc(x, mask).pow(2).sum().backward()
    for name, p in enc.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_sinusoid_positions():
    pe = sinusoid_positions(4, 6)
    assert pe.shape == (4, 6)
    assert torch.allclose(pe[0], torch.tensor([0.0, 1.0, 0.0, 1.0, 0.0, 1.0]))
    assert pe[1, 0].item() == pytest.approx(torch.sin(torch.tensor(1.0)).item())
