"""The skeleton the P2 experiments share: arms × seeds, tidy output files, and steps-to-threshold.

Every population-risk experiment (grokking, PINN, preference) compares optimizer *arms* on the same data,
initial weights and batches per *seed*: `run_arms` loops seeds outside and arms inside, so each seed's
setup (a model draw, a label swap) is made once and shared by its arms. With a `UnitResume` it survives
a kill: finished arms come back from the resume state and the arm in training from its last snapshot. `write_tables` writes the tidy
CSVs and provenance.json that the figure, claim and report-table steps read (theory writes its own
tables through it too).

"Steps to a threshold" is measured at evaluation steps; a run that never reaches it has no step. Over
seeds, `median_steps` counts such a run as +inf, so a median that is not reached reads as not reached
(with an even number of seeds, half unreached already is); `format_steps` prints it against the cap.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import pandas as pd
import torch

from growcert.provenance import provenance
from growcert.resume import UnitResume, termination_requests
from growcert.files import write_csv, write_text


def run_arms(seeds: Sequence[int], arms: Sequence[Any], prepare_seed: Callable[[int], Any],
             train_arm: Callable[..., tuple[list[dict], dict]],
             resume: UnitResume | None = None) -> tuple[list[dict], list[dict]]:
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


def step_columns(table: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    """Steps-to-threshold columns as nullable integers: missing means not reached."""
    for column in columns:
        table[column] = table[column].astype("Int64")
    return table


def median_steps(steps: pd.Series) -> float:
    """Median over seeds of a steps-to-threshold column, a run that never reached it counted as +inf."""
    return float(pd.to_numeric(steps, errors="coerce").astype(float).fillna(math.inf).median())


def format_steps(step: float, cap: int) -> str:
    """'1,234', or 'not by <cap>' for a median that was not reached."""
    return f"{step:,.0f}" if math.isfinite(step) else f"not by {cap:,}"
