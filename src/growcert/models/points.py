"""Named insertion points on a residual stream.

An `InsertionPoint` is the identity on the residual stream at one named place
(`block0` after the stem or embedding, `block{i}` after residual block i).
Every model family routes its stream through one of these modules per point, so
later stages find the points by name: capture registers hooks on them, and the
depth stage appends zero-output residual blocks to `inserted`, which keeps the
network function unchanged until those blocks are trained.
"""

from __future__ import annotations

import torch
from torch import nn


class InsertionPoint(nn.Module):
    """Identity at a named point of the residual stream, plus any inserted residual blocks."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name
        self.inserted = nn.ModuleList()

    def forward(self, stream: torch.Tensor) -> torch.Tensor:
        for block in self.inserted:
            stream = stream + block(stream)
        return stream

    def extra_repr(self) -> str:
        return f"name={self.name!r}"


def point_names(depth_blocks: int) -> tuple[str, ...]:
    """Names of the insertion points of a model with `depth_blocks` residual blocks."""
    return tuple(f"block{i}" for i in range(depth_blocks + 1))
