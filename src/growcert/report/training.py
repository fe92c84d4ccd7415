"""Tidy tables gathered from run folders (one row per run x evaluation step)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

TRAINING_COLUMNS = ["family", "dataset", "width", "depth", "seed", "num_parameters", "step",
                    "train_loss", "train_acc", "test_loss", "test_acc", "seconds_per_step", "code_hash"]


def training_table(run_dirs: list[str | Path]) -> pd.DataFrame:
    """Every run's evaluation history as one long table."""
    rows = []
    for run_dir in run_dirs:
        path = Path(run_dir) / "metrics.json"
        if not path.is_file():
            raise FileNotFoundError(f"run {run_dir}: no metrics.json (the run did not finish)")
        metrics = json.loads(path.read_text())
        for entry in metrics["history"]:
            rows.append({**{key: metrics[key] for key in ("family", "dataset", "width", "depth", "seed",
                                                          "num_parameters", "seconds_per_step")},
                         **entry, "code_hash": metrics["provenance"]["code_hash"]})
    return pd.DataFrame(rows)[TRAINING_COLUMNS]


def final_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The last evaluation of each run."""
    keys = ["family", "dataset", "width", "depth", "seed"]
    return table.sort_values("step").groupby(keys, as_index=False).tail(1).sort_values(keys)
