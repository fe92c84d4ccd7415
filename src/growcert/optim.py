"""Population-risk training: Adam gated by an unbiased test of the population gradient (PAPERS.md P2).

Per parameter element k, with batch size b, batch-mean gradient μ_k and per-example
batch variance σ_k² (divisor b), the update of element k is applied only where

    μ_k² > σ_k² / (b − 1)      ⇔      μ_k² − s_k²/b > 0      (s² with divisor b − 1),

i.e. where the unbiased estimate of the squared *population* gradient is positive.
`s²/b` is the variance of the batch mean, so the gate asks "is the signal bigger
than its own noise?". Under pure noise it still opens on the ~32 % of elements
where |t| > 1: it is an unbiased positivity test, not a significance test.

Two sources of s²/b ("variance" option):

exact      per-example gradients (see `per_example_gradients`, torch.func vmap) passed to
           `step(per_example_grads=...)`; s²/b computed from them. For validation and small models.
streaming  (default) one extra state vector `noise_ratio`, no per-example gradients. It estimates
           V_t = Var[g_t], the variance of the minibatch-mean gradient across independently drawn
           batches, which is what s²/b estimates (σ²/(b−1) = s²/b, and s² ≈ b·V). Each step t ≥ 2:

               d_t   = g_t − m̂_{t−1}                        m̂: Adam's bias-corrected first moment
               ρ    ← β_v·ρ + (1 − β_v)·d_t² / (c_t·v̂_t)      v̂: Adam's bias-corrected second moment
               V̂_t   = ρ / (1 − β_v^{t−1}) · v̂_t · N/(N − b)
               open  = g_t² > V̂_t

           Why each piece. m̂_{t−1} averages the t−1 previous gradients with weights wᵢ summing to one,
           independently of g_t, so under stationarity E[d_t²] = V·(1 + Σwᵢ²) = V·c_t, with
           c_t = 1 + (1−β₁)(1+β₁ⁿ) / ((1+β₁)(1−β₁ⁿ)), n = t−1 (exact at every t; → 2/(1+β₁)).
           ρ is the EMA of the noise *fraction* V/E[g²]; multiplying it back by the current v̂ makes
           V̂ follow the gradient's scale. A plain EMA of d² (the first design) remembers the larger
           noise of earlier steps when the scale collapses, as after memorisation in grokking: there
           it closed 98–99.6 % of elements where the exact gate closed 76 %. Under stationarity V̂ is
           unbiased up to the Jensen factor of 1/v̂ (≈ 1 + 2(1−β₂)/(1+β₂), 1 % at β₂ = 0.98).
           N/(N − b) (optional: train_size N, batch_size b) undoes the finite-population correction
           of batches drawn without replacement from N examples: Var[batch mean] = (S²/b)(N − b)/N,
           while the exact variant's s²/b estimates S²/b. β_v defaults to β₂.
           Assumptions: batches drawn independently each step (epoch shuffling makes successive
           batch means negatively correlated); the noise fraction changes little over the
           ~(1+β_v)/(1−β_v) steps of ρ's window; the mean gradient drifts little over the
           ~(1+β₁)/(1−β₁) steps of the centre's window (drift inflates V̂ and closes the gate more).
           Full-batch training shows no batch noise to measure: use `exact` there.
           Measured on grokking (a/b mod 47, b = 512): with the parameters frozen, V̂ matches the
           exact s²/b (median ratio 0.98, both gates close 76 %); *during* training after
           memorisation V̂ is ~4x s²/b and closes ~98 %: the training gradient itself moves from
           step to step faster than the centre's window, and a streaming estimate cannot tell that
           motion from sampling noise. The exact gate sees sampling noise only.
           Step 1 has no variance estimate yet and is a plain Adam step (gate open).

Moments: Adam's m and v update from every gradient, gated or not. They are estimators of the
gradient stream's statistics; updating them only where the gate opened would select on the
gradient's own value and bias both upward in magnitude, and m must see every gradient to serve
as the streaming variance's centre. The gate masks only the parameter update (the bias-corrected
Adam direction), so with the gate open everywhere the step is bitwise torch's Adam / AdamW.
Decoupled weight decay (AdamW, Loshchilov & Hutter 2019) is applied to every element: it is a
deterministic regulariser, not a noisy data estimate, so a noise test has nothing to say about it.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from typing import Callable, Iterable, Mapping

import torch
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

VARIANCE_SOURCES = ("streaming", "exact")


class PopulationRiskAdam(torch.optim.Optimizer):
    """Adam (AdamW when weight_decay > 0) whose per-element update is gated by μ² > s²/b.

    Extra options beyond Adam's: `variance` ("streaming" or "exact"), `batch_size` and `train_size`
    (finite-population correction of the streaming estimate, both needed for it), `variance_beta`
    (EMA factor of the streaming variance; None uses β₂), `gate` (False: plain Adam/AdamW steps while
    the gate statistics are still computed and logged), `foreach` (None: batch tensors by device and
    dtype into torch._foreach ops; False: one tensor at a time). After each step
    `last_gated_fraction` is the fraction of elements whose update was blocked (or would have been,
    with gate=False) and `last_open` maps each stepped parameter to its boolean gate.
    """

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, variance: str = "streaming",
                 batch_size: int | None = None, train_size: int | None = None, variance_beta: float | None = None,
                 gate: bool = True, foreach: bool | None = None):
        if not lr >= 0.0:
            raise ValueError(f"PopulationRiskAdam lr must be >= 0, got lr={lr}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"PopulationRiskAdam betas must lie in [0, 1), got betas={betas}")
        if not eps >= 0.0 or not weight_decay >= 0.0:
            raise ValueError(f"PopulationRiskAdam eps and weight_decay must be >= 0, got eps={eps}, "
                             f"weight_decay={weight_decay}")
        if variance not in VARIANCE_SOURCES:
            raise ValueError(f"PopulationRiskAdam variance must be one of {VARIANCE_SOURCES}, got variance={variance!r}")
        if variance_beta is not None and not 0.0 <= variance_beta < 1.0:
            raise ValueError(f"PopulationRiskAdam variance_beta must lie in [0, 1), got {variance_beta}")
        if train_size is not None:
            if batch_size is None:
                raise ValueError("PopulationRiskAdam train_size needs batch_size (finite-population correction)")
            if variance == "streaming" and batch_size >= train_size:
                raise ValueError(f"streaming variance needs sampled minibatches, but batch_size={batch_size} >= "
                                 f"train_size={train_size} (full batch: no batch noise to observe); "
                                 "use variance='exact'")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, variance=variance,
                        batch_size=batch_size, train_size=train_size, variance_beta=variance_beta, gate=gate,
                        foreach=foreach)
        super().__init__(params, defaults)
        self._last_masks: dict[Tensor, Tensor] = {}  # {parameter: 0/1 mask} of the last step

    @property
    def last_gated_fraction(self) -> float | None:
        """Fraction of parameter elements whose update the gate blocked at the last step (None before one)."""
        if not self._last_masks:
            return None
        # counted on demand from the kept masks, so steps that nobody logs pay nothing for it
        masks = list(self._last_masks.values())
        opened = torch.stack(torch._foreach_norm(masks, 1)).double().sum().item()
        return 1.0 - opened / sum(mask.numel() for mask in masks)

    @property
    def last_open(self) -> dict[Tensor, Tensor]:
        """{parameter: boolean tensor}, True where the last step's gate was open."""
        return {p: mask.bool() for p, mask in self._last_masks.items()}

    @torch.no_grad()
    def step(self, closure: Callable[[], Tensor] | None = None,
             per_example_grads: Mapping[Tensor, Tensor] | None = None) -> Tensor | None:
        """One gated Adam step from each parameter's `.grad` (the batch-mean gradient μ).

        `per_example_grads` maps a parameter to its per-example gradients, shape (b, *param.shape);
        groups with variance="exact" need it (see `per_example_gradients`), streaming groups refuse it.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._last_masks = {}
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            for p in params:
                if p.grad.is_sparse or p.is_complex():
                    raise RuntimeError("PopulationRiskAdam supports dense real gradients only")
            if group["variance"] == "exact":
                if per_example_grads is None:
                    raise ValueError("variance='exact' needs step(per_example_grads={param: (b, *shape) tensor}); "
                                     "see growcert.optim.per_example_gradients")
                missing = [tuple(p.shape) for p in params if p not in per_example_grads]
                if missing:
                    raise KeyError(f"per_example_grads lacks parameters of shapes {missing}")
            elif per_example_grads is not None:
                raise ValueError("per_example_grads given to a variance='streaming' group; "
                                 "build the optimizer with variance='exact' to use them")
            # Buckets of one device and dtype share foreach kernels; foreach=False steps tensors one by one.
            buckets: dict[tuple, list[Tensor]] = defaultdict(list)
            for index, p in enumerate(params):
                key = (p.device, p.dtype) if group["foreach"] is not False else (index,)
                buckets[key].append(p)
            for bucket in buckets.values():
                self._step_bucket(group, bucket, per_example_grads)
        return loss

    def _step_bucket(self, group: dict, params: list[Tensor], per_example_grads) -> None:
        beta1, beta2 = group["betas"]
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        grads = [p.grad for p in params]
        states = [self.state[p] for p in params]
        for p, state in zip(params, states):
            if not state:
                state["step"] = 0
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                if group["variance"] == "streaming":
                    state["noise_ratio"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["step"] += 1
        step = states[0]["step"]
        if any(state["step"] != step for state in states):
            raise RuntimeError("parameters of one group were stepped different numbers of times")
        exp_avgs = [state["exp_avg"] for state in states]
        exp_avg_sqs = [state["exp_avg_sq"] for state in states]
        streaming = group["variance"] == "streaming"
        if streaming and step > 1:
            # d = g − m/(1 − β₁ⁿ): deviation from the bias-corrected mean of the n = t − 1 previous
            # gradients, taken before m moves so that the centre is independent of g
            deviations = torch._foreach_add(grads, exp_avgs, alpha=-1.0 / (1 - beta1 ** (step - 1)))

        # --- Adam's moments, as torch.optim.Adam's foreach path computes them (same order: bitwise equal)
        if weight_decay != 0:
            torch._foreach_mul_(params, 1 - lr * weight_decay)
        torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)

        # --- the gate: open where g² exceeds the estimated variance of the batch mean
        if not streaming:
            noise, scale = self._exact_noise(params, per_example_grads), 1.0
        elif step > 1:
            noise, scale = self._streaming_noise(group, states, deviations, exp_avg_sqs, step)
        if streaming and step == 1:
            masks = [torch.ones_like(g) for g in grads]  # nothing to test against yet: a plain Adam step
        else:
            margins = torch._foreach_mul(noise, -scale)  # g² − scale·noise in two passes, one allocation
            torch._foreach_addcmul_(margins, grads, grads)
            # sign -> {-1, 0, 1}, clamp -> {0, 1}: an exact 0/1 mask built with foreach kernels (strict >)
            torch._foreach_sign_(margins)
            masks = torch._foreach_clamp_min(margins, 0.0)
        self._last_masks.update(zip(params, masks))

        # --- the gated Adam update
        bias_correction1 = 1 - beta1 ** step
        bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
        denoms = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_div_(denoms, bias_correction2_sqrt)
        torch._foreach_add_(denoms, eps)
        # Masking m (exact: x·1 = x, x·0 = 0) before addcdiv keeps the open elements bitwise Adam's.
        directions = torch._foreach_mul(exp_avgs, masks) if group["gate"] else exp_avgs
        torch._foreach_addcdiv_(params, directions, denoms, (lr / bias_correction1) * -1)

    @staticmethod
    def _exact_noise(params: list[Tensor], per_example_grads) -> list[Tensor]:
        """s²/b per element from the per-example gradients."""
        noise = []
        for p in params:
            examples = per_example_grads[p]
            if examples.shape[1:] != p.shape or examples.shape[0] < 2:
                raise ValueError(f"per-example gradients of a {tuple(p.shape)} parameter must have shape "
                                 f"(b >= 2, {', '.join(map(str, p.shape))}), got {tuple(examples.shape)}")
            b = examples.shape[0]
            # two-pass s² written out: torch.var over dim 0 is ~8x slower on CPU (strided Welford)
            deviations = examples - examples.mean(dim=0)
            noise.append(deviations.square_().sum(dim=0).div_((b - 1) * b).to(p.dtype))
        return noise

    @staticmethod
    def _streaming_noise(group, states, deviations, exp_avg_sqs, step) -> tuple[list[Tensor], float]:
        """V̂ = scale · ρ · v̂ per element (see the module docstring); updates the noise_ratio state."""
        beta1, beta2 = group["betas"]
        beta_v = group["variance_beta"] if group["variance_beta"] is not None else beta2
        n = step - 1  # gradients averaged into the centre; also the number of ratio updates so far
        # c = 1 + Σ wᵢ² for the centre's normalised EMA weights: E[d²] = c·V under stationarity
        center_share = (1 - beta1) * (1 + beta1 ** n) / ((1 + beta1) * (1 - beta1 ** n))
        # v̂ (bias-corrected, including g_t) plus a floor so never-touched elements give 0/floor = 0
        second_moments = torch._foreach_div(exp_avg_sqs, 1 - beta2 ** step)
        torch._foreach_add_(second_moments, max(group["eps"] ** 2, 1e-30))
        ratios = torch._foreach_mul(deviations, deviations)
        torch._foreach_div_(ratios, second_moments)
        noise_ratios = [state["noise_ratio"] for state in states]
        torch._foreach_mul_(noise_ratios, beta_v)
        torch._foreach_add_(noise_ratios, ratios, alpha=(1 - beta_v) / (1 + center_share))
        torch._foreach_mul_(second_moments, noise_ratios)  # now ρ·v̂, up to the scale below
        scale = 1.0 / (1 - beta_v ** n)
        if group["train_size"] is not None:
            scale *= group["train_size"] / (group["train_size"] - group["batch_size"])
        return second_moments, scale

    def per_example_variance(self) -> dict[Tensor, Tensor]:
        """Streaming estimate of each element's per-example gradient variance s² = b·V̂ at the last step
        (groups with batch_size set; parameters stepped at least twice)."""
        estimates = {}
        for group in self.param_groups:
            if group["variance"] != "streaming" or group["batch_size"] is None:
                continue
            beta2 = group["betas"][1]
            beta_v = group["variance_beta"] if group["variance_beta"] is not None else beta2
            for p in group["params"]:
                state = self.state.get(p)
                if state and state["step"] >= 2:
                    step = state["step"]
                    scale = group["batch_size"] / (1 - beta_v ** (step - 1))
                    if group["train_size"] is not None:
                        scale *= group["train_size"] / (group["train_size"] - group["batch_size"])
                    second_moment = state["exp_avg_sq"] / (1 - beta2 ** step) + max(group["eps"] ** 2, 1e-30)
                    estimates[p] = state["noise_ratio"] * second_moment * scale
        return estimates


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
