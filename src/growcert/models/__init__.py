"""Model families: one module per family, each owning its facts, and the one constructor every stage uses.

Families:
- `resnet`: CIFAR-style ResNet, depth 6n+2, channel-width multiplier k (16k/32k/64k), BatchNorm.
- `llama`: decoder-only byte LM, RMSNorm pre-norm, RoPE, SwiGLU, bias-free; width = d_model.
- `hf`: a pretrained Hugging Face causal LM (Pythia/GPT-NeoX, GPT-2, Qwen2), loaded from a checkpoint
  folder by `models.hf.load_pretrained` (never built here); width = hidden size, depth = layers.

Each family module defines `FAMILY`, a `Family` record: the loss it is trained with, the names of the
native dims of one example's stream at an insertion point, where the stream's features sit, the
normalisation of its zero-output block, how many insertion points a depth has, which widths and depths
are valid, and how to build it. `dump`, `capture`, `blocks` and `config` ask the family through
`family_of`; adding a family means adding one module and one line to `FAMILY_MODULES`.

Every model built here is an `nn.Module` with
- `points`: an `nn.ModuleDict` of `InsertionPoint`s (`block0` ... `block{L}`), in stream order;
- `per_example_loss(outputs, targets) -> (batch,)`: the loss of each example on its own
  (mean over tokens for language models), so summing it gives a batch loss whose gradient
  with respect to one example's activations is that example's own gradient;
- `per_example_correct(outputs, targets) -> (batch,)`: accuracy of each example (fraction of
  tokens for language models).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from growcert.errors import ConfigError
from growcert.models.points import InsertionPoint, point_names

# family name -> the module that defines its FAMILY record (imported when first asked for)
FAMILY_MODULES = {"resnet": "growcert.models.resnet", "llama": "growcert.models.llama", "hf": "growcert.models.hf"}
FAMILIES = tuple(FAMILY_MODULES)


@dataclass(frozen=True)
class Family:
    """What the rest of the package needs to know about one model family."""

    name: str
    data_kind: str                         # the prepared dataset kind it reads: "image" or "text"
    loss_name: str                         # the per-example loss, as recorded in store attrs
    native_dims: tuple[str, ...]           # dim names of one example's stream at a point (docs/design.md §5)
    channel_dim: int                       # where the stream's features sit, counted from the end
    block_norm: str                        # u(z) of the family's zero-output block: "identity" or "rms"
    point_count: Callable[[int], int]      # insertion points of a model of this depth (block0..blockL)
    stream_features: Callable[[Any, str], int]   # features of a built model's stream at a point
    depth_problem: Callable[[int], str | None]   # why a depth is invalid, None when it is valid
    width_problem: Callable[[int, int], str | None] = lambda width, head_dim: None  # (width, head_dim)
    build: Callable[..., Any] | None = None  # (width, depth, data_info, options) -> model; None: loaded only


def family_of(name: str) -> Family:
    """The `Family` record of a model family (one line naming the known ones otherwise)."""
    if name not in FAMILY_MODULES:
        raise ConfigError(f"unknown model family {name!r} (known: {', '.join(FAMILIES)})")
    return importlib.import_module(FAMILY_MODULES[name]).FAMILY


def build_model(family: str, width: int, depth: int, data_info: dict[str, Any],
                options: dict[str, Any] | None = None):
    """Build a model of `family` at (`width`, `depth`) for a prepared dataset described by `data_info`.

    `data_info` is the prepared dataset's `info` (kind, input shape, classes or vocabulary);
    `options` is the family's config section (all keys optional; dataclass defaults apply).
    """
    rules = family_of(family)
    if rules.build is None:
        raise ConfigError(f"family {family!r} is loaded from a pretrained checkpoint "
                          "(growcert.models.hf.load_pretrained), not built from a width and a depth")
    if data_info["kind"] != rules.data_kind:
        raise ConfigError(f"family {family!r} needs a {rules.data_kind} dataset, got kind {data_info['kind']!r}")
    return rules.build(width, depth, data_info, dict(options or {}))


__all__ = ["FAMILIES", "Family", "InsertionPoint", "build_model", "family_of", "point_names"]
