"""Per-example gradients by torch.func (vmap of grad): the materialised b × P reference.

What the hooks of `square_sums` reduce on the fly; kept for validation, for losses the hooks cannot
follow (input derivatives, as in the PINN's residual) and for stratified rows built from them.
"""

from __future__ import annotations

import warnings
from typing import Callable

from torch import Tensor, nn
from torch.func import functional_call, grad, vmap


def per_example_gradients(model: nn.Module, loss_fn: Callable[..., Tensor], inputs: Tensor, *targets: Tensor,
                          set_grad: bool = True) -> tuple[Tensor, dict[Tensor, Tensor]]:
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
            params, inputs, *targets)
    per_parameter = {named[name]: g for name, g in grads.items()}
    if set_grad:
        for p, g in per_parameter.items():
            p.grad = g.mean(dim=0)
    return losses.detach(), per_parameter
