"""A run joined to a committed reference run (`growcert reference export <name> --join <committed folder>`): its new
seeds judged together with the committed run's, the committed rows reused only when the runs this run retrained
reproduce them (`reproduction_check`).

Which tables join, on which keys, and which columns restrict the committed rows to this run's cells (e.g. the
steps and contexts it trained) is the run's record in growcert.reference_runs.registry (`joins`). A table whose
retrained rows do not reproduce the committed ones is judged on this run's rows alone, and its provenance record
(artifacts.PROVENANCE) says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from growcert.errors import ConfigError


@dataclass(frozen=True)
class Join:
    """How one kept table joins: the columns that identify a row (`keys`), those that identify a trained run
    (`run_keys`), the columns whose values in this run's rows restrict the committed rows (`within`), and those
    whose largest value in this run's rows bounds them (`up_to`, e.g. a training history's step); a table that
    `follows` another is reused when that one is. The reproduction check compares every numeric column but those
    `not_compared`: measurements of the machine, such as wall time, that no retrained run repeats."""

    keys: tuple[str, ...]
    run_keys: tuple[str, ...]
    within: tuple[str, ...] = ()
    up_to: tuple[str, ...] = ()
    follows: str | None = None  # another table whose check decides this one's reuse (its retrained runs have none)
    not_compared: tuple[str, ...] = ()


def _largest_relative_difference(values: pd.Series, committed: pd.Series) -> float:
    """max |a - b| / |b| over the rows (0 where both are equal, NaN pairs among them; inf where one side alone is
    NaN, or b is 0 and a is not)."""
    a, b = values.astype(float).to_numpy(), committed.astype(float).to_numpy()
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(same, 0.0, np.abs(a - b) / np.abs(b))
    relative = np.where(np.isnan(relative), np.inf, relative)
    return float(relative.max()) if len(relative) else 0.0


def _plain(value: Any) -> Any:
    """A run key as JSON keeps it: whole numbers as int, the rest as they are."""
    try:
        return int(value) if float(value).is_integer() else value
    except (TypeError, ValueError):
        return value


def reproduction_check(
    new: pd.DataFrame,
    committed: pd.DataFrame,
    keys: list[str],
    run_keys: list[str],
    rtol: float = 0.0,
    not_compared: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Whether the rows of `new` that `committed` also holds (the same `keys`) are the same: `runs` (the retrained
    runs, by `run_keys`), `rows` and `columns` compared (every numeric column both have but those `not_compared`,
    which the check names), `identical` (value for value, NaN equal to NaN; False when no row is shared),
    `differing_columns`, the largest relative difference of each, and `reusable`: identical, or, with `rtol` > 0,
    every value within `rtol` of the committed one."""
    both = new.merge(committed, on=keys, suffixes=("", "_committed"))
    numeric = [
        c
        for c in new.columns
        if c not in keys
        and c not in not_compared
        and pd.api.types.is_numeric_dtype(new[c])
        and f"{c}_committed" in both.columns
    ]
    differing = [c for c in numeric if not both[c].equals(both[f"{c}_committed"])]
    largest = {c: _largest_relative_difference(both[c], both[f"{c}_committed"]) for c in differing}
    runs = both[run_keys].drop_duplicates().to_dict(orient="records")
    identical = bool(len(both)) and not differing
    close = bool(len(both)) and all(value <= rtol for value in largest.values())
    return {
        "runs": [{k: _plain(v) for k, v in run.items()} for run in runs],
        "rows": int(len(both)),
        "columns": len(numeric),
        "identical": identical,
        "differing_columns": differing,
        "largest_relative_difference": largest,
        "rtol": rtol,
        "not_compared": list(not_compared),
        "reusable": identical or (rtol > 0 and close),
    }


def joined_rows(
    new: pd.DataFrame,
    committed: pd.DataFrame,
    join: Join,
    rtol: float = 0.0,
    keep: dict[str, list] | None = None,
    decided: dict[str, Any] | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(the rows to judge, the check): the committed rows within this run's cells (or at the values `keep` gives a
    column) followed by this run's rows without its retrained runs when the retrained runs reproduce the committed
    rows (or, given, the check `decided` of the table this one follows); this run's rows alone otherwise."""
    for column in join.within:
        values = (keep or {}).get(column)
        if values is not None or len(new):
            committed = committed[committed[column].isin(new[column].unique() if values is None else values)]
    for column in join.up_to:
        committed = committed[committed[column] <= new[column].max()] if len(new) else committed
    check = (
        decided
        if decided is not None
        else reproduction_check(new, committed, list(join.keys), list(join.run_keys), rtol, join.not_compared)
    )
    retrained = {tuple(run[key] for key in join.run_keys) for run in check["runs"]}
    own = new[[tuple(map(_plain, run)) not in retrained for run in zip(*(new[key] for key in join.run_keys))]]
    if not check["reusable"]:
        return own.reset_index(drop=True), check
    # an own part with no rows adds none, nor its columns: every run it made was the committed run's again
    return pd.concat([committed, own], ignore_index=True) if len(own) else committed.reset_index(drop=True), check


def join_folder(
    folder: Path, committed: Path, joins: dict[str, Join], rtol: float = 0.0, keep: dict[str, list] | None = None
) -> dict[str, Any]:
    """Each table of `joins` that `folder` holds (this run's rows) rewritten as joined with the same table of
    `committed` (where it has none, this run's rows stand alone); returns what the run's provenance record
    (artifacts.PROVENANCE) keeps of the join (the committed folder, each table's check and seeds). A table this run
    did not make but the committed run has is kept when the table it follows is reused. ConfigError when the check
    leaves a table no row (every run of this one was retrained, and none reproduces the committed one)."""
    tables = {}
    for name in joins:
        old = pd.read_csv(committed / name) if (committed / name).is_file() else None
        if (folder / name).is_file():
            tables[name] = (pd.read_csv(folder / name), old)
        elif old is not None and joins[name].follows:  # this run made none: the committed rows alone, if reused
            tables[name] = (old.iloc[0:0], old)
    record: dict[str, Any] = {"committed": str(committed), "keep": keep or {}, "tables": {}}
    for name, (new, old) in tables.items():
        follows = joins[name].follows
        decided = record["tables"][follows]["reproduction"] if follows in record["tables"] else None
        if old is None:
            old, decided = (
                new.iloc[0:0],
                {**(decided or {}), "reusable": False, "runs": (decided or {}).get("runs", [])},
            )
        rows, check = joined_rows(new, old, joins[name], rtol, keep, decided)
        if len(new) and not len(rows):  # every run of this one was a check of the committed run's, and failed
            raise ConfigError(
                "--join: the runs this run retrained do not reproduce the committed "
                f"{name} (differing: {', '.join(check['differing_columns'])}) and it made "
                "no other: export it without --join to judge it alone, or give --rtol"
            )
        rows.to_csv(folder / name, index=False)
        seeds = sorted(int(seed) for seed in rows["seed"].dropna().unique()) if "seed" in rows else []
        record["tables"][name] = {"reproduction": check, "seeds": seeds}
    return record
