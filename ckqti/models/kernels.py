"""RBF kernels and windowed kernel pooling, shared by TK, TKL, CK/NDRM1 and IDCM.

Pure tensor functions first (:func:`rbf_kernels`, :func:`window_sums`,
:func:`windowed_kernel_sums`, :func:`masked_max`), then thin modules holding the
non-trainable kernel centres (:class:`RBFKernels`).

The RBF activation of a cosine ``c`` for kernel ``k`` is
``exp(-(c - mu_k)^2 / (2 sigma_k^2))`` (SPEC: all sigma 0.1, non-trainable).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

#: TK, TKL and IDCM's selector: 11 kernels.
TK_MUS: tuple[float, ...] = (1.0, 0.9, 0.7, 0.5, 0.3, 0.1, -0.1, -0.3, -0.5, -0.7, -0.9)


def ck_mus(num_kernels: int = 10) -> tuple[float, ...]:
    """CK / NDRM1 kernel centres ``mu_i = 1 - 2 i / K`` (``1.0, 0.8, ..., -0.8`` for K = 10)."""
    if num_kernels < 1:
        raise ValueError(f"num_kernels must be >= 1, got {num_kernels}")
    return tuple(1.0 - 2.0 * i / num_kernels for i in range(num_kernels))


def rbf_kernels(cos: Tensor, mu: Tensor, sigma: Tensor) -> Tensor:
    """RBF kernel activations of cosine similarities.

    Args:
        cos: ``[..., L]`` cosine similarities.
        mu: ``[K]`` kernel centres.
        sigma: ``[K]`` kernel widths (or a scalar tensor).

    Returns:
        ``[..., L, K]``: ``exp(-(cos - mu)^2 / (2 sigma^2))``.
    """
    diff = cos.unsqueeze(-1) - mu  # [..., L, 1] - [K] -> [..., L, K]
    return torch.exp(-(diff * diff) / (2.0 * sigma * sigma))  # [..., L, K]


def window_starts(length: int, stride: int) -> int:
    """How many windows of a sequence of ``length`` positions start inside it: ``ceil(length / stride)``."""
    return -(-length // stride)


def window_sums(x: Tensor, window: int, stride: int) -> Tensor:
    """Sums of ``x`` over windows along dim ``-2``: one window starts at every ``stride``-th position.

    Every start inside the sequence gets a window, including the last few that run past its
    end (those are summed over the positions that exist, as if the sequence were padded with
    zeros). So windows depend only on the positions that exist: appending zero padding adds
    windows (which the caller masks out) but changes none of the earlier ones.

    Shape:
        x ``[..., L, K]`` -> ``[..., W, K]`` with ``W = ceil(L / stride)``.
    """
    length = x.shape[-2]
    num = window_starts(length, stride)
    full = 0 if length < window else (length - window) // stride + 1  # windows that fit inside
    parts = []
    if full:
        parts.append(x.unfold(-2, window, stride).sum(-1))  # [..., full, K, window] -> [..., full, K]
    for i in range(full, num):  # at most ceil(window / stride) tail windows
        parts.append(x[..., i * stride :, :].sum(-2, keepdim=True))  # [..., 1, K]
    if not parts:
        return x.new_zeros(x.shape[:-2] + (0, x.shape[-1]))
    return torch.cat(parts, dim=-2)  # [..., W, K]


@dataclass
class KernelWindows:
    """Kernel activations summed over windows.

    Attributes:
        sums: ``[..., W, K]`` per-window sums of the (masked) activations.
        mask: ``[..., W]`` bool, True where the window holds at least one real position.
    """

    sums: Tensor
    mask: Tensor


def windowed_kernel_sums(activations: Tensor, mask: Tensor, window: int, stride: int) -> KernelWindows:
    """Sum kernel activations over sliding windows, padding masked out.

    Args:
        activations: ``[..., L, K]`` kernel activations.
        mask: ``[..., L]`` bool, True at real document positions; broadcastable to
            ``activations.shape[:-1]`` (for example ``[B, 1, L]`` against ``[B, Q, L, K]``).
        window: window length in positions.
        stride: distance between window starts.

    Returns:
        :class:`KernelWindows` with ``sums [..., W, K]`` and ``mask [..., W]`` (the mask's own
        batch shape, broadcastable to the sums'); windows with no real position are False.
    """
    weights = mask.to(activations.dtype).unsqueeze(-1)  # [..., L, 1]
    sums = window_sums(activations * weights, window, stride)  # [..., W, K]
    real = window_sums(weights, window, stride).squeeze(-1) > 0  # [..., W]
    return KernelWindows(sums, real)


def masked_max(x: Tensor, mask: Tensor, dim: int = -1, empty: float = 0.0) -> Tensor:
    """Maximum of ``x`` over ``dim`` among positions where ``mask`` is True; ``empty`` where none is.

    Shape:
        x ``[..., W, ...]``, mask broadcastable to x -> x with ``dim`` removed.
    """
    mask = mask.expand_as(x)
    filled = x.masked_fill(~mask, float("-inf"))
    best = filled.max(dim=dim).values
    return torch.where(mask.any(dim=dim), best, torch.full_like(best, empty))


class RBFKernels(nn.Module):
    """A bank of non-trainable RBF kernels over cosine similarities.

    Args:
        mus: kernel centres.
        sigma: one width for every kernel (SPEC: 0.1).

    Shape:
        cos ``[..., L]`` -> ``[..., L, K]``.
    """

    def __init__(self, mus: tuple[float, ...] | list[float], sigma: float = 0.1):
        super().__init__()
        if sigma <= 0:
            raise ValueError(f"sigma must be positive, got {sigma}")
        self.register_buffer("mu", torch.tensor(list(mus), dtype=torch.float32))
        self.register_buffer("sigma", torch.full((len(mus),), float(sigma)))

    @property
    def num_kernels(self) -> int:
        return int(self.mu.shape[0])

    def forward(self, cos: Tensor) -> Tensor:
        return rbf_kernels(cos, self.mu, self.sigma)
