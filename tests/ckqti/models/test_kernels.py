import math

import pytest
import torch

from ckqti.models.kernels import (
    TK_MUS,
    RBFKernels,
    ck_mus,
    masked_max,
    rbf_kernels,
    window_sums,
    windowed_kernel_sums,
)


def test_kernel_centres_match_spec():
    assert ck_mus(10) == pytest.approx((1.0, 0.8, 0.6, 0.4, 0.2, 0.0, -0.2, -0.4, -0.6, -0.8))
    assert len(TK_MUS) == 11 and TK_MUS[0] == 1.0 and TK_MUS[-1] == -0.9
    with pytest.raises(ValueError):
        ck_mus(0)


def test_rbf_kernels_hand_values_and_shape():
    cos = torch.tensor([[0.9, 1.0, -0.3]])  # [1, L=3]
    mu = torch.tensor([1.0, 0.0])
    sigma = torch.tensor([0.1, 0.5])
    out = rbf_kernels(cos, mu, sigma)
    assert out.shape == (1, 3, 2)
    assert out[0, 0, 0].item() == pytest.approx(math.exp(-0.5))  # (0.9-1)^2 / (2 * 0.01)
    assert out[0, 1, 0].item() == pytest.approx(1.0)
    assert out[0, 2, 1].item() == pytest.approx(math.exp(-0.09 / 0.5))
    module = RBFKernels(ck_mus(10), 0.1)
    assert module(torch.zeros(2, 4, 7)).shape == (2, 4, 7, 10)
    assert module.num_kernels == 10 and not list(module.parameters())


def test_window_sums_hand_example():
    x = torch.arange(7, dtype=torch.float32).view(7, 1)  # positions 0..6
    out = window_sums(x, window=3, stride=2)
    # windows start at 0, 2, 4, 6; the last runs past the end
    assert out.squeeze(-1).tolist() == [3.0, 9.0, 15.0, 6.0]


@pytest.mark.parametrize("length,window,stride", [(1, 5, 2), (10, 3, 3), (17, 6, 2), (40, 30, 10), (5, 5, 5)])
def test_window_sums_equals_zero_padded_loop(length, window, stride):
    g = torch.Generator().manual_seed(length)
    x = torch.rand(2, length, 3, generator=g)
    padded = torch.cat([x, torch.zeros(2, window, 3)], dim=1)
    starts = range(0, length, stride)
    expected = torch.stack([padded[:, s : s + window].sum(1) for s in starts], dim=1)
    assert torch.allclose(window_sums(x, window, stride), expected, atol=1e-6)


def test_windowed_sums_ignore_padding_and_mask_empty_windows():
    g = torch.Generator().manual_seed(0)
    act = torch.rand(3, 9, 4, generator=g)  # [Q=3, L=9, K=4]
    mask = torch.tensor([True] * 5 + [False] * 4).view(1, 9)  # 5 real positions
    windows = windowed_kernel_sums(act, mask, window=4, stride=2)  # starts 0,2,4,6,8
    assert windows.sums.shape == (3, 5, 4) and windows.mask.shape == (1, 5)
    assert windows.mask.tolist() == [[True, True, True, False, False]]
    # padded positions contribute nothing: window at 4 sums only position 4
    assert torch.allclose(windows.sums[:, 2], act[:, 4])
    # the same document without padding gives the same real windows
    short = windowed_kernel_sums(act[:, :5], mask[:, :5], window=4, stride=2)
    assert torch.allclose(short.sums, windows.sums[:, :3])


def test_masked_max_ignores_masked_and_handles_empty():
    x = torch.tensor([[1.0, 5.0, 2.0], [3.0, 4.0, 9.0]])
    mask = torch.tensor([[True, False, True], [False, False, False]])
    assert masked_max(x, mask, dim=-1).tolist() == [2.0, 0.0]
