"""Plain helpers shared by several test files (imported as `from helpers import ...`; pytest puts tests/
on the path): exactness checks against single-example autograd."""

import numpy as np
import torch


def single_example(model, inputs, target, point):
    """z and ∇_z of one example's loss, computed with that example alone in the batch."""
    kept = {}
    handle = model.points[point].register_forward_hook(lambda module, args, output: kept.setdefault("z", output))
    try:
        loss = model.per_example_loss(model(inputs[None]), target[None]).sum()
        (gradient,) = torch.autograd.grad(loss, kept["z"])
    finally:
        handle.remove()
    return kept["z"][0].detach(), gradient[0]


def relative_error(a, b):
    """‖a − b‖ / ‖b‖ in float64 (b = 0 counts as a tiny norm, not a division by zero)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))
