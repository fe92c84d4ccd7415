"""Per-example weight gradients of a zero-output block, from a point's (z, q) (P3; docs/science.md,
"estimate-depth (P3)").

For the family's block r(z) = W_out φ(W_in u(z)) at an insertion point, the per-example gradient of
the loss with respect to W_out is G_i = Σ_t q_it h_itᵀ with h = φ(W_in u(z)) computed by the block's own
forward code. `PointArrays` holds the G_i of one point together with the per-example sums the estimators
in `stats.depth` need. Shared by the offline depth stage (z, q read from a store) and growth (z, q
captured from a batch), so both score exactly the same block the same way.
"""

from __future__ import annotations

import numpy as np
import torch

SPLITS = ("train", "test")


def block_features(block, z: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(G, h, q) of a batch: G_i = Σ_t q_it h_itᵀ (n, D, H), h (n, P, H), q (n, P, D); batch first.

    h is the block's own `hidden` (the forward pass's code), so mean_i G_i is ∂(mean loss)/∂W_out of the
    inserted block (`ZeroOutputBlock.weight_gradient`, checked against autograd in tests/test_depth.py).
    """
    n = len(z)
    h = block.hidden(z)
    h = h.reshape(n, -1, h.shape[-1])
    q = q.movedim(block.channel_dim, -1).reshape(n, -1, block.weight.shape[0])
    return torch.einsum("npd,nph->ndh", q, h), h, q


class PointArrays:
    """Per-example arrays of one point (numpy; G in float32, the rest float64), per-split sums for the regression."""

    def __init__(self, n: int, features: int, hidden: int):
        # G_i flattened, kept in float32 like the stored z and q it comes from (half the memory); the
        # estimators cast every product to float64 (stats/accumulate.py)
        self.g = np.empty((n, features * hidden), dtype=np.float32)
        self.position_sum = np.empty((n, features))  # Σ_t q_it
        self.q_sq = np.empty(n)  # Σ_t ‖q_it‖²
        self.z_sq = np.empty(n)  # mean_t ‖z_it‖²
        self.h_sq = np.empty(n)  # mean_t ‖h_it‖²
        self.hidden_gram = {split: np.zeros((hidden, hidden)) for split in SPLITS}  # S = Σ h hᵀ per split
        self.positions = 0

    def add(self, start: int, block, z: torch.Tensor, q: torch.Tensor, split: np.ndarray) -> None:
        """Features of a chunk (z, q on the block's device, which computes them); the sums land on the CPU."""
        g, h, q = block_features(block, z, q)
        stop = start + len(z)
        stream = z.movedim(block.channel_dim, -1).reshape(len(z), -1, q.shape[-1])
        self.g[start:stop] = g.reshape(len(z), -1).cpu().numpy()
        self.position_sum[start:stop] = q.sum(dim=1).cpu().numpy()
        self.q_sq[start:stop] = q.square().sum(dim=(1, 2)).cpu().numpy()
        self.z_sq[start:stop] = stream.square().sum(dim=-1).mean(dim=-1).cpu().numpy()
        self.h_sq[start:stop] = h.square().sum(dim=-1).mean(dim=-1).cpu().numpy()
        self.positions = h.shape[1]
        for name in SPLITS:
            rows = torch.from_numpy(split == name).to(h.device)
            if rows.any():
                self.hidden_gram[name] += torch.einsum("nph,npk->hk", h[rows], h[rows]).cpu().numpy()

    def cross(self, rows: np.ndarray, features: int) -> np.ndarray:
        """C = Σ_{i ∈ rows} G_i (D × H)."""
        return self.g[rows].sum(axis=0, dtype=np.float64).reshape(features, -1)
