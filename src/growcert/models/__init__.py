"""Model families and the one constructor every stage uses.

Families:
- `resnet`: CIFAR-style ResNet, depth 6n+2, channel-width multiplier k (16k/32k/64k), BatchNorm.
- `llama`: decoder-only byte LM, RMSNorm pre-norm, RoPE, SwiGLU, bias-free; width = d_model.
- `hf`: a pretrained Hugging Face causal LM (Pythia/GPT-NeoX, GPT-2, Qwen2), loaded from a checkpoint
  folder by `models.hf.load_pretrained` (never built here); width = hidden size, depth = layers.

Every model built here is an `nn.Module` with
- `points`: an `nn.ModuleDict` of `InsertionPoint`s (`block0` ... `block{L}`), in stream order;
- `per_example_loss(outputs, targets) -> (batch,)`: the loss of each example on its own
  (mean over tokens for language models), so summing it gives a batch loss whose gradient
  with respect to one example's activations is that example's own gradient;
- `per_example_correct(outputs, targets) -> (batch,)`: accuracy of each example (fraction of
  tokens for language models).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from growcert.models.points import InsertionPoint, point_names

FAMILIES = ("resnet", "llama", "hf")


def build_model(family: str, width: int, depth: int, data_info: dict[str, Any],
                options: dict[str, Any] | None = None) -> nn.Module:
    """Build a model of `family` at (`width`, `depth`) for a prepared dataset described by `data_info`.

    `data_info` is the prepared dataset's `info` (kind, input shape, classes or vocabulary);
    `options` is the family's config section (all keys optional; dataclass defaults apply).
    """
    options = dict(options or {})
    if family == "resnet":
        from growcert.models.resnet import ResNet, ResNetConfig

        if data_info["kind"] != "image":
            raise ValueError(f"family 'resnet' needs an image dataset, got kind {data_info['kind']!r}")
        config = ResNetConfig(width=width, depth=depth, in_channels=data_info["shape"][0],
                              num_classes=data_info["num_classes"], **options)
        return ResNet(config)
    if family == "llama":
        from growcert.models.llama import Llama, LlamaConfig

        if data_info["kind"] != "text":
            raise ValueError(f"family 'llama' needs a text dataset, got kind {data_info['kind']!r}")
        config = LlamaConfig(width=width, depth=depth, vocab_size=data_info["vocab_size"], **options)
        return Llama(config)
    if family == "hf":
        raise ValueError("family 'hf' is loaded from a pretrained checkpoint (growcert.models.hf.load_pretrained), "
                         "not built from a width and a depth")
    raise ValueError(f"unknown model family {family!r} (known: {', '.join(FAMILIES)})")


__all__ = ["FAMILIES", "InsertionPoint", "build_model", "point_names"]
