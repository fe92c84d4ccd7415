"""Per-example gradients by torch.func (vmap of grad): the materialised b × P reference.

What the hooks of `square_sums` reduce on the fly; kept for validation, for losses the hooks cannot
follow (input derivatives, as in the PINN's residual) and for stratified rows built from them.

`gradient_rows` is the same quantity as one flat numpy row per example, for the offline predictions of
`growcert advise` (`stats.update_gain`). It loops over examples with autograd instead of vmap: any model
the dump reads (a Hugging Face one included) goes through it unchanged, and on the CPU it is faster (attention
has no vmap rule there, so vmap loops too, with more overhead: 0.9 s against 2.7 s for 128 examples of the
default width-128 llama).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap


def per_example_gradients(
    model: nn.Module, loss_fn: Callable[..., Tensor], inputs: Tensor, *targets: Tensor, set_grad: bool = True
) -> tuple[Tensor, dict[Tensor, Tensor]]:
    """Per-example losses (b,) and gradients {parameter: (b, *shape)} by torch.func (vmap of grad).

    `loss_fn(outputs, *targets)` returns one loss per example, shape (batch,); it is evaluated on
    batches of one, so the model must not couple examples (no BatchNorm in train mode). With
    `set_grad`, each parameter's `.grad` becomes the batch mean of its per-example gradients, ready
    for `PopulationRiskAdam(variance="exact").step(per_example_grads=...)`.
    """
    named = {name: p for name, p in model.named_parameters() if p.requires_grad}
    params = {name: p.detach() for name, p in named.items()}
    buffers = {name: b.detach() for name, b in model.named_buffers()}

    def one_example_loss(params, example_input, *example_targets):
        outputs = functional_call(model, (params, buffers), (example_input.unsqueeze(0),))
        loss = loss_fn(outputs, *(t.unsqueeze(0) for t in example_targets)).sum()
        return loss, loss

    with warnings.catch_warnings():
        # attention has no vmap batching rule on CPU: torch loops over examples and says so each call
        warnings.filterwarnings("ignore", message="There is a performance drop")
        grads, losses = vmap(grad(one_example_loss, has_aux=True), in_dims=(None, 0) + (0,) * len(targets))(
            params, inputs, *targets
        )
    per_parameter = {named[name]: g for name, g in grads.items()}
    if set_grad:
        for p, g in per_parameter.items():
            p.grad = g.mean(dim=0)
    return losses.detach(), per_parameter


def gradient_rows(model: nn.Module, inputs: Tensor, targets: Tensor) -> np.ndarray:
    """(n, P) float32: row i is the gradient of example i's loss (`model.per_example_loss`) with respect to every
    parameter of `model` that requires a gradient, flattened in `named_parameters` order. The model is used as it
    is (its train or eval mode is the caller's); inputs and targets are on the model's device."""
    parameters = [p for p in model.parameters() if p.requires_grad]
    rows = np.empty((len(inputs), sum(p.numel() for p in parameters)), dtype=np.float32)
    for i in range(len(inputs)):
        loss = model.per_example_loss(model(inputs[i : i + 1]), targets[i : i + 1]).sum()
        gradients = torch.autograd.grad(loss, parameters, allow_unused=True)
        rows[i] = (
            torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for p, g in zip(parameters, gradients)])
            .float()
            .cpu()
            .numpy()
        )
    return rows


@torch.no_grad()
def model_drawn_targets(model: nn.Module, inputs: Tensor, seed: int, batch_size: int = 32) -> Tensor:
    """One label per target position drawn from the model's own prediction (softmax over the last dim of its outputs,
    the classes or the vocabulary), seeded: the gradient of the loss at such a label is an unbiased square root of
    the Gauss-Newton matrix (the Fisher) of the log-loss, E_y[f fᵀ] = Jᵀ(diag p − p pᵀ)J."""
    generator = torch.Generator(device=inputs.device).manual_seed(seed)
    drawn = []
    for start in range(0, len(inputs), batch_size):
        probabilities = torch.softmax(model(inputs[start : start + batch_size]).float(), dim=-1)
        flat = probabilities.reshape(-1, probabilities.shape[-1])
        drawn.append(torch.multinomial(flat, 1, generator=generator).reshape(probabilities.shape[:-1]))
    return torch.cat(drawn)
