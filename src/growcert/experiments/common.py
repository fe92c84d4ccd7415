"""The torch-free side of the skeleton the P2 experiments share: the optimizer `Arm`, the gate's
`gated_fraction`, tidy output files and steps-to-threshold.

Every population-risk experiment (grokking, PINN, preference) compares optimizer *arms* (`Arm`) on the same
data, initial weights and batches per seed; the loops that train them (`run_arms`, `run_arm`) are
`experiments.arms`'. `write_tables` writes the tidy CSVs and the provenance record (artifacts.PROVENANCE) that the
figure, claim and report-table steps read (theory writes its own tables through it too).

"Steps to a threshold" (`steps_to_target`) is measured at evaluation steps; a run that never reaches it
has no step. Over seeds, `median_steps` counts such a run as +inf, so a median that is not reached reads
as not reached (with an even number of seeds, half unreached already is); `format_steps` prints it
against the cap.

No torch here: the report side (`*_report`, the task modules of `growcert.experiments.tasks`) imports this
module without it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from growcert.errors import ConfigError
from growcert.files import write_csv, write_text
from growcert.pipeline.artifacts import PROVENANCE, TASK_DATA
from growcert.provenance import provenance


@dataclass(frozen=True)
class Arm:
    """One optimizer arm. `name` is what the `optimizer` column of the curves and summary (artifacts.CURVES,
    SUMMARY) says; `kind` is adamw, grokfast or poprisk; the rest is set where the kind or the task uses it (`lr` for
    a task that tunes it per arm; gate, variance and microbatches for PopulationRiskAdam, `experiments.arms`)."""

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
        raise ConfigError(
            f"config key '{key}': {', '.join(map(repr, unknown))} is not a configured arm "
            f"(the arms are {', '.join(map(repr, known))})"
        )
    return [arm for arm in arms if arm.name in names]


def gated_fraction(readings: Sequence[float]) -> float:
    """`gated_fraction`, the one definition every P2 task's curves (artifacts.CURVES) use: PopulationRiskAdam's
    share of parameter elements whose update the gate blocked (`last_gated_fraction`), averaged (np.mean) over every
    step since the previous evaluation; NaN where there is no reading (step 0, and every arm that is not
    PopulationRiskAdam). It is the complement of `open_fraction`, which `GateDiagnostics` averages the same way."""
    return float(np.mean(readings)) if readings else math.nan


def write_tables(
    out_dir: Path, settings: dict[str, Any], tables: dict[str, pd.DataFrame], **record: Any
) -> dict[str, Any]:
    """Write each table as out_dir/<name>.csv and the provenance record, artifacts.PROVENANCE (settings, versions,
    code hash, plus `record`); returns the tables and the provenance record."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        write_csv(table, TASK_DATA[name].path(out_dir))
    provenance_record = provenance(settings) | record
    write_text(PROVENANCE.path(out_dir), json.dumps(provenance_record, indent=1))
    return {**tables, "provenance": provenance_record}


def median_table(summary_csv: str | Path, columns: list[str]) -> pd.DataFrame:
    """A report table: the numeric columns of the summary (artifacts.SUMMARY), median over seeds, per `columns`."""
    summary = pd.read_csv(summary_csv)
    numeric = [c for c in summary.select_dtypes("number").columns if c not in columns + ["seed"]]
    return summary.groupby(columns, sort=False)[numeric].median().reset_index()


def step_columns(table: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    """Steps-to-threshold columns as nullable integers: missing means not reached."""
    for column in columns:
        table[column] = table[column].astype("Int64")
    return table


def steps_to_target(steps: Iterable[int], values: Iterable[float], target: float, *, above: bool = False) -> int | None:
    """The first evaluated step whose value reached `target`: value ≤ target (an error falling to it), or with
    `above` value ≥ target (an accuracy rising to it); None: never."""
    return next(
        (int(step) for step, value in zip(steps, values) if (value >= target if above else value <= target)), None
    )


def median_steps(steps: pd.Series) -> float:
    """Median over seeds of a steps-to-threshold column, a run that never reached it counted as +inf."""
    return float(pd.to_numeric(steps, errors="coerce").astype(float).fillna(math.inf).median())


def format_steps(step: float, cap: int) -> str:
    """'1,234', or 'not by <cap>' for a median that was not reached."""
    return f"{step:,.0f}" if math.isfinite(step) else f"not by {cap:,}"
