"""The skeleton the P2 experiments share: arms × seeds, one arm's training loop, tidy output files, and
steps-to-threshold.

Every population-risk experiment (grokking, PINN, preference) compares optimizer *arms* on the same data,
initial weights and batches per *seed*: `run_arms` loops seeds outside and arms inside, so each seed's
setup (a model draw, a label swap) is made once and shared by its arms. One arm (an `Arm`) trains in
`run_arm`, the loop the three tasks share: the task's `step` sets the gradient (and says how the
optimizer steps), `run_arm` steps, records the gate diagnostics and `gated_fraction`, evaluates every
`eval_every` steps through the task's `evaluate`, and snapshots itself for `UnitResume`. With a
`UnitResume` the run survives a kill: finished arms come back from the resume state and the arm in
training from its last snapshot. `write_tables` writes the tidy CSVs and provenance.json that the
figure, claim and report-table steps read (theory writes its own tables through it too).

"Steps to a threshold" (`steps_to_target`) is measured at evaluation steps; a run that never reaches it
has no step. Over seeds, `median_steps` counts such a run as +inf, so a median that is not reached reads
as not reached (with an even number of seeds, half unreached already is); `format_steps` prints it
against the cap.

torch is imported only for type checking (and `growcert.resume` inside `run_arms`): the report side
(`*_report`, the task modules of `growcert.experiments.tasks`) imports this module without torch.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from growcert.errors import ConfigError
from growcert.provenance import provenance
from growcert.files import write_csv, write_text

if TYPE_CHECKING:
    import torch

    from growcert.optim import SquareSums
    from growcert.resume import UnitResume


@dataclass(frozen=True)
class Arm:
    """One optimizer arm. `name` is what the `optimizer` column of curves.csv and summary.csv says;
    `kind` is adamw, grokfast or poprisk; the rest is set where the kind or the task uses it (`lr` for a
    task that tunes it per arm; gate, variance and microbatches for PopulationRiskAdam, `experiments.arms`)."""

    name: str
    kind: str
    weight_decay: float | None = None
    lr: float | None = None
    gate: str | None = None
    variance: str | None = None
    microbatches: int | None = None


def select_arms(arms: Sequence[Arm], names: Sequence[str] | None, key: str) -> list[Arm]:
    """The arms named in `names` (config key `key`), in the configured order; all of them when `names` is
    None. A name that is not a configured arm is a ConfigError naming the key and the arms there are."""
    if names is None:
        return list(arms)
    known = [arm.name for arm in arms]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ConfigError(f"config key '{key}': {', '.join(map(repr, unknown))} is not a configured arm "
                          f"(the arms are {', '.join(map(repr, known))})")
    return [arm for arm in arms if arm.name in names]


def run_arms(seeds: Sequence[int], arms: Sequence[Any], prepare_seed: Callable[[int], Any],
             train_arm: Callable[..., tuple[list[dict], dict]],
             resume: UnitResume | None = None) -> tuple[list[dict], list[dict]]:
    """(curve rows, summary rows) of every arm on every seed: `prepare_seed(seed)` once per seed, then
    `train_arm(arm, seed, prepared)` -> (history rows, summary row) for each arm in order. With `resume`,
    arms a killed run finished are taken from its resume state, the arm it was in continues from its last
    snapshot (train_arm is called with resume= and snapshot=, and calls resume.tick), and SIGTERM stops
    cleanly."""
    from growcert.resume import termination_requests

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


def arm_snapshot(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batches: torch.Generator,
                 history: list[dict], step: int, started: float, **extra: Any) -> dict[str, Any]:
    """What an arm needs to continue exactly where it was: weights, optimizer state (PopulationRiskAdam's
    extra vectors included), the batch generator, the curve so far, the step and the time spent (`started`
    is its perf_counter origin), plus any arm-specific `extra` state."""
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "generator": batches.get_state(),
            "history": history, "step": step, "elapsed": time.perf_counter() - started, **extra}


def restore_arm(snapshot: dict[str, Any], model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                batches: torch.Generator, history: list[dict]) -> tuple[int, float]:
    """Put an `arm_snapshot` back in place; returns (first step to run, seconds already spent)."""
    model.load_state_dict(snapshot["model"])
    optimizer.load_state_dict(snapshot["optimizer"])
    batches.set_state(snapshot["generator"])
    history[:] = snapshot["history"]
    return snapshot["step"] + 1, snapshot["elapsed"]


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
    """What `run_arm` returns: the curve rows, the seconds spent (training and its evaluations, a resumed
    run's earlier time included) and the last step run (before `steps` when the arm stopped early)."""

    history: list[dict[str, Any]]
    seconds: float
    last_step: int


StepFn = Callable[[int], "tuple[dict[str, Any], Callable[[], SquareSums] | None]"]


def run_arm(loop: ArmLoop, step: StepFn, evaluate: Callable[[int], dict[str, Any]],
            resume: UnitResume | None = None, snapshot: dict[str, Any] | None = None) -> ArmResult:
    """Train one arm: for each step i, `step(i)` draws the batch and sets `.grad`, returning the keyword
    arguments of `optimizer.step` ({} or {"square_sums": ...} or {"per_example_grads": ...}) and a thunk of
    the batch's exact square sums for the gate diagnostics (None: the task has none for this arm); then
    the optimizer steps and the gate readings are kept. At step 0 and every `eval_every` steps (and the
    last) a curve row is recorded: optimizer (the arm's name), seed, step, the columns of `evaluate(i)`,
    `gated_fraction` and the diagnostics (`experiments.arms.DIAGNOSTIC_COLUMNS`). With `resume` it
    snapshots itself (resume.tick) and continues a killed run from `snapshot`."""
    from growcert.experiments.arms import GateDiagnostics

    optimizer = loop.optimizer
    diagnostics = GateDiagnostics(optimizer, loop.diagnostics_every)
    history: list[dict[str, Any]] = []
    gated: list[float] = []  # the gate's blocked share at each step since the last record

    def record(i: int) -> dict[str, Any]:
        row = {"optimizer": loop.arm.name, "seed": loop.seed, "step": i, **evaluate(i),
               "gated_fraction": gated_fraction(gated), **diagnostics.row()}
        gated.clear()
        history.append(row)
        return row

    if snapshot is None:
        record(0)
        first, before = 1, 0.0
    else:  # weights, optimizer state, the batch generator and the readings since the last record, as they were
        first, before = restore_arm(snapshot, loop.model, optimizer, loop.batches, history)
        gated[:] = snapshot.get("gated", [])
        diagnostics.restore(snapshot.get("diagnostics"))
        loop.restore(snapshot)
    started, i = time.perf_counter() - before, first - 1

    def state() -> dict[str, Any]:
        return arm_snapshot(loop.model, optimizer, loop.batches, history, i, started, gated=list(gated),
                            diagnostics=diagnostics.state(), **loop.state())

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
    return ArmResult(history, time.perf_counter() - started, i)


def gated_fraction(readings: Sequence[float]) -> float:
    """`gated_fraction`, the one definition every P2 curves.csv uses: PopulationRiskAdam's share of parameter
    elements whose update the gate blocked (`last_gated_fraction`), averaged (np.mean) over every step since
    the previous evaluation; NaN where there is no reading (step 0, and every arm that is not
    PopulationRiskAdam). It is the complement of `open_fraction`, which `GateDiagnostics` averages the same way."""
    return float(np.mean(readings)) if readings else math.nan


def write_tables(out_dir: Path, settings: dict[str, Any], tables: dict[str, pd.DataFrame],
                 **record: Any) -> dict[str, Any]:
    """Write each table as out_dir/<name>.csv and provenance.json (settings, versions, code hash, plus
    `record`); returns the tables and the provenance record."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        write_csv(table, out_dir / f"{name}.csv")
    provenance_record = provenance(settings) | record
    write_text(out_dir / "provenance.json", json.dumps(provenance_record, indent=1))
    return {**tables, "provenance": provenance_record}


def median_table(summary_csv: str | Path, columns: list[str]) -> pd.DataFrame:
    """A report table: the numeric columns of summary.csv, median over seeds, per `columns`."""
    summary = pd.read_csv(summary_csv)
    numeric = [c for c in summary.select_dtypes("number").columns if c not in columns + ["seed"]]
    return summary.groupby(columns, sort=False)[numeric].median().reset_index()


def step_columns(table: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    """Steps-to-threshold columns as nullable integers: missing means not reached."""
    for column in columns:
        table[column] = table[column].astype("Int64")
    return table


def steps_to_target(steps: Iterable[int], values: Iterable[float], target: float, *,
                    above: bool = False) -> int | None:
    """The first evaluated step whose value reached `target`: value ≤ target (an error falling to it), or with
    `above` value ≥ target (an accuracy rising to it); None: never."""
    return next((int(step) for step, value in zip(steps, values) if (value >= target if above else value <= target)),
                None)


def median_steps(steps: pd.Series) -> float:
    """Median over seeds of a steps-to-threshold column, a run that never reached it counted as +inf."""
    return float(pd.to_numeric(steps, errors="coerce").astype(float).fillna(math.inf).median())


def format_steps(step: float, cap: int) -> str:
    """'1,234', or 'not by <cap>' for a median that was not reached."""
    return f"{step:,.0f}" if math.isfinite(step) else f"not by {cap:,}"
