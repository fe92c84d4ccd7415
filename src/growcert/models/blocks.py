"""Zero-output residual blocks per model family, and their insertion (P3; docs/science.md, "estimate-depth (P3)").

P3 inserts a residual block r(z) = W_out φ(W_in u(z)) whose last projection W_out is zero, so the
network function is unchanged, and asks whether the conditional activation gradient has a component
the block can follow. The block itself is `residual.ZeroOutputBlock` (pointwise: a 1×1-convolution
MLP on images, a per-token MLP on sequences, φ = GELU); this module fixes, per family, the choices
that make it *the* block of this project, so that the offline estimate (`growcert.stages.depth`, which
computes the block's features from stored z with `ZeroOutputBlock.hidden`), the growth experiment
(`growcert.stages.grow`) and the interventions all use one and the same block. Where the stream's
features sit and which u(z) the block applies are each family's facts (`FAMILY.channel_dim`,
`FAMILY.block_norm` in models/resnet.py, llama.py, hf.py); as they stand:

    family   stream              u(z)                         W_in (seeded by block_seed(seed, point))
    resnet   (C, H, W), post-ReLU identity (BN-at-init, see residual.py)  (hidden × C), 1×1
    llama    (T, D)              RMSNorm without gain (pre-norm)          (hidden × D), per token
    hf       (T, D)              RMSNorm without gain (pre-norm)          (hidden × D), per token

For pretrained Hugging Face models (`hf`) the inserted block is this project's block, not a copy of the
checkpoint's own layer type: a pre-norm per-token MLP added to the stream a decoder layer's residual add
left (GPT-2 and Pythia normalise with LayerNorm, Qwen2 with RMSNorm; the block's gain-free RMSNorm is the
scale normalisation they share, so its features do not depend on the stream's scale, which grows with depth).

hidden defaults to 2 × the stream's features, as in the interventions. Why 1×1 and not a 3×3 W_in on
ResNets: the first-order value is then Σ_positions q hᵀ with h computed position by position from the
stored z, exactly the code of the forward pass; a 3×3 kernel would be the same block applied to
3×3-unfolded patches (a larger feature span), which the store also supports but the project has not
needed.

`GrowableBlock` is the same block with W_in trainable, for growth: at insertion W_out = 0, so
∂L/∂W_in = 0 and the first step moves W_out only (the direction P3's analysis measures); later steps
train both, as any grown layer would be trained.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from growcert.models import family_of
from growcert.models.residual import ZeroOutputBlock, block_seed

NORM_EPS = 1e-6  # the block's own RMSNorm epsilon (LlamaConfig's default; not a model option)


class GrowableBlock(ZeroOutputBlock):
    """`ZeroOutputBlock` whose W_in is a trainable parameter instead of a fixed buffer (for growth)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        w_in = self.w_in
        del self.w_in  # drop the buffer; the same values become a parameter under the same name
        self.w_in = nn.Parameter(w_in.detach().clone())


def point_index(point: str) -> int:
    """`block7` -> 7: the number of residual blocks of the base network below the point."""
    if not point.startswith("block") or not point[5:].isdigit():
        raise ValueError(f"insertion point names look like 'block<i>', got {point!r}")
    return int(point[5:])


def stream_features(model: nn.Module, point: str) -> int:
    """Channels (resnet) or features (llama, hf) of the residual stream at `point` (the family's rule)."""
    point_index(point)
    if point not in model.points:
        raise ValueError(f"unknown insertion point {point!r}; the model has {list(model.points)}")
    return family_of(model.family).stream_features(model, point)


def make_block(
    family: str,
    features: int,
    point: str,
    *,
    hidden: int | None = None,
    seed: int = 0,
    trainable: bool = False,
    dtype: torch.dtype = torch.float32,
) -> ZeroOutputBlock:
    """The family's zero-output block for `point` of a stream with `features` channels.

    W_in depends only on (seed, point, features, hidden): the block whose value is estimated from a
    store is the block that growth inserts. float64 blocks (used offline) hold the same W_in as
    float32 ones up to rounding, since W_in is drawn in float64 and cast.
    """
    rules = family_of(family)
    hidden = hidden or 2 * features
    cls = GrowableBlock if trainable else ZeroOutputBlock
    return cls(
        features, hidden, rules.channel_dim, rules.block_norm, block_seed(seed, point), norm_eps=NORM_EPS, dtype=dtype
    )


def insert_block(
    model: nn.Module, point: str, *, hidden: int | None = None, seed: int = 0, trainable: bool = False
) -> ZeroOutputBlock:
    """Append the family's zero-output block at `point` (output exactly zero: function unchanged).

    The block takes the dtype and device of the model's parameters. Returns the block.
    """
    reference = next(model.parameters())
    block = make_block(
        model.family,
        stream_features(model, point),
        point,
        hidden=hidden,
        seed=seed,
        trainable=trainable,
        dtype=reference.dtype,
    ).to(reference.device)
    model.points[point].inserted.append(block)
    return block


def insert_blocks(model: nn.Module, points: Sequence[str], **options) -> list[ZeroOutputBlock]:
    """`insert_block` at each of `points` (same options); returns the blocks in that order."""
    return [insert_block(model, point, **options) for point in points]
