"""Model families: one module per family, each owning its facts, and the one constructor every stage uses.

Families (the registry `FAMILIES`, name -> the module that defines the family's record):
- `resnet`: CIFAR-style ResNet, depth 6n+2, channel-width multiplier k (16k/32k/64k), BatchNorm.
- `llama`: decoder-only byte LM, RMSNorm pre-norm, RoPE, SwiGLU, bias-free; width = d_model.
- `hf`: a pretrained Hugging Face causal LM (Pythia/GPT-NeoX, GPT-2, Qwen2), loaded from a checkpoint
  folder by `models.hf.load_pretrained` (never built here); width = hidden size, depth = layers.

Each family module defines `FAMILY`, a `Family` record: the loss it is trained with, the names of the
native dims of one example's stream at an insertion point, where the stream's features sit, the
normalisation of its zero-output block, how many insertion points a depth has, which widths and depths
are valid, whether it takes a sequence length, whether it is trained or only loaded, and how to build it.
Every other part of the package asks the record (`family_of`, `trained_families`, ...) and names no
family itself: the pipeline's wildcards and rule choices, the config checks, dump, capture, blocks.
Adding a family means adding one module and one line to `FAMILIES`; its options, if any, go under
`models.<family>` in the schema.

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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from growcert.data import DATASET_KINDS
from growcert.errors import ConfigError
from growcert.models.points import InsertionPoint, point_names

# The registry: family name -> the module that defines its FAMILY record (imported when first asked for)
FAMILIES = {"resnet": "growcert.models.resnet", "llama": "growcert.models.llama", "hf": "growcert.models.hf"}


@dataclass(frozen=True)
class Family:
    """What the rest of the package needs to know about one model family."""

    name: str
    data_kind: str  # the prepared dataset kind it reads: "image" or "text"
    loss_name: str  # the per-example loss, as recorded in store attrs
    # the per-example loss in words: its reduction and the factor it puts in q (the store's variable descriptions)
    loss_description: str
    native_dims: tuple[str, ...]  # dim names of one example's stream at a point (docs/design.md §5)
    channel_dim: int  # where the stream's features sit, counted from the end
    block_norm: str  # u(z) of the family's zero-output block: "identity" or "rms"
    point_count: Callable[[int], int]  # insertion points of a model of this depth (block0..blockL)
    stream_features: Callable[[Any, str], int]  # features of a built model's stream at a point
    depth_problem: Callable[[int], str | None]  # why a depth is invalid, None when it is valid
    # why a width is invalid given the family's options (config key models.<family>), None when it is valid
    width_problem: Callable[[int, dict[str, Any]], str | None] = lambda width, options: None
    build: Callable[..., Any] | None = None  # (width, depth, data_info, options) -> model; None: loaded only
    context: bool = False  # takes a sequence length (its `context` option; grids[].contexts)
    loss_unit: str = "nats per example"  # what one unit of its loss is per (the scores' unit, never pooled)

    @property
    def position_dims(self) -> tuple[str, ...]:
        """The native dims that index a position (every one but the features'): the store gives them coordinates."""
        features = len(self.native_dims) + self.channel_dim
        return tuple(dim for number, dim in enumerate(self.native_dims) if number != features)

    @property
    def pretrained(self) -> bool:
        """Loaded from a pretrained checkpoint (config key pretrained), never trained by the pipeline."""
        return self.build is None


def family_of(name: str) -> Family:
    """The `Family` record of a model family (one line naming the known ones otherwise)."""
    if name not in FAMILIES:
        raise ConfigError(f"unknown model family {name!r} (known: {', '.join(FAMILIES)})")
    return importlib.import_module(FAMILIES[name]).FAMILY


def trained_families() -> list[str]:
    """The families a grid trains (built from a width and a depth), in registry order."""
    return [name for name in FAMILIES if not family_of(name).pretrained]


def pretrained_family() -> str | None:
    """The family of config key `pretrained`'s checkpoints (loaded only), None when none is registered."""
    return next((name for name in FAMILIES if family_of(name).pretrained), None)


def build_model(family: str, width: int, depth: int, data_info: dict[str, Any], options: dict[str, Any] | None = None):
    """Build a model of `family` at (`width`, `depth`) for a prepared dataset described by `data_info`.

    `data_info` is the prepared dataset's `info` (kind, input shape, classes or vocabulary);
    `options` is the family's config section (all keys optional; dataclass defaults apply).
    """
    rules = family_of(family)
    if rules.build is None:
        raise ConfigError(
            f"family {family!r} is loaded from a pretrained checkpoint "
            "(growcert.models.hf.load_pretrained), not built from a width and a depth"
        )
    if data_info["kind"] != rules.data_kind:
        raise ConfigError(f"family {family!r} needs a {rules.data_kind} dataset, got kind {data_info['kind']!r}")
    return rules.build(width, depth, data_info, dict(options or {}))


def check_family(where: str, family: str) -> Family:
    """The record of trained family `family` (config key `<where>.family`); ConfigError naming the key when the
    family is not registered or is loaded from pretrained checkpoints only."""
    within = f"{where}." if where else ""
    if family not in FAMILIES:
        raise ConfigError(
            f"config key '{within}family': unknown model family {family!r} (trained: {', '.join(trained_families())})"
        )
    rules = family_of(family)
    if rules.pretrained:
        raise ConfigError(
            f"config key '{within}family': family {family} is loaded from pretrained checkpoints "
            "(config key pretrained.models), not trained"
        )
    return rules


def check_model(
    where: str, family: str, dataset: str, widths: dict[str, int], depths: dict[str, int], options: dict[str, Any]
) -> Family:
    """A trained family's rules on a grid, run or growth experiment: the family is registered and trained, reads
    the dataset's kind, and takes these depths and widths (given as {key under `where`: value}) with these
    options. ConfigError naming the key otherwise; the family's record when all hold."""
    within = f"{where}." if where else ""
    rules = check_family(where, family)
    if DATASET_KINDS[dataset] != rules.data_kind:
        raise ConfigError(f"config key '{within}dataset': family {family} cannot train on {dataset}")
    for key, depth in depths.items():
        if problem := rules.depth_problem(depth):
            raise ConfigError(f"config key '{within}{key}': {problem}")
    for key, width in widths.items():
        if problem := rules.width_problem(width, options):
            raise ConfigError(f"config key '{within}{key}': {problem}")
    return rules


def check_context_family(where: str, family: str) -> None:
    """A context sweep or a run's context axis needs a family that takes a sequence length."""
    if not family_of(family).context:
        takes = [name for name in FAMILIES if family_of(name).context]
        raise ConfigError(f"config key '{where}': family {family} has no context length (only {', '.join(takes)} do)")


def check_run(run: dict[str, Any]) -> None:
    """The family's rules on one run of `growcert train` (its resolved settings)."""
    check_model("", run["family"], run["dataset"], {"width": run["width"]}, {"depth": run["depth"]}, run["model"])
    if "context" in run:  # a run of a context sweep: the family takes a context, and its option is the run's
        check_context_family("context", run["family"])
        if run["model"].get("context") != run["context"]:
            raise ConfigError(
                f"config key 'model.context': {run['model'].get('context')} differs from the run's "
                f"context axis {run['context']} (train_settings sets both)"
            )


def check_growth(experiment: dict[str, Any], where: str = "grow") -> None:
    """The family's rules on one growth experiment (`growcert grow`'s resolved settings, or a config entry with
    its family's options): its base and deeper depths and width, and blocks no more than the base's points."""
    depths = {"base_depth": experiment["base_depth"]}
    if experiment["deeper_depth"] is not None:
        depths["deeper_depth"] = experiment["deeper_depth"]
    rules = check_model(
        where, experiment["family"], experiment["dataset"], {"width": experiment["width"]}, depths, experiment["model"]
    )
    points = rules.point_count(experiment["base_depth"])
    if experiment["blocks"] > points:
        raise ConfigError(
            f"config key '{where}.blocks': {experiment['blocks']} blocks but the base has {points} points"
        )


__all__ = [
    "FAMILIES",
    "Family",
    "InsertionPoint",
    "build_model",
    "check_family",
    "check_growth",
    "check_model",
    "check_run",
    "family_of",
    "point_names",
    "pretrained_family",
    "trained_families",
]
