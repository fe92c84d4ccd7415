"""The PopulationRiskAdam arms every P2 task runs, and the gate diagnostics they record (P2; docs/science.md, "PopulationRiskAdam (P2's optimiser, optim/)").

Each task's config section has a `poprisk` block listing gate readings, variance sources and (for
grokking) weight decays; `poprisk_arms` expands it into one arm per combination, named so that the
name says the variant: `poprisk-<gate>-<variance>-wd<decay>` (e.g. `poprisk-update-exact-wd0`). The
readings and sources are those of `growcert.optim` (docs/science.md): "exact" takes s²/b of the batch
itself, "streaming" estimates it from successive batches, "microbatch" from the K micro-batch means of
one batch (K = `poprisk.microbatches`).

`GateDiagnostics` records, at every evaluation, the gate's open fraction (the mean over the steps
since the last record) and, every `diagnostics_every` steps for the streaming and microbatch sources,
the median ratio of the gate's variance V̂ to the exact s²/b of the same batch, measured with
`per_example_square_sums` (or a task's own exact rows) before the step. The measurement only reads:
it runs on a copy of the batch's gradients, under a forked RNG, with `.grad` put back bit for bit, so
the training trajectory is the same with or without it (tests/test_gate_arms.py).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable

import torch
from torch import Tensor, nn

from growcert.experiments.common import Arm
from growcert.optim import PopulationRiskAdam, SquareSums

DIAGNOSTIC_COLUMNS = ["open_fraction", "variance_ratio"]


def arm_name(gate: str, variance: str, weight_decay: float) -> str:
    """`poprisk-<gate>-<variance>-wd<decay>`: the arm's name says its variant."""
    return f"poprisk-{gate}-{variance}-wd{weight_decay:g}"


def poprisk_arms(block: dict[str, Any], weight_decays: Iterable[float]) -> list[Arm]:
    """One poprisk `Arm` (gate, variance, weight_decay, microbatches) per gate × variance × decay, in the
    config's order (gates outermost)."""
    return [Arm(arm_name(gate, variance, float(wd)), "poprisk", weight_decay=float(wd), gate=gate, variance=variance,
                microbatches=block["microbatches"] if variance == "microbatch" else None)
            for gate in block["gates"] for variance in block["variances"] for wd in weight_decays]


def uses_microbatches(block: dict[str, Any]) -> bool:
    return "microbatch" in block["variances"]


def make_poprisk(arm: Arm, params, lr: float, betas, batch_size: int | None,
                 train_size: int | None) -> PopulationRiskAdam:
    """The arm's PopulationRiskAdam; the finite-population correction (batch_size, train_size) is the
    streaming source's only (exact and microbatch measure the batch itself)."""
    streaming = arm.variance == "streaming"
    return PopulationRiskAdam(params, lr=lr, betas=tuple(betas), weight_decay=arm.weight_decay, gate=arm.gate,
                              variance=arm.variance, microbatches=arm.microbatches,
                              batch_size=batch_size if streaming else None,
                              train_size=train_size if streaming else None)


def square_sums_from_rows(rows: dict[Tensor, Tensor]) -> SquareSums:
    """SquareSums equivalent to materialised rows {p: (b, *shape)} whose centred sum of squares the exact
    gate uses (`PopulationRiskAdam._exact_noise`): Σ(z − z̄)² + b·grad², so that
    `variance_of_mean(p)` = Σ(z − z̄)²/(b(b − 1)) with `.grad` the batch gradient (the rows' mean need not
    be it: the PINN's stratified rows are centred within their strata)."""
    b = next(iter(rows.values())).shape[0]
    sums = {p: (z - z.mean(dim=0)).square().sum(dim=0) + b * p.grad.square() for p, z in rows.items()}
    return SquareSums(sums, b)


class GateDiagnostics:
    """Open fraction and variance ratio of one arm, kept between evaluations (state() goes into the
    arm's resume snapshot). `exact_square_sums()` computes the exact s²/b sums of the current batch."""

    def __init__(self, optimizer: torch.optim.Optimizer, every: int):
        self.gated = isinstance(optimizer, PopulationRiskAdam)
        self.optimizer, self.every = optimizer, every
        self.measures_ratio = self.gated and optimizer.defaults["variance"] in ("streaming", "microbatch")
        self.open: list[float] = []
        self.ratios: list[float] = []
        self._pending: SquareSums | None = None

    def before_step(self, step: int, exact_square_sums: Callable[[], SquareSums]) -> None:
        """Every `every` steps (streaming/microbatch arms), measure the exact sums of this step's batch at
        the parameters the gradient was taken at, leaving .grad and the RNG exactly as they were."""
        if not self.measures_ratio or step % self.every:
            return
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        kept = [None if p.grad is None else p.grad.clone() for p in params]
        with torch.random.fork_rng(devices=[]):
            sums = exact_square_sums()
        for p, grad in zip(params, kept):
            p.grad = grad
        self._pending = sums

    def after_step(self) -> None:
        if not self.gated:
            return
        fraction = self.optimizer.last_open_fraction
        if fraction is not None:
            self.open.append(fraction)
        if self._pending is not None:
            ratio = self.optimizer.variance_ratio(self._pending)
            if math.isfinite(ratio):  # nan before the streaming estimate exists (its first step is plain Adam)
                self.ratios.append(ratio)
            self._pending = None

    def row(self) -> dict[str, float]:
        """{open_fraction, variance_ratio} since the last row (NaN where not measured); clears them."""
        row = {"open_fraction": sum(self.open) / len(self.open) if self.open else math.nan,
               "variance_ratio": sum(self.ratios) / len(self.ratios) if self.ratios else math.nan}
        self.open.clear()
        self.ratios.clear()
        return row

    def state(self) -> dict[str, list[float]]:
        return {"open": list(self.open), "ratios": list(self.ratios)}

    def restore(self, state: dict[str, list[float]] | None) -> None:
        if state:
            self.open[:], self.ratios[:] = state["open"], state["ratios"]


def hook_square_sums(model: nn.Module, loss_fn: Callable[..., Tensor], inputs: Tensor,
                     *targets: Tensor) -> Callable[[], SquareSums]:
    """A deferred `per_example_square_sums` of one batch that leaves `.grad` alone."""
    from growcert.optim import per_example_square_sums

    return lambda: per_example_square_sums(model, loss_fn, inputs, *targets, set_grad=False)[1]


def variance_step(optimizer: torch.optim.Optimizer, model: nn.Module, loss_fn: Callable[..., Tensor],
                  inputs: Tensor, *targets: Tensor) -> tuple[Tensor, SquareSums | None]:
    """Set `.grad` to the batch-mean gradient of `loss_fn` (per-example losses) the way the optimizer's
    variance source needs it; returns (mean loss, square sums for step() or None)."""
    from growcert.optim import microbatch_square_sums, per_example_square_sums

    optimizer.zero_grad(set_to_none=True)
    variance = optimizer.defaults.get("variance") if isinstance(optimizer, PopulationRiskAdam) else None
    if variance == "exact":
        losses, sums = per_example_square_sums(model, loss_fn, inputs, *targets)
        return losses.mean(), sums
    if variance == "microbatch":
        losses, sums = microbatch_square_sums(model, loss_fn, inputs, *targets,
                                              microbatches=optimizer.defaults["microbatches"])
        return losses.mean(), sums
    loss = loss_fn(model(inputs), *targets).mean()
    loss.backward()
    return loss.detach(), None
