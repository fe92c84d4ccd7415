"""The skeleton the P2 experiments share: arms × seeds, tidy output files, and steps-to-threshold.

Every population-risk experiment (grokking, PINN, preference) compares optimizer *arms* on the same data,
initial weights and batches per *seed*: `run_arms` loops seeds outside and arms inside, so each seed's
setup (a model draw, a label swap) is made once and shared by its arms. `write_tables` writes the tidy
CSVs and provenance.json that the figure, claim and report-table steps read (theory writes its own
tables through it too).

"Steps to a threshold" is measured at evaluation steps; a run that never reaches it has no step. Over
seeds, `median_steps` counts such a run as +inf, so a median that is not reached reads as not reached
(with an even number of seeds, half unreached already is); `format_steps` prints it against the cap.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import pandas as pd

from growcert.provenance import provenance


def run_arms(seeds: Sequence[int], arms: Sequence[Any], prepare_seed: Callable[[int], Any],
             train_arm: Callable[[Any, int, Any], tuple[list[dict], dict]]) -> tuple[list[dict], list[dict]]:
    """(curve rows, summary rows) of every arm on every seed: `prepare_seed(seed)` once per seed, then
    `train_arm(arm, seed, prepared)` -> (history rows, summary row) for each arm in order."""
    curves, summaries = [], []
    for seed in seeds:
        prepared = prepare_seed(seed)
        for arm in arms:
            history, summary = train_arm(arm, seed, prepared)
            curves += history
            summaries.append(summary)
    return curves, summaries


def write_tables(out_dir: Path, settings: dict[str, Any], tables: dict[str, pd.DataFrame],
                 **record: Any) -> dict[str, Any]:
    """Write each table as out_dir/<name>.csv and provenance.json (settings, versions, code hash, plus
    `record`); returns the tables and the provenance record."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        table.to_csv(out_dir / f"{name}.csv", index=False)
    provenance_record = provenance(settings) | record
    (out_dir / "provenance.json").write_text(json.dumps(provenance_record, indent=1))
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
