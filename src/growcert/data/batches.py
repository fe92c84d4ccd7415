"""Examples and batches from a prepared dataset, for training, evaluation and dumps.

One example is an image with its label, or a window of `context + 1` bytes of a text
stream (input = first `context` bytes, target = the same window shifted by one).
Windows start at multiples of `context`, so consecutive windows share only their
boundary byte and no input token is repeated: the single-pass regime of P1 (docs/science.md, "train"),
in which training and held-out activation gradients share a distribution.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from growcert.data import DatasetError, PreparedDataset


@dataclass
class Examples:
    """A set of examples as tensors: inputs, targets, and each example's row/offset in its split."""

    inputs: torch.Tensor
    targets: torch.Tensor
    index: np.ndarray

    def __len__(self) -> int:
        return len(self.index)

    def batches(self, batch_size: int):
        for start in range(0, len(self), batch_size):
            yield self.inputs[start : start + batch_size], self.targets[start : start + batch_size]


def _split_arrays(data: PreparedDataset, split: str):
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    return (data.train_x, data.train_y) if split == "train" else (data.test_x, data.test_y)


def window_count(stream: np.ndarray, context: int) -> int:
    """Number of non-overlapping input windows of `context` tokens (plus one target byte) in a stream."""
    return max(0, (len(stream) - 1) // context)


def examples_at(data: PreparedDataset, split: str, positions: np.ndarray, context: int | None = None) -> Examples:
    """The examples at `positions` of a split (image rows, or window numbers of a text stream)."""
    inputs, labels = _split_arrays(data, split)
    positions = np.asarray(positions, dtype=np.int64)
    if data.info["kind"] == "image":
        return Examples(
            torch.from_numpy(np.ascontiguousarray(inputs[positions])),
            torch.from_numpy(labels[positions].astype(np.int64)),
            positions,
        )
    if context is None:
        raise ValueError("text examples need a context length")
    offsets = positions[:, None] * context + np.arange(context + 1)[None, :]
    windows = torch.from_numpy(inputs[offsets].astype(np.int64))
    return Examples(windows[:, :-1].contiguous(), windows[:, 1:].contiguous(), positions * context)


def split_size(data: PreparedDataset, split: str, context: int | None = None) -> int:
    inputs, _ = _split_arrays(data, split)
    return len(inputs) if data.info["kind"] == "image" else window_count(inputs, context)


def fixed_examples(data: PreparedDataset, split: str, count: int, seed: int, context: int | None = None) -> Examples:
    """A seeded, sorted sample of `count` examples of a split (all of them if the split is smaller)."""
    available = split_size(data, split, context)
    rng = np.random.default_rng(seed)
    chosen = np.sort(rng.permutation(available)[:count])
    return examples_at(data, split, chosen, context)


class TrainingBatches:
    """Seeded training batches: image epochs with reshuffling, or text windows in one pass.

    With `single_pass`, a text budget larger than the corpus is an error rather than a silent
    second epoch, because repeated tokens change the regime the analyses assume.
    """

    def __init__(
        self,
        data: PreparedDataset,
        batch_size: int,
        steps: int,
        seed: int,
        context: int | None = None,
        single_pass: bool = True,
    ):
        self.data, self.batch_size, self.context = data, batch_size, context
        self.rng = np.random.default_rng(seed)
        self.available = split_size(data, "train", context)
        needed = batch_size * steps
        self.cycle = data.info["kind"] == "image" or not single_pass
        if not self.cycle and needed > self.available:
            raise ValueError(
                f"train.steps x train.batch_size = {needed} sequences exceed the {self.available} "
                f"single-pass windows of {data.name} at context {context}; lower the budget or set "
                f"train.single_pass: false"
            )
        self.order = self.rng.permutation(self.available)
        self.cursor = 0

    def state_dict(self) -> dict[str, Any]:
        """Where the stream is: its generator, the current order and the cursor (for resuming a run)."""
        return {"rng": self.rng.bit_generator.state, "order": self.order.copy(), "cursor": self.cursor}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.order, self.cursor = np.asarray(state["order"]), int(state["cursor"])

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.cursor + self.batch_size > len(self.order):
            if not self.cycle:
                raise RuntimeError("single-pass text stream exhausted")  # guarded in __init__
            self.order = np.concatenate([self.order[self.cursor :], self.rng.permutation(self.available)])
            self.cursor = 0
        positions = self.order[self.cursor : self.cursor + self.batch_size]
        self.cursor += self.batch_size
        examples = examples_at(self.data, "train", positions, self.context)
        return examples.inputs, examples.targets


def dump_examples(data: PreparedDataset, settings: dict[str, Any], context: int | None) -> tuple[Examples, np.ndarray]:
    """The examples a dump stores, train rows first, and their split labels."""
    parts = [
        fixed_examples(data, split, settings[f"{split}_examples"], settings["seed"], context)
        for split in ("train", "test")
    ]
    for split, part in zip(("train", "test"), parts):
        if len(part) == 0:  # a text split shorter than one window: the estimators would fail far from the cause
            raise DatasetError(
                f"dataset {data.name!r} ({data.folder}): its {split} split holds no example"
                + (f" (fewer than {context} + 1 tokens)" if context else "")
            )
    split = np.array(["train"] * len(parts[0]) + ["test"] * len(parts[1]), dtype=object)
    merged = Examples(
        torch.cat([p.inputs for p in parts]),
        torch.cat([p.targets for p in parts]),
        np.concatenate([p.index for p in parts]),
    )
    return merged, split
