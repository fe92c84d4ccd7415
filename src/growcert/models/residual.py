"""Zero-output residual modules for direct interventions at an insertion point (P1, P3; docs/science.md,
"intervene (P1, direct residual interventions)").

Each module is appended to an `InsertionPoint.inserted` list, which computes
`stream + module(stream)`; with its `weight` at zero the module's output is exactly zero, so
the network function is unchanged bit for bit until the weight is moved.

- `ResidualParameter`: `weight` is added to the stream of every example, like a bias.
  With shape (C, 1, 1) on a conv stream (C, H, W), or (D,) on a token stream (T, D), it is
  shared across positions and its gradient is Σ_positions q (the estimators' `sum_positions`
  reduction); with the stream's own shape it is per position and its gradient is q itself
  (`flatten`).
- `ZeroOutputBlock`: r(z) = W_out φ(W_in u(z)) applied pointwise at every position (a 1×1
  convolution on images, a per-token MLP on sequences), `weight` = W_out, zero at insertion, and
  W_in a fixed seeded buffer. ∂L/∂W_out = Σ_positions q hᵀ with h = φ(W_in u(z)) (P3), which
  `hidden` computes from stored activations with the very same code as the forward pass.
"""

from __future__ import annotations

import math
import zlib

import torch
import torch.nn.functional as F
from torch import nn


class ResidualParameter(nn.Module):
    """stream + weight, with `weight` broadcast over the batch (and over positions if shared)."""

    def __init__(self, shape: tuple[int, ...], dtype: torch.dtype = torch.float32):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(shape, dtype=dtype))

    def forward(self, stream: torch.Tensor) -> torch.Tensor:
        return self.weight.expand_as(stream)


class ZeroOutputBlock(nn.Module):
    """r(z) = W_out φ(W_in u(z)) at every position; W_out (the only parameter) starts at zero.

    `channel_dim` is where the features sit in the stream (-3 for (…, C, H, W), -1 for (…, T, D)).
    `norm` is u: "rms" (RMSNorm without gain, what a pre-norm LLaMA block applies) or "identity".
    For ResNets identity is what a grown block sees: a freshly inserted BatchNorm in eval mode at
    its initial running statistics (mean 0, variance 1, γ = 1, β = 0) is z/√(1 + 1e-5), the
    identity up to a constant, and unlike a batch-statistics norm it keeps examples independent.
    """

    def __init__(
        self,
        features: int,
        hidden: int,
        channel_dim: int,
        norm: str,
        seed: int,
        norm_eps: float = 1e-6,
        dtype: torch.dtype = torch.float32,
    ):
        super().__init__()
        if norm not in ("rms", "identity"):
            raise ValueError(f"block norm must be 'rms' or 'identity', got {norm!r}")
        self.channel_dim, self.norm, self.norm_eps = channel_dim, norm, norm_eps
        # W_in is fixed (a buffer, not a parameter): only W_out carries the first-order direction.
        generator = torch.Generator().manual_seed(seed)
        w_in = torch.randn(hidden, features, generator=generator, dtype=torch.float64) / math.sqrt(features)
        self.register_buffer("w_in", w_in.to(dtype))
        self.weight = nn.Parameter(torch.zeros(features, hidden, dtype=dtype))  # W_out

    def hidden(self, stream: torch.Tensor) -> torch.Tensor:
        """h = φ(W_in u(z)) with features last: (…, positions…, hidden)."""
        x = stream.movedim(self.channel_dim, -1)
        if self.norm == "rms":
            x = F.rms_norm(x, (x.shape[-1],), eps=self.norm_eps)
        return F.gelu(x @ self.w_in.T)

    def forward(self, stream: torch.Tensor) -> torch.Tensor:
        return (self.hidden(stream) @ self.weight.T).movedim(-1, self.channel_dim)

    def weight_gradient(self, stream: torch.Tensor, gradient: torch.Tensor) -> torch.Tensor:
        """Mean over examples of Σ_positions q hᵀ: ∂(mean loss)/∂W_out from stored z and q (batch first)."""
        features = self.hidden(stream).reshape(len(stream), -1, self.w_in.shape[0])
        q = gradient.movedim(self.channel_dim, -1).reshape(len(gradient), -1, self.w_in.shape[1])
        return torch.einsum("npc,nph->ch", q, features) / len(stream)


def block_seed(seed: int, point: str) -> int:
    """Seed of a point's W_in: fixed by (seed, point name), the same across draws, ε and widths."""
    return (seed * 1_000_003 + zlib.crc32(point.encode())) % (2**63)
