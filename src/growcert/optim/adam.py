"""PopulationRiskAdam: Adam whose per-element step is gated by μ² > s²/b (P2; docs/science.md,
"PopulationRiskAdam (P2's optimiser, optim/)").

The readings (`gate`), the variance sources (`variance`) and what each costs are described in
`growcert.optim`'s docstring and docs/science.md; this module holds the arithmetic.

Streaming variance, in detail. Each step t ≥ 2, with m̂, v̂ the bias-corrected first and second
moments of the *raw* gradient stream (Adam's own moments under gate="update"/"off"; two extra
vectors under gate="gradient", where Adam's moments see the masked gradient):

    d_t   = g_t − m̂_{t−1}
    ρ    ← β_v·ρ + (1 − β_v)·d_t² / (c_t·v̂_t)
    V̂_t   = ρ / (1 − β_v^{t−1}) · v̂_t · N/(N − b)
    open  = g_t² > V̂_t

m̂_{t−1} averages the t−1 previous gradients with weights wᵢ summing to one, independently of g_t,
so under stationarity E[d_t²] = V·(1 + Σwᵢ²) = V·c_t, c_t = 1 + (1−β₁)(1+β₁ⁿ)/((1+β₁)(1−β₁ⁿ)),
n = t−1. ρ is the EMA of the noise *fraction* V/E[g²]; multiplying it back by the current v̂ makes
V̂ follow the gradient's scale (a plain EMA of d² remembered the larger noise of earlier steps when
the scale collapsed after memorisation in grokking, closing 98–99.6 % of elements where the exact
gate closed 76 %). N/(N − b) (train_size N, batch_size b) undoes the finite-population correction
of batches drawn without replacement. β_v defaults to β₂. It assumes independent batches and a
mean gradient that drifts little over the centre's window: drift counts as noise. Measured on
grokking (a/b mod 47, b = 512): with the parameters frozen V̂ matches s²/b (median ratio 0.98);
during training after memorisation V̂ is ~4× s²/b and closes ~98 %. Step 1 is a plain Adam step.

Microbatch variance: from the K micro-batch means m_j at the same parameters,
V_t = (Σ_j m_j² − K·μ²)/(K(K − 1)) is unbiased for the variance of the batch mean whatever the
drift between steps; ν ← β_v·ν + (1 − β_v)·V_t smooths its K − 1 degrees of freedom, and
V̂_t = ν/(1 − β_vᵗ) removes the zero start (unbiased under stationarity).

Bitwise: the moment updates follow torch.optim.Adam's foreach path op for op, and a 0/1 mask
multiplies exactly, so an everywhere-open gate reproduces torch's Adam / AdamW bit for bit.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping

import torch
from torch import Tensor

from growcert.optim.square_sums import SquareSums

GATE_READINGS = ("update", "gradient", "off")
VARIANCE_SOURCES = ("exact", "streaming", "microbatch")
LEGACY_GATE = {True: "update", False: "off"}  # the boolean `gate` of earlier versions (and their checkpoints)


def gate_reading(group: dict) -> str:
    gate = group["gate"]
    return LEGACY_GATE[gate] if isinstance(gate, bool) else gate


class PopulationRiskAdam(torch.optim.Optimizer):
    """Adam (AdamW when weight_decay > 0) gated per element by μ² > s²/b, in a named reading.

    gate: "update" (moments see every gradient, the gate masks the step), "gradient" (moments see
    g ⊙ 1[open]), "off" (plain Adam/AdamW, the gate still computed and logged).
    variance: "exact" (step(square_sums=per_example_square_sums(...)[1]) or per_example_grads),
    "streaming" (from successive batches), "microbatch" (step(square_sums=microbatch_square_sums(...)[1])
    with `microbatches` = K rows). batch_size/train_size: the streaming finite-population correction.
    variance_beta: EMA factor of the streaming and microbatch estimates (None: β₂). noise_multiplier:
    the gate compares μ² with noise_multiplier·s²/b; 1 is the paper's untuned gate and the only value
    the pipeline uses, 0 opens every element with a nonzero gradient (for checks). foreach: None
    batches tensors into torch._foreach ops, False steps them one by one.
    """

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        gate: str | bool = "update",
        variance: str = "streaming",
        microbatches: int | None = None,
        batch_size: int | None = None,
        train_size: int | None = None,
        variance_beta: float | None = None,
        noise_multiplier: float = 1.0,
        foreach: bool | None = None,
    ):
        gate = LEGACY_GATE[gate] if isinstance(gate, bool) else gate
        if not lr >= 0.0:
            raise ValueError(f"PopulationRiskAdam lr must be >= 0, got lr={lr}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"PopulationRiskAdam betas must lie in [0, 1), got betas={betas}")
        if not eps >= 0.0 or not weight_decay >= 0.0 or not noise_multiplier >= 0.0:
            raise ValueError(
                f"PopulationRiskAdam eps, weight_decay and noise_multiplier must be >= 0, got eps={eps}, "
                f"weight_decay={weight_decay}, noise_multiplier={noise_multiplier}"
            )
        if gate not in GATE_READINGS:
            raise ValueError(f"PopulationRiskAdam gate must be one of {GATE_READINGS}, got gate={gate!r}")
        if variance not in VARIANCE_SOURCES:
            raise ValueError(
                f"PopulationRiskAdam variance must be one of {VARIANCE_SOURCES}, got variance={variance!r}"
            )
        if (variance == "microbatch") != (microbatches is not None):
            raise ValueError(
                "PopulationRiskAdam microbatches=K goes with variance='microbatch' (and only with it), "
                f"got variance={variance!r}, microbatches={microbatches!r}"
            )
        if microbatches is not None and not (isinstance(microbatches, int) and microbatches >= 2):
            raise ValueError(f"PopulationRiskAdam microbatches must be an integer >= 2, got {microbatches!r}")
        if variance_beta is not None and not 0.0 <= variance_beta < 1.0:
            raise ValueError(f"PopulationRiskAdam variance_beta must lie in [0, 1), got {variance_beta}")
        if train_size is not None:
            if batch_size is None:
                raise ValueError("PopulationRiskAdam train_size needs batch_size (finite-population correction)")
            if variance == "streaming" and batch_size >= train_size:
                raise ValueError(
                    f"streaming variance needs sampled minibatches, but batch_size={batch_size} >= "
                    f"train_size={train_size} (full batch: no batch noise to observe); "
                    "use variance='exact' or 'microbatch'"
                )
        defaults = dict(
            lr=lr,
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            gate=gate,
            variance=variance,
            microbatches=microbatches,
            batch_size=batch_size,
            train_size=train_size,
            variance_beta=variance_beta,
            noise_multiplier=noise_multiplier,
            foreach=foreach,
        )
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
    def last_open_fraction(self) -> float | None:
        """Fraction of parameter elements whose gate was open at the last step (None before one)."""
        gated = self.last_gated_fraction
        return None if gated is None else 1.0 - gated

    @property
    def last_open(self) -> dict[Tensor, Tensor]:
        """{parameter: boolean tensor}, True where the last step's gate was open."""
        return {p: mask.bool() for p, mask in self._last_masks.items()}

    @torch.no_grad()
    def step(
        self,
        closure: Callable[[], Tensor] | None = None,
        per_example_grads: Mapping[Tensor, Tensor] | None = None,
        square_sums: SquareSums | None = None,
    ) -> Tensor | None:
        """One gated Adam step from each parameter's `.grad` (the batch-mean gradient μ).

        exact groups take `square_sums` (rows = b examples, from `per_example_square_sums`) or
        `per_example_grads` {parameter: (b, *shape)}; microbatch groups take `square_sums` with
        rows = K (from `microbatch_square_sums`); streaming groups take neither.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._last_masks = {}
        for group in self.param_groups:
            # groups restored from checkpoints of earlier versions lack the newer options
            group.setdefault("microbatches", None)
            group.setdefault("noise_multiplier", 1.0)
            params = [p for p in group["params"] if p.grad is not None]
            for p in params:
                if p.grad.is_sparse or p.is_complex():
                    raise RuntimeError("PopulationRiskAdam supports dense real gradients only")
            self._check_rows(group, params, per_example_grads, square_sums)
            # Buckets of one device and dtype share foreach kernels; foreach=False steps tensors one by one.
            buckets: dict[tuple, list[Tensor]] = defaultdict(list)
            for index, p in enumerate(params):
                key = (p.device, p.dtype) if group["foreach"] is not False else (index,)
                buckets[key].append(p)
            for bucket in buckets.values():
                self._step_bucket(group, bucket, per_example_grads, square_sums)
        return loss

    @staticmethod
    def _check_rows(group, params, per_example_grads, square_sums) -> None:
        variance = group["variance"]
        if per_example_grads is not None and square_sums is not None:
            raise ValueError("give step() per_example_grads or square_sums, not both")
        given = (
            "per_example_grads" if per_example_grads is not None else "square_sums" if square_sums is not None else None
        )
        if variance == "streaming" and given:
            raise ValueError(
                f"{given} given to a variance='streaming' group; build the optimizer with "
                "variance='exact' or 'microbatch' to use them"
            )
        if variance == "exact" and not given:
            raise ValueError(
                "variance='exact' needs step(square_sums=...) from growcert.optim.per_example_square_sums "
                "(or per_example_grads={param: (b, *shape) tensor})"
            )
        if variance == "microbatch":
            if square_sums is None:
                raise ValueError(
                    "variance='microbatch' needs step(square_sums=...) from growcert.optim.microbatch_square_sums"
                )
            if square_sums.rows != group["microbatches"]:
                raise ValueError(
                    f"square_sums has {square_sums.rows} rows, the optimizer was built with "
                    f"microbatches={group['microbatches']}"
                )
        rows = per_example_grads if per_example_grads is not None else square_sums.sums if square_sums else None
        if rows is not None and variance != "streaming":
            missing = [tuple(p.shape) for p in params if p not in rows]
            if missing:
                raise KeyError(f"{given} lacks parameters of shapes {missing}")

    def _init_state(self, group: dict, p: Tensor, state: dict) -> None:
        state["step"] = 0
        zeros = lambda: torch.zeros_like(p, memory_format=torch.preserve_format)  # noqa: E731
        state["exp_avg"], state["exp_avg_sq"] = zeros(), zeros()
        if group["variance"] == "streaming":
            state["noise_ratio"] = zeros()
            if gate_reading(group) == "gradient":  # Adam's moments see the masked gradient: keep the raw ones
                state["raw_exp_avg"], state["raw_exp_avg_sq"] = zeros(), zeros()
        elif group["variance"] == "microbatch":
            state["variance_avg"] = zeros()

    def _step_bucket(self, group: dict, params: list[Tensor], per_example_grads, square_sums) -> None:
        beta1, beta2 = group["betas"]
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        reading, variance = gate_reading(group), group["variance"]
        grads = [p.grad for p in params]
        states = [self.state[p] for p in params]
        for p, state in zip(params, states):
            if not state:
                self._init_state(group, p, state)
            state["step"] += 1
        step = states[0]["step"]
        if any(state["step"] != step for state in states):
            raise RuntimeError("parameters of one group were stepped different numbers of times")
        exp_avgs = [state["exp_avg"] for state in states]
        exp_avg_sqs = [state["exp_avg_sq"] for state in states]
        masked_moments = reading == "gradient"
        if variance == "streaming":
            # raw-gradient moments: Adam's own unless they are to see the masked gradient
            centres = [s["raw_exp_avg"] for s in states] if masked_moments else exp_avgs
            scales = [s["raw_exp_avg_sq"] for s in states] if masked_moments else exp_avg_sqs
            if step > 1:
                # d = g − m/(1 − β₁ⁿ): deviation from the bias-corrected mean of the n = t − 1 previous
                # gradients, taken before m moves so that the centre is independent of g
                deviations = torch._foreach_add(grads, centres, alpha=-1.0 / (1 - beta1 ** (step - 1)))
            if masked_moments:
                self._update_moments(centres, scales, grads, beta1, beta2)

        # --- the noise the gate compares g² with, times `scale`
        scale = group["noise_multiplier"]
        if variance == "exact":
            noise = self._exact_noise(params, per_example_grads, square_sums)
        elif variance == "microbatch":
            noise = self._microbatch_noise(group, params, states, square_sums, step)
        if weight_decay != 0:
            torch._foreach_mul_(params, 1 - lr * weight_decay)
        if not masked_moments:  # torch's order: decay, then moments (the streaming noise needs the new v̂)
            self._update_moments(exp_avgs, exp_avg_sqs, grads, beta1, beta2)
        if variance == "streaming" and step > 1:
            noise, streaming_scale = self._streaming_noise(group, states, deviations, scales, step)
            scale *= streaming_scale
        if variance == "streaming" and step == 1:
            masks = [torch.ones_like(g) for g in grads]  # nothing to test against yet: a plain Adam step
        else:
            margins = torch._foreach_mul(noise, -scale)  # g² − scale·noise in two passes, one allocation
            torch._foreach_addcmul_(margins, grads, grads)
            # sign -> {-1, 0, 1}, clamp -> {0, 1}: an exact 0/1 mask built with foreach kernels (strict >)
            torch._foreach_sign_(margins)
            masks = torch._foreach_clamp_min(margins, 0.0)
        self._last_masks.update(zip(params, masks))
        if masked_moments:
            self._update_moments(exp_avgs, exp_avg_sqs, torch._foreach_mul(grads, masks), beta1, beta2)

        # --- the Adam update, masked under gate="update"
        bias_correction1 = 1 - beta1**step
        bias_correction2_sqrt = (1 - beta2**step) ** 0.5
        denoms = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_div_(denoms, bias_correction2_sqrt)
        torch._foreach_add_(denoms, eps)
        # Masking m (exact: x·1 = x, x·0 = 0) before addcdiv keeps the open elements bitwise Adam's.
        directions = torch._foreach_mul(exp_avgs, masks) if reading == "update" else exp_avgs
        torch._foreach_addcdiv_(params, directions, denoms, (lr / bias_correction1) * -1)

    @staticmethod
    def _update_moments(exp_avgs, exp_avg_sqs, grads, beta1, beta2) -> None:
        """Adam's moment updates, as torch.optim.Adam's foreach path computes them (bitwise equal)."""
        torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)

    @staticmethod
    def _exact_noise(params: list[Tensor], per_example_grads, square_sums) -> list[Tensor]:
        """s²/b per element, from the sums of squares or from the materialised per-example gradients."""
        if square_sums is not None:
            if square_sums.rows < 2:
                raise ValueError(f"square_sums needs rows >= 2 examples, got {square_sums.rows}")
            return [square_sums.variance_of_mean(p).to(p.dtype) for p in params]
        noise = []
        for p in params:
            examples = per_example_grads[p]
            if examples.shape[1:] != p.shape or examples.shape[0] < 2:
                raise ValueError(
                    f"per-example gradients of a {tuple(p.shape)} parameter must have shape "
                    f"(b >= 2, {', '.join(map(str, p.shape))}), got {tuple(examples.shape)}"
                )
            b = examples.shape[0]
            # two-pass s² written out: torch.var over dim 0 is a strided Welford, slower on CPU
            # (docs/science.md, "Cost")
            deviations = examples - examples.mean(dim=0)
            noise.append(deviations.square_().sum(dim=0).div_((b - 1) * b).to(p.dtype))
        return noise

    @staticmethod
    def _variance_beta(group: dict) -> float:
        return group["variance_beta"] if group["variance_beta"] is not None else group["betas"][1]

    def _microbatch_noise(self, group, params, states, square_sums, step) -> list[Tensor]:
        """ν ← β_v ν + (1 − β_v)·V_t with V_t the K micro-batch means' variance of the mean; returns ν/(1 − β_vᵗ)."""
        beta_v = self._variance_beta(group)
        averages = [state["variance_avg"] for state in states]
        torch._foreach_mul_(averages, beta_v)
        torch._foreach_add_(averages, [square_sums.variance_of_mean(p).to(p.dtype) for p in params], alpha=1 - beta_v)
        return torch._foreach_div(averages, 1 - beta_v**step)

    @staticmethod
    def _streaming_noise(group, states, deviations, second_moment_sums, step) -> tuple[list[Tensor], float]:
        """V̂ = scale · ρ · v̂ per element (see the module docstring); updates the noise_ratio state."""
        beta1, beta2 = group["betas"]
        beta_v = PopulationRiskAdam._variance_beta(group)
        n = step - 1  # gradients averaged into the centre; also the number of ratio updates so far
        # c = 1 + Σ wᵢ² for the centre's normalised EMA weights: E[d²] = c·V under stationarity
        center_share = (1 - beta1) * (1 + beta1**n) / ((1 + beta1) * (1 - beta1**n))
        # v̂ (bias-corrected, including g_t) plus a floor so never-touched elements give 0/floor = 0
        second_moments = torch._foreach_div(second_moment_sums, 1 - beta2**step)
        torch._foreach_add_(second_moments, max(group["eps"] ** 2, 1e-30))
        ratios = torch._foreach_mul(deviations, deviations)
        torch._foreach_div_(ratios, second_moments)
        noise_ratios = [state["noise_ratio"] for state in states]
        torch._foreach_mul_(noise_ratios, beta_v)
        torch._foreach_add_(noise_ratios, ratios, alpha=(1 - beta_v) / (1 + center_share))
        torch._foreach_mul_(second_moments, noise_ratios)  # now ρ·v̂, up to the scale below
        return second_moments, PopulationRiskAdam._streaming_scale(group, step)

    @staticmethod
    def _streaming_scale(group: dict, step: int) -> float:
        scale = 1.0 / (1 - PopulationRiskAdam._variance_beta(group) ** (step - 1))
        if group["train_size"] is not None:
            scale *= group["train_size"] / (group["train_size"] - group["batch_size"])
        return scale

    def gate_variance(self) -> dict[Tensor, Tensor]:
        """{parameter: V̂}, the variance of the batch mean the last step's gate compared g² with (before
        noise_multiplier), rebuilt from the state: streaming (parameters stepped at least twice) and
        microbatch groups. The exact source keeps no state; its V̂ is s²/b of the batch itself."""
        estimates = {}
        for group in self.param_groups:
            beta2, beta_v = group["betas"][1], self._variance_beta(group)
            for p in group["params"]:
                state = self.state.get(p)
                if not state:
                    continue
                step = state["step"]
                if group["variance"] == "microbatch":
                    estimates[p] = state["variance_avg"] / (1 - beta_v**step)
                elif group["variance"] == "streaming" and step >= 2:
                    raw_sq = state["raw_exp_avg_sq"] if "raw_exp_avg_sq" in state else state["exp_avg_sq"]
                    second_moment = raw_sq / (1 - beta2**step) + max(group["eps"] ** 2, 1e-30)
                    estimates[p] = state["noise_ratio"] * second_moment * self._streaming_scale(group, step)
        return estimates

    def variance_ratio(self, square_sums: SquareSums) -> float:
        """Median over elements of V̂ / (s²/b): the last step's gate variance against the exact one of the
        same batch, `square_sums` from `per_example_square_sums` on that batch, with `.grad` still that
        batch's mean (call after step; every k steps: it costs the hooks' pass). Elements with s²/b = 0
        are left out; nan when no element qualifies."""
        ratios = []
        for p, estimate in self.gate_variance().items():
            exact = square_sums.variance_of_mean(p)
            kept = exact > 0
            ratios.append((estimate[kept] / exact[kept]).reshape(-1))
        ratios = torch.cat(ratios) if ratios else torch.empty(0)
        return ratios.median().item() if ratios.numel() else float("nan")

    def per_example_variance(self) -> dict[Tensor, Tensor]:
        """Streaming estimate of each element's per-example gradient variance s² = b·V̂ at the last step
        (streaming groups with batch_size set; parameters stepped at least twice)."""
        by_group = {p: group for group in self.param_groups for p in group["params"]}
        return {
            p: estimate * by_group[p]["batch_size"]
            for p, estimate in self.gate_variance().items()
            if by_group[p]["variance"] == "streaming" and by_group[p]["batch_size"] is not None
        }
