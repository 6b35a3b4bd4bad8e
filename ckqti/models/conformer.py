"""The Conformer document encoder of CK / NDRM1 (seed paper 002).

One layer: grouped Conv1d over the sequence (window 31, groups = heads, no activation)
-> separable self-attention on the conv output -> residual from the layer input ->
LayerNorm -> feed-forward ``d -> ff -> d`` (ReLU) with residual -> LayerNorm.

Separable self-attention (reference code ``sep=True, shared_qk=True``): Q and K share one
projection, Q is scaled by ``head_dim^-0.5``; ``softmax(K^T over the sequence) @ V`` is a
``head_dim x head_dim`` matrix per head, and the output is ``softmax(Q over head_dim) @ A``.
Memory is O(n d), never an ``n x n`` matrix. ``attention="standard"`` swaps in ordinary
scaled dot-product attention written out explicitly (the ``n x n`` score matrix is
materialised, as in the paper's Transformer baseline); with ``conv=False`` as well the layer
is the reference code's ``--no_conformer`` Transformer layer.

Where this differs from the reference code, on purpose:
- padded positions are zeroed before each convolution, so a document's encoding does not
  depend on how much padding follows it (the reference convolves over padding vectors);
- padded keys are masked with the dtype's most negative value instead of ``-inf``: the
  same weights whenever a sequence has a real position, and no NaN for an empty one;
- outputs at padded positions are zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

ATTENTION_KINDS = ("separable", "standard")


@dataclass(frozen=True)
class ConformerConfig:
    """Conformer encoder settings (defaults: seed paper 002 / reference code).

    Args:
        dim: model width (the embedding size, 256).
        num_layers: encoder layers (2).
        num_heads: attention heads, also the convolution's groups (32).
        conv_window: convolution window, odd (31).
        ff_dim: feed-forward hidden size (256).
        dropout: dropout rate (0.2).
        attention: ``"separable"`` (Conformer) or ``"standard"`` (Transformer).
        conv: whether the grouped convolution runs before attention.
    """

    dim: int = 256
    num_layers: int = 2
    num_heads: int = 32
    conv_window: int = 31
    ff_dim: int = 256
    dropout: float = 0.2
    attention: str = "separable"
    conv: bool = True

    def __post_init__(self) -> None:
        if self.dim < 1 or self.num_heads < 1 or self.dim % self.num_heads:
            raise ValueError(f"dim ({self.dim}) must be a positive multiple of num_heads ({self.num_heads})")
        if self.num_layers < 0:
            raise ValueError(f"num_layers must be >= 0, got {self.num_layers}")
        if self.conv_window < 1 or self.conv_window % 2 == 0:
            raise ValueError(f"conv_window must be a positive odd number, got {self.conv_window}")
        if self.ff_dim < 1:
            raise ValueError(f"ff_dim must be >= 1, got {self.ff_dim}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.attention not in ATTENTION_KINDS:
            raise ValueError(f"attention must be one of {ATTENTION_KINDS}, got {self.attention!r}")


def sinusoid_positions(length: int, dim: int, device: torch.device | None = None) -> Tensor:
    """Sinusoid position encodings (sin on even, cos on odd dimensions).

    Shape:
        ``[length, dim]``.
    """
    position = torch.arange(length, dtype=torch.float32, device=device).unsqueeze(1)  # [L, 1]
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32, device=device) * (-math.log(10000.0) / dim))
    angles = position * freq  # [L, ceil(dim/2)]
    pe = torch.zeros(length, dim, device=device)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, : dim // 2])
    return pe


def _padding_fill(x: Tensor) -> float:
    return torch.finfo(x.dtype).min


class SeparableSelfAttention(nn.Module):
    """Multi-head separable self-attention with shared query/key projection.

    Shape:
        x ``[B, L, D]``, mask ``[B, L]`` bool (True = real) -> ``[B, L, D]``.
        The largest intermediate is the shared Q/K and V projection, ``[B, L, 2D]``; the per-head
        attention summary is ``[B, H, D/H, D/H]``.
    """

    def __init__(self, dim: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.in_proj = nn.Linear(dim, 2 * dim)  # shared Q/K, then V
        self.out_proj = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.in_proj.weight)
        nn.init.zeros_(self.in_proj.bias)
        nn.init.zeros_(self.out_proj.bias)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        b, n, d = x.shape
        k, v = self.in_proj(x).chunk(2, dim=-1)  # [B, L, D] each
        k = k.reshape(b, n, self.num_heads, self.head_dim)  # [B, L, H, h]
        v = v.reshape(b, n, self.num_heads, self.head_dim)  # [B, L, H, h]
        q = k * self.head_dim**-0.5  # [B, L, H, h]
        keys = k.masked_fill(~mask[:, :, None, None], _padding_fill(k))  # [B, L, H, h]
        keys = self.dropout(keys.softmax(dim=1))  # softmax over the sequence
        summary = torch.einsum("blhi,blhj->bhij", keys, v)  # [B, H, h, h]
        queries = self.dropout(q.softmax(dim=-1))  # softmax over head_dim
        out = torch.einsum("blhi,bhij->blhj", queries, summary)  # [B, L, H, h]
        return self.out_proj(out.reshape(b, n, d))  # [B, L, D]


class StandardSelfAttention(nn.Module):
    """Multi-head scaled dot-product self-attention with an explicit ``n x n`` score matrix.

    Shape:
        x ``[B, L, D]``, mask ``[B, L]`` bool (True = real) -> ``[B, L, D]``.
        Intermediate scores are ``[B, H, L, L]``.
    """

    def __init__(self, dim: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.in_proj = nn.Linear(dim, 3 * dim)
        self.out_proj = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.in_proj.weight)
        nn.init.zeros_(self.in_proj.bias)
        nn.init.zeros_(self.out_proj.bias)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        b, n, d = x.shape
        q, k, v = (
            t.reshape(b, n, self.num_heads, self.head_dim).transpose(1, 2) for t in self.in_proj(x).chunk(3, dim=-1)
        )  # [B, H, L, h] each
        scores = (q * self.head_dim**-0.5) @ k.transpose(-1, -2)  # [B, H, L, L]
        scores = scores.masked_fill(~mask[:, None, None, :], _padding_fill(scores))
        weights = self.dropout(scores.softmax(dim=-1))  # [B, H, L, L]
        out = (weights @ v).transpose(1, 2)  # [B, L, H, h]
        return self.out_proj(out.reshape(b, n, d))  # [B, L, D]


class ConformerLayer(nn.Module):
    """One Conformer (or, by config, Transformer) encoder layer.

    Shape:
        x ``[B, L, D]``, mask ``[B, L]`` bool -> ``[B, L, D]``, zero at padded positions.
    """

    def __init__(self, config: ConformerConfig):
        super().__init__()
        d = config.dim
        self.conv = (
            nn.Conv1d(d, d, config.conv_window, padding=config.conv_window // 2, groups=config.num_heads)
            if config.conv
            else None
        )
        attention = SeparableSelfAttention if config.attention == "separable" else StandardSelfAttention
        self.attention = attention(d, config.num_heads, config.dropout)
        self.feed_forward = nn.Sequential(
            nn.Linear(d, config.ff_dim), nn.ReLU(), nn.Dropout(config.dropout), nn.Linear(config.ff_dim, d)
        )
        self.norm1 = nn.LayerNorm(d)
        self.norm2 = nn.LayerNorm(d)
        self.dropout1 = nn.Dropout(config.dropout)
        self.dropout2 = nn.Dropout(config.dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        keep = mask.unsqueeze(-1).to(x.dtype)  # [B, L, 1]
        h = x * keep  # padding -> 0 before the convolution
        if self.conv is not None:
            h = self.conv(h.transpose(1, 2)).transpose(1, 2)  # [B, L, D]
        h = self.attention(h, mask)  # [B, L, D]
        x = self.norm1(x + self.dropout1(h))
        x = self.norm2(x + self.dropout2(self.feed_forward(x)))
        return x * keep


class ConformerEncoder(nn.Module):
    """Sinusoid positions + dropout, then ``num_layers`` :class:`ConformerLayer` s.

    Shape:
        x ``[B, L, D]`` (embedded terms), mask ``[B, L]`` bool -> ``[B, L, D]``, zero at padding.
    """

    def __init__(self, config: ConformerConfig):
        super().__init__()
        self.config = config
        self.dropout = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(ConformerLayer(config) for _ in range(config.num_layers))

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = self.dropout(x + sinusoid_positions(x.shape[1], x.shape[2], x.device).to(x.dtype))  # [B, L, D]
        for layer in self.layers:
            x = layer(x, mask)
        return x * mask.unsqueeze(-1).to(x.dtype)
