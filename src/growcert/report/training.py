"""Tidy tables gathered from run folders (one row per run x evaluation step)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from growcert.pipeline.artifacts import RUN_METRICS

TRAINING_COLUMNS = [
    "family",
    "dataset",
    "width",
    "depth",
    "seed",
    "num_parameters",
    "step",
    "train_loss",
    "train_acc",
    "test_loss",
    "test_acc",
    "seconds_per_step",
    "code_hash",
]


def training_table(run_dirs: list[str | Path]) -> pd.DataFrame:
    """Every run's evaluation history as one long table; with a `context` column after `dataset` when a
    run belongs to a context sweep (empty for the other runs)."""
    rows = []
    for run_dir in run_dirs:
        path = RUN_METRICS.path(Path(run_dir))
        if not path.is_file():
            raise FileNotFoundError(f"run {run_dir}: no {RUN_METRICS.name} (the run did not finish)")
        metrics = json.loads(path.read_text())
        for entry in metrics["history"]:
            rows.append(
                {
                    **{
                        key: metrics[key]
                        for key in ("family", "dataset", "width", "depth", "seed", "num_parameters", "seconds_per_step")
                    },
                    **({"context": metrics["context"]} if "context" in metrics else {}),
                    **entry,
                    "code_hash": metrics["provenance"]["code_hash"],
                }
            )
    table = pd.DataFrame(rows)
    return table[with_context(TRAINING_COLUMNS, table)]


def with_context(columns: list[str], table: pd.DataFrame) -> list[str]:
    """`columns` with `context` after `dataset` when `table` has a context column."""
    if "context" not in table.columns or "context" in columns:
        return list(columns)
    at = columns.index("dataset") + 1
    return [*columns[:at], "context", *columns[at:]]


def run_keys(table: pd.DataFrame) -> list[str]:
    """The keys of one trained model in `table`: family, dataset[, context], width, depth, seed."""
    return with_context(["family", "dataset", "width", "depth", "seed"], table)


def final_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The last evaluation of each run."""
    keys = run_keys(table)
    # dropna=False: a fixed-context run has no context in a table that also holds a sweep.
    return table.sort_values("step").groupby(keys, as_index=False, dropna=False).tail(1).sort_values(keys)
