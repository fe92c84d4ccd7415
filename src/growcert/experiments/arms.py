"""The PopulationRiskAdam arms every P2 task runs, the gate diagnostics they record (P2; docs/science.md,
"PopulationRiskAdam (P2's optimiser, optim/)"), and the loops that train the arms.

`run_arms` loops seeds outside and arms inside, so each seed's setup (a model draw, a label swap) is made
once and shared by its arms. One arm trains in `run_arm`, the loop the gated tasks share: the task's `step`
sets the gradient (and says how the optimizer steps), `run_arm` steps, records the gate diagnostics and
`gated_fraction`, evaluates every `eval_every` steps through the task's `evaluate`, and snapshots itself for
`UnitResume`. With a `UnitResume` the run survives a kill: finished arms come back from the resume state and
the arm in training from its last snapshot.

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
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from growcert import numerics
from growcert.experiments.common import Arm, gated_fraction
from growcert.optim import PopulationRiskAdam, SquareSums, microbatch_square_sums, per_example_square_sums
from growcert.resume import UnitResume, termination_requests

DIAGNOSTIC_COLUMNS = ["open_fraction", "variance_ratio"]


def arm_name(gate: str, variance: str, weight_decay: float) -> str:
    """`poprisk-<gate>-<variance>-wd<decay>`: the arm's name says its variant."""
    return f"poprisk-{gate}-{variance}-wd{weight_decay:g}"


def poprisk_arms(block: dict[str, Any], weight_decays: Iterable[float]) -> list[Arm]:
    """One poprisk `Arm` (gate, variance, weight_decay, microbatches) per gate × variance × decay, in the
    config's order (gates outermost)."""
    return [
        Arm(
            arm_name(gate, variance, float(wd)),
            "poprisk",
            weight_decay=float(wd),
            gate=gate,
            variance=variance,
            microbatches=block["microbatches"] if variance == "microbatch" else None,
        )
        for gate in block["gates"]
        for variance in block["variances"]
        for wd in weight_decays
    ]


def uses_microbatches(block: dict[str, Any]) -> bool:
    return "microbatch" in block["variances"]


def make_poprisk(
    arm: Arm, params, lr: float, betas, batch_size: int | None, train_size: int | None
) -> PopulationRiskAdam:
    """The arm's PopulationRiskAdam; the finite-population correction (batch_size, train_size) is the
    streaming source's only (exact and microbatch measure the batch itself)."""
    streaming = arm.variance == "streaming"
    return PopulationRiskAdam(
        params,
        lr=lr,
        betas=tuple(betas),
        weight_decay=arm.weight_decay,
        gate=arm.gate,
        variance=arm.variance,
        microbatches=arm.microbatches,
        batch_size=batch_size if streaming else None,
        train_size=train_size if streaming else None,
    )


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
        row = {
            "open_fraction": sum(self.open) / len(self.open) if self.open else math.nan,
            "variance_ratio": sum(self.ratios) / len(self.ratios) if self.ratios else math.nan,
        }
        self.open.clear()
        self.ratios.clear()
        return row

    def state(self) -> dict[str, list[float]]:
        return {"open": list(self.open), "ratios": list(self.ratios)}

    def restore(self, state: dict[str, list[float]] | None) -> None:
        if state:
            self.open[:], self.ratios[:] = state["open"], state["ratios"]


def hook_square_sums(
    model: nn.Module, loss_fn: Callable[..., Tensor], inputs: Tensor, *targets: Tensor
) -> Callable[[], SquareSums]:
    """A deferred `per_example_square_sums` of one batch that leaves `.grad` alone."""
    return lambda: per_example_square_sums(model, loss_fn, inputs, *targets, set_grad=False)[1]


def variance_step(
    optimizer: torch.optim.Optimizer, model: nn.Module, loss_fn: Callable[..., Tensor], inputs: Tensor, *targets: Tensor
) -> tuple[Tensor, SquareSums | None]:
    """Set `.grad` to the batch-mean gradient of `loss_fn` (per-example losses) the way the optimizer's
    variance source needs it; returns (mean loss, square sums for step() or None)."""
    optimizer.zero_grad(set_to_none=True)
    variance = optimizer.defaults.get("variance") if isinstance(optimizer, PopulationRiskAdam) else None
    if variance == "exact":
        losses, sums = per_example_square_sums(model, loss_fn, inputs, *targets)
        return losses.mean(), sums
    if variance == "microbatch":
        losses, sums = microbatch_square_sums(
            model, loss_fn, inputs, *targets, microbatches=optimizer.defaults["microbatches"]
        )
        return losses.mean(), sums
    loss = loss_fn(model(inputs), *targets).mean()
    loss.backward()
    return loss.detach(), None


def run_arms(
    seeds: Sequence[int],
    arms: Sequence[Any],
    prepare_seed: Callable[[int], Any],
    train_arm: Callable[..., tuple[list[dict], dict]],
    resume: UnitResume | None = None,
) -> tuple[list[dict], list[dict]]:
    """(curve rows, summary rows) of every arm on every seed: `prepare_seed(seed)` once per seed, then
    `train_arm(arm, seed, prepared)` -> (history rows, summary row) for each arm in order. With `resume`,
    arms a killed run finished are taken from its resume state, the arm it was in continues from its last
    snapshot (train_arm is called with resume= and snapshot=, and calls resume.tick), and SIGTERM stops
    cleanly."""
    curves, summaries = [], []
    with termination_requests() as stop:
        for seed_index, seed in enumerate(seeds):
            prepared = prepare_seed(seed)  # also when its arms are done: it may record per-seed facts
            for arm_index, arm in enumerate(arms):
                key = (seed_index, arm_index)
                if resume is not None and resume.done(key):
                    history, summary = resume.result(key)
                elif resume is not None:
                    snapshot = resume.start(key, stop)
                    history, summary = train_arm(arm, seed, prepared, resume=resume, snapshot=snapshot)
                    resume.finished((history, summary))
                else:
                    history, summary = train_arm(arm, seed, prepared)
                curves += history
                summaries.append(summary)
    return curves, summaries


def arm_snapshot(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: torch.Generator,
    history: list[dict],
    step: int,
    started: float,
    cpu_started: float = 0.0,
    **extra: Any,
) -> dict[str, Any]:
    """What an arm needs to continue exactly where it was: weights, optimizer state (PopulationRiskAdam's
    extra vectors included), the batch generator, the curve so far, the step and the time spent (`started`
    is its perf_counter origin, `cpu_started` its process_time origin), plus any arm-specific `extra` state."""
    return {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "generator": batches.get_state(),
        "history": history,
        "step": step,
        "elapsed": time.perf_counter() - started,
        "cpu_elapsed": time.process_time() - cpu_started,
        **extra,
    }


def restore_arm(
    snapshot: dict[str, Any],
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: torch.Generator,
    history: list[dict],
) -> tuple[int, float, float]:
    """Put an `arm_snapshot` back in place; returns (first step to run, seconds and CPU seconds already spent: a
    snapshot that predates CPU time gives 0 for it)."""
    model.load_state_dict(snapshot["model"])
    optimizer.load_state_dict(snapshot["optimizer"])
    batches.set_state(snapshot["generator"])
    history[:] = snapshot["history"]
    return snapshot["step"] + 1, snapshot["elapsed"], snapshot.get("cpu_elapsed", 0.0)


@dataclass
class ArmLoop:
    """One arm in training as `run_arm` drives it: the model, its optimizer and its batch generator (the
    three a snapshot keeps), how many steps, when to evaluate and measure the gate, and the task's hooks:
    `after_record(row, seconds so far)` at every evaluation (may log; True stops the arm early), `state()`
    the task's own snapshot entries (Grokfast's average) and `restore(snapshot)` to put them back."""

    arm: Arm
    seed: int
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    batches: torch.Generator
    steps: int
    eval_every: int
    diagnostics_every: int
    after_record: Callable[[dict[str, Any], float], bool] | None = None
    state: Callable[[], dict[str, Any]] = dict
    restore: Callable[[dict[str, Any]], None] = field(default=lambda snapshot: None)


@dataclass(frozen=True)
class ArmResult:
    """What `run_arm` returns: the curve rows, the seconds and the process CPU seconds spent (training and its
    evaluations, a resumed run's earlier time included) and the last step run (before `steps` when the arm
    stopped early)."""

    history: list[dict[str, Any]]
    seconds: float
    last_step: int
    cpu_seconds: float
    numerics: dict[str, Any]  # summary columns: the mode that started the arm and whether a resume changed it


StepFn = Callable[[int], tuple[dict[str, Any], Callable[[], SquareSums] | None]]


def run_arm(
    loop: ArmLoop,
    step: StepFn,
    evaluate: Callable[[int], dict[str, Any]],
    resume: UnitResume | None = None,
    snapshot: dict[str, Any] | None = None,
) -> ArmResult:
    """Train one arm: for each step i, `step(i)` draws the batch and sets `.grad`, returning the keyword
    arguments of `optimizer.step` ({} or {"square_sums": ...} or {"per_example_grads": ...}) and a thunk of
    the batch's exact square sums for the gate diagnostics (None: the task has none for this arm); then
    the optimizer steps and the gate readings are kept. At step 0 and every `eval_every` steps (and the
    last) a curve row is recorded: optimizer (the arm's name), seed, step, the columns of `evaluate(i)`,
    `gated_fraction` and the diagnostics (`experiments.arms.DIAGNOSTIC_COLUMNS`). With `resume` it
    snapshots itself (resume.tick) and continues a killed run from `snapshot`."""
    optimizer = loop.optimizer
    diagnostics = GateDiagnostics(optimizer, loop.diagnostics_every)
    history: list[dict[str, Any]] = []
    gated: list[float] = []  # the gate's blocked share at each step since the last record

    def record(i: int) -> dict[str, Any]:
        row = {
            "optimizer": loop.arm.name,
            "seed": loop.seed,
            "step": i,
            **evaluate(i),
            "gated_fraction": gated_fraction(gated),
            **diagnostics.row(),
        }
        gated.clear()
        history.append(row)
        return row

    if snapshot is None:
        record(0)
        first, before, cpu_before = 1, 0.0, 0.0
    else:  # weights, optimizer state, the batch generator and the readings since the last record, as they were
        first, before, cpu_before = restore_arm(snapshot, loop.model, optimizer, loop.batches, history)
        gated[:] = snapshot.get("gated", [])
        diagnostics.restore(snapshot.get("diagnostics"))
        loop.restore(snapshot)
    started, cpu_started, i = time.perf_counter() - before, time.process_time() - cpu_before, first - 1

    def state() -> dict[str, Any]:
        return arm_snapshot(
            loop.model,
            optimizer,
            loop.batches,
            history,
            i,
            started,
            cpu_started,
            gated=list(gated),
            diagnostics=diagnostics.state(),
            **loop.state(),
        )

    for i in range(first, loop.steps + 1):
        step_arguments, exact_square_sums = step(i)
        if exact_square_sums is not None:
            diagnostics.before_step(i, exact_square_sums)
        optimizer.step(**step_arguments)
        diagnostics.after_step()
        reading = getattr(optimizer, "last_gated_fraction", None)
        if reading is not None:
            gated.append(reading)
        if i % loop.eval_every == 0 or i == loop.steps:
            row = record(i)
            if loop.after_record is not None and loop.after_record(row, time.perf_counter() - started):
                break
        if resume is not None:
            resume.tick(i, state)
    numbers = (
        resume.numerics_columns()
        if resume is not None
        else {"numerics": numerics.current_mode(), "numerics_changed": False}
    )
    return ArmResult(history, time.perf_counter() - started, i, time.process_time() - cpu_started, numbers)
