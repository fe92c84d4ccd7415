"""The grokking-calibrated reference run (benchmarks/grokking_calibrated_reference.py): the calibration's stopping
and acceptance rules on hand-built seeds, and the plumbing of its three phases in seconds (--smoke)."""

import importlib
import json
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "grokking_calibrated_reference.py"


def load_script():
    """Imported by name from benchmarks/ (on sys.path, which spawned job processes inherit)."""
    if str(SCRIPT.parent) not in sys.path:
        sys.path.insert(0, str(SCRIPT.parent))
    return importlib.import_module(SCRIPT.stem)


def test_a_regime_is_accepted_only_when_adamw_groks_late_in_nearly_every_seed_inside_the_cap():
    script = load_script()
    nan = math.nan
    assert script.accepted([3900, 5600, 4200, 7000, 3100, nan], 15_000)[0]  # 5 of 6, median 4,900, slowest 7,000
    assert not script.accepted([3900, 5600, nan, 7000, 3100, nan], 15_000)[0]  # 4 of 6
    early = script.accepted([600, 1200, 900, 1000, 800, 700], 15_000)
    assert not early[0] and "median 850 steps (< 3,000)" in early[1]  # groks, but not late
    capped = script.accepted([3900, 5600, 4200, 12_000, 3100, 4000], 15_000)
    assert not capped[0] and "slowest seed 12,000 steps (> cap / 1.5 = 10,000)" in capped[1]
    # a candidate stopped after three seeds: its unrun seeds count as censored, so it cannot pass
    assert not script.accepted([nan, 4000, nan], 15_000, seeds=6)[0]


def test_the_latest_median_of_the_accepted_regimes_is_chosen():
    script = load_script()
    rows = pd.DataFrame([{"candidate": name, "weight_decay": decay, "cap": cap, "seed": seed, "status": "reached",
                          "step_95": step}
                         for name, decay, cap, steps in (("wd0.3", 0.3, 15_000, [3000, 3500, 4000, 4500, 5000, 5500]),
                                                         ("wd0.2", 0.2, 20_000, [4000, 5000, 6000, 7000, 8000, 9000]),
                                                         ("wd0.15", 0.15, 25_000, [9000, 9000, 9000, 9000, 30_000,
                                                                                   30_000]))
                         for seed, step in enumerate(steps)])
    rows.loc[rows["step_95"] > 25_000, ["status", "step_95"]] = ["censored", math.nan]
    table = script.candidate_table(rows)
    assert list(table["accepted"]) == [True, True, False]  # wd0.15: 4 of 6
    chosen = script.choose_regime(table)
    assert chosen["candidate"] == "wd0.2" and chosen["median_step_95"] == 6500
    assert script.reference_cap(chosen, rows) == 18_000 or script.reference_cap(chosen, rows) == 20_000
    assert script.reference_cap(chosen, rows) == max(20_000, 18_000)  # twice the slowest, at least the cap
    # while a named candidate still has seeds to run, no regime is chosen, even though two already pass
    pending = rows[~((rows["candidate"] == "wd0.15") & (rows["seed"] == 5))]
    assert script.choose_regime(script.candidate_table(pending)) is None


def test_smoke_phases_write_the_folder_and_resume(tmp_path, capsys):
    script = load_script()
    out = tmp_path / "grokking-calibrated"
    common = ["--smoke", "--candidates", "1.0:20", "--out", str(out), "--work", str(out)]
    script.main(["calibrate", *common, "--parallel", "2"])
    calibration = pd.read_csv(out / "calibration.csv")
    # 20 steps never grok: 2 of the first 3 seeds censored stops the candidate before seed 3
    assert list(calibration["status"]) == ["censored"] * 3 + ["not run (stopping rule)"]
    assert not pd.read_csv(out / "candidates.csv")["accepted"].any()
    assert "No regime chosen yet" in (out / "README.md").read_text()
    script.main(["reference", *common, "--regime", "1.0:20", "--parallel", "2"])
    table = pd.read_csv(out / "table.csv")
    assert set(table["optimizer"]) >= {"AdamW wd=1", "Grokfast-EMA wd=0.005 (L2)", "poprisk-update-exact-wd1",
                                       "poprisk-gradient-microbatch-wd1"}
    assert (table["seeds"] == 2).all() and (table["cpu_seconds_per_step"] > 0).all()
    claims = pd.read_csv(out / "claims.csv")
    assert list(claims["role"]) == ["part"] * 6 + ["primary"]
    record = json.loads((out / "provenance.json").read_text())
    assert record["cost"]["cpu_hours"] >= 0 and len(record["commands"]) == 3
    script.main(["nominal", *common, "--regime", "1.0:20"])
    readme = (out / "README.md").read_text()
    assert "given by hand, not by the rule" in readme and "init: pytorch" in readme and "not 95 % by 20 steps" in readme
    # every job kept: a second reference call runs nothing
    capsys.readouterr()
    script.main(["reference", *common, "--regime", "1.0:20"])
    assert "16 of 16 jobs already done; 0 to run" in capsys.readouterr().out


def test_the_reference_run_judges_seeds_the_calibration_never_saw():
    """The regime is chosen for AdamW's late median on the calibration seeds; judging the same seeds would compare
    every reading with a baseline selected for being slow."""
    script = load_script()
    assert len(script.REFERENCE_SEEDS) == 8
    assert not set(script.REFERENCE_SEEDS) & set(script.CALIBRATION_SEEDS)
    assert not set(script.SMOKE["reference_seeds"]) & set(script.SMOKE["calibration_seeds"])


def test_cpu_per_step_comes_from_the_part_that_finished_a_job_and_a_killed_part_is_folded_in(tmp_path):
    """A job killed at the end of a session (no `finally`: no CPU line) and resumed at step 5,000 that reached 95 %
    at 5,800 in 51.14 CPU-seconds costs 51.14 / 800 per step, not 51.14 / 5,800; a killed part's heartbeat
    (cpu_seconds.part) joins the log on the next start, so the CPU-hours count it."""
    script = load_script()
    folder = tmp_path / "units" / "poprisk-gradient-exact-wd0.15" / "seed6"
    folder.mkdir(parents=True)
    (folder / "log.txt").write_text(
        "grokking a/b mod 47: 1081 train / 1081 held-out equations, 1 optimizers x 1 seeds, up to 32000 steps\n"
        "  step 2000: train acc 0.993  held-out acc 0.063  (209s)\n"
        "grokking a/b mod 47: 1081 train / 1081 held-out equations, 1 optimizers x 1 seeds, up to 32000 steps\n"
        "resumed unit (0, 0) at step 5000 from state.pt\n")
    (folder / "cpu_seconds.log").write_text("51.14\n")
    pd.DataFrame([{"optimizer": "poprisk-gradient-exact-wd0.15", "weight_decay": 0.15, "seed": 6,
                   "memorised_step": 300, "step_95": 5800, "step_99": None, "final_test_acc": 0.96,
                   "seconds": 650.0}]).to_csv(folder / "summary.csv", index=False)
    pd.DataFrame({"step": [5800], "test_acc": [0.96]}).to_csv(folder / "curves.csv", index=False)
    assert script.unrecorded_parts(tmp_path) == 1  # the killed first part; the README calls the CPU-hours a bound
    job = script.Job({"steps": 32_000, "seeds": [6]}, folder, "poprisk-gradient-exact-wd0.15")
    summary, _ = job.finished()
    assert summary["cpu_seconds_per_step"].item() == pytest.approx(51.14 / 800)
    table = script.arm_table(summary, pd.DataFrame(), 32_000, 0.15)
    assert table["cpu_seconds_per_step"].item() == pytest.approx(51.14 / 800)
    assert table["cpu_seconds_to_95_per_seed"].item() == f"{51.14 / 800 * 5800:,.0f}"
    # a censored job ran to the cap: its last part's steps run from its resume point to the cap
    assert script.last_part_rate(folder, 32_000) == pytest.approx(51.14 / 27_000)
    (folder / "cpu_seconds.part").write_text("400.00\n")
    script.fold_killed_part(folder)
    assert not (folder / "cpu_seconds.part").exists()
    assert script.cpu_seconds(folder) == pytest.approx(451.14)
