"""advise-check's growth budget, S (`advise_check.steps`) and lr (`advise_check.lr`), chosen on the tuning checkpoint
alone (docs/science.md, "advise-check: S and lr chosen on the tuning checkpoint").

The grid GRID_STEPS × GRID_LRS is run on the one checkpoint `advise_check.tuning_checkpoint` names, each grid point
a `growcert advise-check` with those steps and lr. `choose_budget` reads only the no-growth arms of that
checkpoint's rows:

    control  the ungrown model trained S steps at lr on the batch order every arm shares (whole's counterpart);
    frozen   the checkpoint as it is (new_block's counterpart), where training on starts from.

No grown arm's outcome and no scored checkpoint enters the rule, so it cannot favour growing, a point or advise's
decisions. It chooses:

1. per S, the lr whose control ends with the lowest held-out loss (a tie: the smaller lr): the comparison is then
   growth against training on at its best step size, not against a control held back by its lr;
2. S: the smallest S of the grid whose best control is within the SESOI of the claim (`advise_beats_first_order`,
   0.001 nats per example) of the next larger S's best control: training on has stopped lowering held-out loss by
   an amount that matters, so a growth's gain over its control is not the descent the control is still making.
   When the control still improves by more than the SESOI at the largest S, the largest S, and the choice says so.

The controls' losses are means over the same outcome examples, read with the same batch order, so their
differences are paired; the rule compares those means as they are (the table does not keep per-example losses).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from growcert.errors import ConfigError

GRID_STEPS = (25, 50, 100)
GRID_LRS = (3e-4, 1e-3, 3e-3)
TUNING_COLUMNS = [
    "steps",
    "lr",
    "frozen_loss",
    "control_loss",
    "improvement",
    "best_lr_at_steps",
    "next_steps_improvement",
]


@dataclass(frozen=True)
class Budget:
    """The chosen S and lr, and why (one line)."""

    steps: int
    lr: float
    reason: str


def is_checkpoint(models: pd.Series, checkpoint: str) -> pd.Series:
    """Which rows' `model` names `checkpoint` (paths compared normalised, as the tables' model column spells them)."""
    return models.map(lambda model: os.path.normpath(str(model)) == os.path.normpath(str(checkpoint)))


def tuning_table(table: pd.DataFrame, tuning_checkpoint: str) -> pd.DataFrame:
    """One row per grid point (steps, lr) of the tuning checkpoint's no-growth arms: the frozen and the trained
    control's held-out loss and the improvement training on made (frozen − control; positive: it lowered the
    loss). Rows of any other checkpoint, and every grown arm's columns, are never read. Refuses (ConfigError, one
    line) a table without the tuning checkpoint, without its trained control (variant whole), or missing a grid
    point, or with two control losses at one grid point."""
    if tuning_checkpoint is None:
        raise ConfigError("advise_check.tuning_checkpoint: null; name the checkpoint S and lr are tuned on")
    rows = table.loc[is_checkpoint(table["model"], tuning_checkpoint), ["steps", "lr", "control", "control_loss"]]
    if rows.empty:
        raise ConfigError(f"advise_check.tuning_checkpoint {tuning_checkpoint}: no rows of it in these tables")
    grid = []
    for steps in GRID_STEPS:
        for lr in GRID_LRS:
            here = rows[(rows["steps"] == steps) & np.isclose(rows["lr"].astype(float), lr, rtol=1e-9, atol=0.0)]
            control = here.loc[here["control"] == "control", "control_loss"].unique()
            frozen = here.loc[here["control"] == "frozen", "control_loss"].unique()
            if len(control) != 1:
                raise ConfigError(
                    f"tuning checkpoint {tuning_checkpoint}: steps {steps}, lr {lr:g} has "
                    f"{len(control)} trained-control losses, not 1 (run advise-check there with "
                    "variant whole)"
                )
            if len(frozen) > 1:
                raise ConfigError(
                    f"tuning checkpoint {tuning_checkpoint}: steps {steps}, lr {lr:g} has "
                    f"{len(frozen)} frozen losses, not 1"
                )
            frozen_loss = float(frozen[0]) if len(frozen) else np.nan
            grid.append(
                {
                    "steps": steps,
                    "lr": lr,
                    "frozen_loss": frozen_loss,
                    "control_loss": float(control[0]),
                    "improvement": frozen_loss - float(control[0]),
                }
            )
    return pd.DataFrame(grid)


def choose_budget(table: pd.DataFrame, tuning_checkpoint: str, sesoi: float) -> tuple[Budget, pd.DataFrame]:
    """(the chosen S and lr, the tuning table with each S's best lr marked and what the next larger S's best
    control gains over this S's): the rule of the module docstring."""
    grid = tuning_table(table, tuning_checkpoint)
    best = {}
    for steps in GRID_STEPS:
        here = grid[grid["steps"] == steps].sort_values(["control_loss", "lr"], kind="stable")
        best[steps] = here.iloc[0]  # the lowest control loss; a tie goes to the smaller lr
    grid["best_lr_at_steps"] = [np.isclose(row.lr, best[row.steps]["lr"]) for row in grid.itertuples()]
    further = {
        steps: float(best[steps]["control_loss"] - best[larger]["control_loss"])
        for steps, larger in zip(GRID_STEPS, GRID_STEPS[1:])
    }
    grid["next_steps_improvement"] = grid["steps"].map(further).astype(float)
    for steps in GRID_STEPS[:-1]:
        if further[steps] <= sesoi:
            larger = GRID_STEPS[GRID_STEPS.index(steps) + 1]
            reason = (
                f"S = {steps}: the smallest S whose best control ({best[steps]['control_loss']:.4f}) is within "
                f"the SESOI {sesoi:g} of S = {larger}'s ({best[larger]['control_loss']:.4f}; "
                f"{further[steps]:+.4f} nats per example); lr {best[steps]['lr']:g}: its control's lowest "
                f"held-out loss at S = {steps}"
            )
            return Budget(int(steps), float(best[steps]["lr"]), reason), grid[TUNING_COLUMNS]
    last = GRID_STEPS[-1]
    reason = (
        f"S = {last}: the largest S of the grid; the control still improves by more than the SESOI {sesoi:g} "
        f"from S = {GRID_STEPS[-2]} to {last} ({further[GRID_STEPS[-2]]:+.4f} nats per example); "
        f"lr {best[last]['lr']:g}: its control's lowest held-out loss at S = {last}"
    )
    return Budget(int(last), float(best[last]["lr"]), reason), grid[TUNING_COLUMNS]
