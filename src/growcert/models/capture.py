"""Per-example activations z and activation gradients q = ∇_z ℓ(f_top(z), y) at insertion points.

One forward and one backward pass per batch: forward hooks on the model's `InsertionPoint`s keep
the stream tensors, the per-example losses are *summed* (so the gradient with respect to
example i's activation is the gradient of example i's own loss), and `torch.autograd.grad`
returns the gradients at exactly those tensors, without computing parameter gradients.

The model must be in eval mode: BatchNorm then uses its running statistics and no example
influences another, which is what makes q genuinely per example (checked against
single-example autograd in tests/test_capture.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from growcert.models import family_of


@dataclass
class Captured:
    """One batch: per point, z and q with shape (batch, *native), and the per-example losses."""

    z: dict[str, torch.Tensor]
    q: dict[str, torch.Tensor]
    loss: torch.Tensor


def insertion_points(model: nn.Module) -> tuple[str, ...]:
    return tuple(model.points.keys())


@contextmanager
def _keep_stream(model: nn.Module, names: tuple[str, ...]) -> Iterator[dict[str, torch.Tensor]]:
    kept: dict[str, torch.Tensor] = {}
    handles = []
    for name in names:

        def hook(module, inputs, output, name=name):
            kept[name] = output

        handles.append(model.points[name].register_forward_hook(hook))
    try:
        yield kept
    finally:
        for handle in handles:
            handle.remove()


def capture_batch(
    model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, points: tuple[str, ...] | None = None
) -> Captured:
    """z and q at `points` (default: all) for one batch; the model must be in eval mode."""
    if model.training:
        raise ValueError("capture needs the model in eval mode (BatchNorm would couple the examples)")
    names = points or insertion_points(model)
    unknown = [name for name in names if name not in model.points]
    if unknown:
        raise ValueError(f"unknown insertion point(s) {unknown}; the model has {list(model.points)}")
    with torch.enable_grad(), _keep_stream(model, names) as kept:
        losses = model.per_example_loss(model(inputs), targets)
        streams = [kept[name] for name in names]
        if not all(stream.requires_grad for stream in streams):
            # The graph reaches z only through parameters that require grad (frozen models cannot be captured).
            raise RuntimeError("insertion-point activations do not require grad; unfreeze the parameters")
        gradients = torch.autograd.grad(losses.sum(), streams)
    return Captured(
        z={name: stream.detach() for name, stream in zip(names, streams)},
        q={name: gradient.detach() for name, gradient in zip(names, gradients)},
        loss=losses.detach(),
    )


def native_dims(family: str, shape: tuple[int, ...]) -> tuple[str, ...]:
    """Dim names of one example's activation at a point: the family's (docs/design.md §5)."""
    dims = family_of(family).native_dims
    if len(dims) != len(shape):
        raise ValueError(f"family {family!r} streams have dims {dims}; got an activation of shape {shape}")
    return dims
