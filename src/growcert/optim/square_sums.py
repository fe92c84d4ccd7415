"""Exact per-example gradient sums of squares Σ_i g_ik² from layer hooks, and their micro-batch analogue.

The exact gate needs, per parameter element k, the variance of the batch-mean gradient, s_k²/b with

    s_k²/b = (Σ_i g_ik² − b·μ_k²) / (b(b − 1)),        μ_k = (1/b) Σ_i g_ik,

so Σ_i g_ik² is all it needs beyond the batch gradient. `per_example_square_sums` gets it from one
forward and one backward of Σ_i loss_i, with forward hooks keeping each layer's input x and
`autograd.grad` returning the gradient δ of the loss sum w.r.t. each layer's output in the same pass
as the parameters' batch gradient. Example i's gradient is then a function of (x_i, δ_i) alone:

- Linear (input (b, ..., in), the middle dimensions pooled into T positions, several calls of one
  layer appended as more positions): G_i = Σ_t δ_it x_itᵀ. For small T, Σ_i G_i² = Σ_{t,s} Σ_i
  (δ_it ⊙ δ_is)(x_it ⊙ x_is)ᵀ is one (out × b·T(T+1)/2) @ (b·T(T+1)/2 × in) matmul over the
  position pairs t ≤ s (off-diagonal pairs counted twice); positions where δ is zero for the whole
  batch are dropped first (the unused positions of a last-token loss). For larger T the per-example
  G_i are formed in chunks of examples (one bmm each) and squared. The crossover (pairs ≤ 2T + 16)
  weighs the pair matmul against the memory traffic of b × out × in chunk products;
  bias: Σ_t δ_it.
- Embedding: per example, δ summed over positions holding the same token (a scatter-add keyed by
  example × token), squared, then scattered into the token rows.
- RMSNorm / LayerNorm gains: Σ_t δ_it ⊙ x̂_it with x̂ the weight-free normalised input; LayerNorm's
  bias: Σ_t δ_it.
- Any other module with parameters (convolutions, BatchNorm in eval mode, ...), and a parameter shared
  by several modules: per-example gradients by torch.func (vmap of grad over the whole model, only
  for those parameters), in chunks of examples so that at most ~`FALLBACK_ELEMENTS` gradient elements
  exist at once.

Assumptions: examples do not interact (no train-mode BatchNorm) and every parameter reaches the loss
only through its module's forward output; a loss that differentiates through input derivatives (the
PINN's PDE residual) breaks the second and needs per-example gradients (`per_example_gradients`).
A hooked layer's output modified in place after its forward (inplace ReLU) is refused, since δ would
then belong to the modified tensor.

`microbatch_square_sums` is the same quantity for the K micro-batch means of a batch split for
gradient accumulation: Σ_j m_jk², whose (Σ_j m_j² − K·μ²)/(K(K − 1)) estimates the same variance of
the batch mean from K rows instead of b.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

HOOKED = (nn.Linear, nn.Embedding, nn.RMSNorm, nn.LayerNorm)
FALLBACK_ELEMENTS = 1 << 24  # per-example gradient elements the torch.func fallback holds at once
DIRECT_ELEMENTS = 1 << 22  # per-example Linear gradient elements one chunk of the direct path holds


@dataclass
class SquareSums:
    """Σ_j z_jk² over the `rows` rows z_j (per-example gradients or micro-batch means) whose mean is
    each parameter's `.grad`; what `PopulationRiskAdam.step(square_sums=...)` takes."""

    sums: dict[Tensor, Tensor]
    rows: int

    def variance_of_mean(self, p: Tensor) -> Tensor:
        """s²/rows, the unbiased variance of the mean row, per element (clamped at 0 against rounding)."""
        n = self.rows
        return torch.addcmul(self.sums[p], p.grad, p.grad, value=-n).clamp_min_(0.0).div_(n * (n - 1))


def _pair_square_sum(delta: Tensor, x: Tensor) -> Tensor:
    """Σ_i (Σ_t δ_it x_itᵀ)² for δ (b, T, out), x (b, T, in), choosing the cheaper exact path."""
    live = delta.abs().amax(dim=(0, 2)) > 0  # positions where some example has some gradient
    if not bool(live.all()):
        delta, x = delta[:, live], x[:, live]
    b, positions, out_features, in_features = delta.shape[0], delta.shape[1], delta.shape[2], x.shape[2]
    if positions == 0:
        return delta.new_zeros(out_features, in_features)
    if positions * (positions + 1) // 2 <= 2 * positions + 16:
        # the diagonal pairs t = s in one matmul over all b·T rows, then for each t the pairs s > t at once
        total = delta.square().reshape(-1, out_features).T @ x.square().reshape(-1, in_features)
        for t in range(positions - 1):
            later = positions - t - 1
            left = (delta[:, t + 1 :] * delta[:, t : t + 1]).reshape(b * later, out_features)
            right = (x[:, t + 1 :] * x[:, t : t + 1]).reshape(b * later, in_features)
            total.addmm_(left.T, right, alpha=2.0)
        return total
    chunk = max(1, DIRECT_ELEMENTS // (out_features * in_features))
    total = delta.new_zeros(out_features, in_features)
    for start in range(0, b, chunk):
        per_example = torch.bmm(delta[start : start + chunk].transpose(1, 2), x[start : start + chunk])
        total += per_example.square_().sum(dim=0)
    return total


def _along_positions(tensors: list[Tensor], trailing: int) -> Tensor:
    """Each (b, ..., *trailing dims) call as (b, T, features), the calls appended along T."""
    flat = [_positions(t, trailing) for t in tensors]
    return flat[0] if len(flat) == 1 else torch.cat(flat, dim=1)


def _positions(tensor: Tensor, trailing: int) -> Tensor:
    """(b, ..., *trailing dims) -> (b, T, prod(trailing dims))."""
    b = tensor.shape[0]
    features = 1
    for size in tensor.shape[tensor.dim() - trailing :]:
        features *= size
    return tensor.reshape(b, -1, features)


def _module_square_sums(module: nn.Module, inputs: list[Tensor], deltas: list[Tensor]) -> dict[str, Tensor]:
    """{parameter name: Σ_i g_i²} of one hooked module from its calls' inputs and output gradients."""
    sums = {}
    if isinstance(module, nn.Embedding):
        weight = module.weight
        tokens = torch.cat([t.reshape(t.shape[0], -1) for t in inputs], dim=1)  # (b, T)
        delta = _along_positions(deltas, 1)  # (b, T, d)
        rows = module.num_embeddings
        keys = (torch.arange(tokens.shape[0], device=tokens.device)[:, None] * rows + tokens).reshape(-1)
        unique, inverse = torch.unique(keys, return_inverse=True)
        per_example_rows = delta.new_zeros(len(unique), delta.shape[2]).index_add_(
            0, inverse, delta.reshape(-1, delta.shape[2])
        )
        total = delta.new_zeros(rows, delta.shape[2]).index_add_(0, unique % rows, per_example_rows.square_())
        if module.padding_idx is not None:
            total[module.padding_idx] = 0.0  # the layer's backward never writes the padding row
        sums["weight"] = total.reshape(weight.shape)
        return sums
    if isinstance(module, nn.Linear):
        x = _along_positions(inputs, 1)
        delta = _along_positions(deltas, 1)
        sums["weight"] = _pair_square_sum(delta, x)
        if module.bias is not None:
            sums["bias"] = delta.sum(dim=1).square().sum(dim=0)
        return sums
    # RMSNorm / LayerNorm over the trailing normalized_shape
    shape = tuple(module.normalized_shape)
    if isinstance(module, nn.RMSNorm):
        normalised = [F.rms_norm(t, shape, None, module.eps) for t in inputs]
    else:
        normalised = [F.layer_norm(t, shape, None, None, module.eps) for t in inputs]
    x_hat = _along_positions(normalised, len(shape))
    delta = _along_positions(deltas, len(shape))
    if module.weight is not None:
        sums["weight"] = (delta * x_hat).sum(dim=1).square().sum(dim=0).reshape(shape)
    if getattr(module, "bias", None) is not None:
        sums["bias"] = delta.sum(dim=1).square().sum(dim=0).reshape(shape)
    return sums


def _hookable(module: nn.Module) -> bool:
    if type(module) not in HOOKED:
        return False
    if isinstance(module, nn.Embedding) and (module.max_norm is not None or module.sparse):
        return False  # max_norm renormalises the weight in place; sparse gradients are refused anyway
    return True


def per_example_square_sums(
    model: nn.Module, loss_fn: Callable[..., Tensor], inputs: Tensor, *targets: Tensor, set_grad: bool = True
) -> tuple[Tensor, SquareSums]:
    """Per-example losses (b,) and Σ_i g_i² per parameter element from one forward and one backward.

    `loss_fn(outputs, *targets)` returns one loss per example, shape (b,). With `set_grad`, each
    parameter's `.grad` becomes the batch-mean gradient (1/b)·∇Σ_i loss_i, so that
    `PopulationRiskAdam(variance="exact").step(square_sums=...)` can follow directly.
    """
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    owners: dict[Tensor, list[nn.Module]] = {}
    for module in model.modules():
        for p in module.parameters(recurse=False):
            if p.requires_grad:
                owners.setdefault(p, []).append(module)
    hooked = [
        m
        for m in model.modules()
        if _hookable(m)
        and all(len(owners[p]) == 1 for p in m.parameters(recurse=False) if p.requires_grad)
        and any(p.requires_grad for p in m.parameters(recurse=False))
    ]
    hooked_params = {p for m in hooked for p in m.parameters(recurse=False) if p.requires_grad}
    calls: dict[nn.Module, list[tuple[Tensor, Tensor, int]]] = {m: [] for m in hooked}

    def keep(module, args, output):
        calls[module].append((args[0].detach(), output, output._version))

    handles = [m.register_forward_hook(keep) for m in hooked]
    try:
        losses = loss_fn(model(inputs), *targets)
    finally:
        for handle in handles:
            handle.remove()
    b = inputs.shape[0]
    if losses.shape != (b,):
        raise ValueError(f"loss_fn must return one loss per example, shape ({b},), got {tuple(losses.shape)}")
    outputs = [output for m in hooked for _, output, _ in calls[m]]
    for m in hooked:
        for _, output, version in calls[m]:
            if output._version != version:
                raise RuntimeError(
                    f"the output of {type(m).__name__} was modified in place after its forward "
                    "(e.g. an inplace ReLU); its per-example gradients cannot be read from hooks"
                )
    params = [p for _, p in named]
    gradients = torch.autograd.grad(losses.sum(), outputs + params, allow_unused=True)
    output_grads = dict(zip(map(id, outputs), gradients[: len(outputs)]))
    sums: dict[Tensor, Tensor] = {}
    with torch.no_grad():
        for m in hooked:
            inputs_seen = [x for x, _, _ in calls[m]]
            deltas = [
                output_grads[id(output)] if output_grads[id(output)] is not None else torch.zeros_like(output)
                for _, output, _ in calls[m]
            ]
            for name, total in _module_square_sums(m, inputs_seen, deltas).items():
                sums[getattr(m, name)] = total
        for p in params:
            if p in hooked_params and p not in sums:
                sums[p] = torch.zeros_like(p)
        fallback = [(name, p) for name, p in named if p not in hooked_params]
        if fallback:
            sums.update(_fallback_square_sums(model, loss_fn, inputs, targets, fallback))
    if set_grad:
        for p, batch_sum in zip(params, gradients[len(outputs) :]):
            p.grad = torch.zeros_like(p) if batch_sum is None else batch_sum / b
    return losses.detach(), SquareSums(sums, b)


def _fallback_square_sums(model, loss_fn, inputs, targets, fallback) -> dict[Tensor, Tensor]:
    """Σ_i g_i² for the `fallback` (name, parameter) pairs by torch.func, in chunks of examples."""
    chosen = {name: p.detach() for name, p in fallback}
    fixed = {name: p.detach() for name, p in model.named_parameters() if name not in chosen}
    buffers = {name: buffer.detach() for name, buffer in model.named_buffers()}

    def one_example_loss(chosen, example_input, *example_targets):
        outputs = functional_call(model, ({**fixed, **chosen}, buffers), (example_input.unsqueeze(0),))
        return loss_fn(outputs, *(t.unsqueeze(0) for t in example_targets)).sum()

    per_example = vmap(grad(one_example_loss), in_dims=(None, 0) + (0,) * len(targets))
    elements = sum(p.numel() for _, p in fallback)
    chunk = max(1, FALLBACK_ELEMENTS // elements)
    totals = {name: torch.zeros_like(p) for name, p in chosen.items()}
    for start in range(0, inputs.shape[0], chunk):
        with torch.enable_grad():
            grads = per_example(chosen, inputs[start : start + chunk], *(t[start : start + chunk] for t in targets))
        for name, g in grads.items():
            totals[name] += g.square().sum(dim=0)
    return {p: totals[name] for name, p in fallback}


def microbatch_square_sums(
    model: nn.Module, loss_fn: Callable[..., Tensor], inputs: Tensor, *targets: Tensor, microbatches: int
) -> tuple[Tensor, SquareSums]:
    """Split the batch into K equal micro-batches (gradient accumulation), backward each one's mean loss.

    Returns the per-example losses (b,) and Σ_j m_j² over the K micro-batch mean gradients m_j; each
    parameter's `.grad` becomes their mean, which is the batch-mean gradient. Extra memory: one
    transient vector per parameter for the sum of squares, and one for the running sum.
    """
    b = inputs.shape[0]
    if microbatches < 2 or b % microbatches:
        raise ValueError(f"microbatches must be >= 2 and divide the batch of {b}, got microbatches={microbatches}")
    size = b // microbatches
    params = [p for p in model.parameters() if p.requires_grad]
    totals = [torch.zeros_like(p) for p in params]
    squares = [torch.zeros_like(p) for p in params]
    losses = []
    for start in range(0, b, size):
        for p in params:
            p.grad = None
        part = loss_fn(model(inputs[start : start + size]), *(t[start : start + size] for t in targets))
        part.mean().backward()
        losses.append(part.detach())
        with torch.no_grad():
            micro = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
            torch._foreach_add_(totals, micro)
            torch._foreach_addcmul_(squares, micro, micro)
    torch._foreach_div_(totals, microbatches)
    for p, mean in zip(params, totals):
        p.grad = mean
    return torch.cat(losses), SquareSums(dict(zip(params, squares)), microbatches)
