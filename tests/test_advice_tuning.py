"""advise-check's S and lr chosen on the tuning checkpoint (growcert.report.advice_tuning): the rule on hand-made
tables whose answer is worked out by hand, never reading a scored checkpoint's rows or a grown arm's outcome."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import assert_tables_match

from growcert.cli import main
from growcert.errors import ConfigError
from growcert.report import advice_check
from growcert.report.advice_tuning import GRID_LRS, GRID_STEPS, choose_budget

TUNING = "results/models/llama/shakespeare/w32_d2_s8_c256/step300.pt"
SCORED = "results/models/llama/shakespeare/w32_d2_s0_c256/step300.pt"
SESOI = 0.001
FROZEN = 2.0
# control's held-out loss per (S, lr), rows S = 25, 50, 100, columns lr = 3e-4, 1e-3, 3e-3. By hand: best lr per S
# is 1e-3 (1.980), 3e-3 (1.9705), 3e-3 (1.9698); 25 -> 50 gains 0.0095 > SESOI, 50 -> 100 gains 0.0007 <= SESOI:
# S = 50, lr = 3e-3.
PLATEAU_AT_50 = [[1.990, 1.980, 1.985], [1.985, 1.972, 1.9705], [1.975, 1.9700, 1.9698]]


def grid_rows(model: str, losses, points=("block0", "block1")) -> pd.DataFrame:
    """advise-check rows of one checkpoint at every grid point: per point, a new_block row (control frozen) and a
    whole row (control trained); the grown arms' columns are NaN, so a rule that read them would not choose."""
    rows = []
    for i, steps in enumerate(GRID_STEPS):
        for j, lr in enumerate(GRID_LRS):
            for point in points:
                for variant, control, loss in (("new_block", "frozen", FROZEN), ("whole", "control", losses[i][j])):
                    rows.append(
                        {column: np.nan for column in advice_check.COLUMNS}
                        | {
                            "model": model,
                            "family": "llama",
                            "width": 32,
                            "depth": 2,
                            "train_seed": 8,
                            "step": 300,
                            "point": point,
                            "variant": variant,
                            "decision": "grow here",
                            "control": control,
                            "control_loss": loss,
                            "steps": steps,
                            "lr": lr,
                            "batches": "x",
                            "control_batches": "x",
                        }
                    )
    return pd.DataFrame(rows, columns=advice_check.COLUMNS)


def test_the_lr_that_trains_on_best_and_the_smallest_s_where_training_on_stops_paying():
    budget, grid = choose_budget(grid_rows(TUNING, PLATEAU_AT_50), TUNING, SESOI)
    assert (budget.steps, budget.lr) == (50, 3e-3)
    assert grid.loc[grid["best_lr_at_steps"], "lr"].tolist() == [1e-3, 3e-3, 3e-3]
    assert grid.loc[grid["steps"] == 25, "next_steps_improvement"].iloc[0] == pytest.approx(1.980 - 1.9705)
    assert grid.loc[grid["steps"] == 50, "next_steps_improvement"].iloc[0] == pytest.approx(1.9705 - 1.9698)
    assert grid["improvement"].to_numpy() == pytest.approx(FROZEN - np.ravel(PLATEAU_AT_50))


def test_a_control_still_improving_at_the_largest_s_takes_the_largest_s_and_says_so():
    still = [[1.99, 1.98, 1.985], [1.98, 1.97, 1.975], [1.97, 1.96, 1.955]]  # 0.01 then 0.015 per step of the grid
    budget, _ = choose_budget(grid_rows(TUNING, still), TUNING, SESOI)
    assert (budget.steps, budget.lr) == (100, 3e-3)
    assert "still improves" in budget.reason


def test_a_plateau_at_once_and_a_tie_give_the_smallest_s_and_the_smaller_lr():
    flat = [[1.97, 1.97, 1.99], [1.9695, 1.98, 1.99], [1.9699, 1.98, 1.99]]  # a tie at S = 25: 3e-4 and 1e-3
    budget, grid = choose_budget(grid_rows(TUNING, flat), TUNING, SESOI)
    assert (budget.steps, budget.lr) == (25, 3e-4)
    # a control that gets worse with more steps is a plateau too: training on has stopped paying
    worse = [[1.97, 1.98, 1.99], [1.975, 1.98, 1.99], [1.98, 1.98, 1.99]]
    assert choose_budget(grid_rows(TUNING, worse), TUNING, SESOI)[0].steps == 25


def test_scored_checkpoints_and_grown_arms_are_never_read():
    """A scored checkpoint's rows that would choose differently (a plateau at S = 25, lr 3e-4) and grown arms
    favouring another S change nothing; the tuning checkpoint is matched however its path is spelled."""
    alone = choose_budget(grid_rows(TUNING, PLATEAU_AT_50), TUNING, SESOI)
    scored = grid_rows(SCORED, [[1.5, 1.9, 1.9], [1.5, 1.9, 1.9], [1.5, 1.9, 1.9]])
    tuning = grid_rows(TUNING, PLATEAU_AT_50)
    rng = np.random.default_rng(0)
    tuning = tuning.assign(
        outcome=rng.normal(size=len(tuning)), outcome_se=1e-6, grown_loss=np.where(tuning["steps"] == 25, 0.0, 9.0)
    )
    pooled = pd.concat([scored, tuning, scored], ignore_index=True)
    budget, grid = choose_budget(pooled, "./" + TUNING, SESOI)
    assert budget == alone[0]
    pd.testing.assert_frame_equal(grid, alone[1])
    with pytest.raises(ConfigError, match="no rows of it"):
        choose_budget(scored, TUNING, SESOI)


def test_a_missing_grid_point_or_no_trained_control_is_refused():
    rows = grid_rows(TUNING, PLATEAU_AT_50)
    with pytest.raises(ConfigError, match="steps 100, lr 0.003 has 0 trained-control losses"):
        choose_budget(rows[~((rows["steps"] == 100) & (rows["lr"] == 3e-3))], TUNING, SESOI)
    with pytest.raises(ConfigError, match="trained-control losses"):
        choose_budget(rows[rows["variant"] == "new_block"], TUNING, SESOI)
    with pytest.raises(ConfigError, match="tuning_checkpoint: null"):
        choose_budget(rows, None, SESOI)


def test_the_command_writes_the_grid_and_the_choice_and_refuses_a_table_without_the_tuning_checkpoint(tmp_path, capsys):
    grid_rows(TUNING, PLATEAU_AT_50).to_csv(tmp_path / "tuning.csv", index=False)
    grid_rows(SCORED, PLATEAU_AT_50).to_csv(tmp_path / "scored.csv", index=False)
    settings = json.dumps({"tuning_checkpoint": TUNING})
    assert (
        main(
            ["tune-advise-check", str(tmp_path / "tuning.csv"), "--settings", settings, "--out", str(tmp_path / "out")]
        )
        == 0
    )
    choice = pd.read_csv(tmp_path / "out" / "choice.csv")
    assert choice[["steps", "lr", "sesoi"]].iloc[0].tolist() == [50, 3e-3, SESOI]
    assert len(pd.read_csv(tmp_path / "out" / "tuning.csv")) == len(GRID_STEPS) * len(GRID_LRS)
    capsys.readouterr()
    assert (
        main(["tune-advise-check", str(tmp_path / "scored.csv"), "--settings", settings, "--out", str(tmp_path / "no")])
        == 2
    )
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "no rows of it" in lines[0], lines
    assert not (tmp_path / "no").exists()


def test_the_committed_choice_is_the_rule_on_the_committed_tuning_tables_and_the_config_holds_it(tmp_path):
    """docs/reference-results/advise-check/tuning: its README's command on the committed grid tables writes the very
    tuning.csv and choice.csv kept there, and configs/advise-check.yaml sets the chosen S and lr for the next run."""
    import yaml

    from growcert.config import stage_settings

    root = Path(__file__).resolve().parents[1]
    kept = root / "docs" / "reference-results" / "advise-check" / "tuning"
    section = yaml.safe_load((root / "configs" / "advise-check.yaml").read_text())["advise_check"]
    tables = sorted((kept / "tables").glob("*.csv"))
    assert len(tables) == len(GRID_STEPS) * len(GRID_LRS)
    settings = json.dumps({"tuning_checkpoint": section["tuning_checkpoint"]})
    assert main(["tune-advise-check", *map(str, tables), "--settings", settings, "--out", str(tmp_path)]) == 0
    for name in ("tuning.csv", "choice.csv"):
        assert_tables_match(pd.read_csv(tmp_path / name, dtype=str), pd.read_csv(kept / name, dtype=str), name)
    choice = pd.read_csv(kept / "choice.csv").iloc[0]
    configured = stage_settings("advise_check", section)
    assert (configured["steps"], configured["lr"]) == (int(choice["steps"]), float(choice["lr"]))
