"""The parts of growcert.reference_runs that the equality test (tests/test_reference_runs.py) does not pin down: the
runs' configs are what their READMEs say (the default run but for the seeds; p3-depth's seeds config), the store
table paths are what Snakemake plans, the reproduction check's relative difference and the columns it leaves out,
grokking-late's arm table, a
unit's CPU time per step, and the report's section for a reference folder."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers import reference_section

from growcert.reference_runs.configs import merged_config, store_tables
from growcert.reference_runs.grokking import late_arm_table, unit_rows
from growcert.reference_runs.join import Join, _largest_relative_difference, joined_rows
from growcert.report.html import build_report

ROOT = Path(__file__).resolve().parents[1]


def test_p2_small_is_the_default_run_but_for_the_seeds(monkeypatch):
    """configs/p2-small.yaml over config.yaml: DPO starts from the default run's reference llama, trained with the
    same settings; PINN, DPO and theory have 8 judged seeds, PINN's lr tuning seeds disjoint from them; every other
    setting of the three sections is the default's."""
    from growcert.plan.grids import train_settings
    from growcert.plan.preference import preference_reference_run

    monkeypatch.chdir(ROOT)
    default, small = merged_config("config.yaml"), merged_config("configs/p2-small.yaml")
    reference = preference_reference_run(small)
    assert reference == preference_reference_run(default)
    assert train_settings(small, reference) == train_settings(default, reference)
    for section in ("pinn", "preference", "theory"):
        assert small[section]["seeds"] == list(range(8))
        assert {k: v for k, v in small[section].items() if k not in ("seeds", "tuning_seeds")} == {
            k: v for k, v in default[section].items() if k not in ("seeds", "tuning_seeds")
        }
    assert not set(small["pinn"]["tuning_seeds"]) & set(small["pinn"]["seeds"])


def test_the_p3_seeds_config_is_p3_depth_but_for_its_seeds(monkeypatch):
    """configs/p3-depth-seeds.yaml trains the runs of configs/p3-depth.yaml with the same settings, seeds 3-5 and the
    committed seed-0 depth-1 run, and grows seeds 0, 3, 4, 5 with the same experiments."""
    from growcert.plan.grids import train_settings, training_runs
    from growcert.plan.settings import grow_experiment_settings

    monkeypatch.chdir(ROOT)
    first, seeds = merged_config("configs/p3-depth.yaml"), merged_config("configs/p3-depth-seeds.yaml")
    runs = training_runs(seeds)
    assert sorted({run.seed for run in runs}) == [0, 3, 4, 5] and [run for run in runs if run.seed == 0] == [
        run for run in training_runs(first) if run.seed == 0 and run.depth == 1
    ]
    for run in training_runs(first):
        moved = dataclasses.replace(run, seed=run.seed + 3)
        assert train_settings(seeds, moved) == {**train_settings(first, run), "seed": moved.seed}
    assert seeds["grow"]["seeds"] == [0, 3, 4, 5] and seeds["dump"] == first["dump"]
    for index in range(2):
        assert {**grow_experiment_settings(seeds, index), "seeds": None} == {
            **grow_experiment_settings(first, index),
            "seeds": None,
        }


def test_the_store_tables_an_export_pools_are_what_snakemake_plans(tmp_path, monkeypatch):
    """A dry run of p1-interventions' targets and its store alignment tables plans every run of the grid once (so the
    path template of reference_runs.configs.store_tables is the rules')."""
    monkeypatch.chdir(ROOT)
    config = "configs/p1-interventions.yaml"
    tables = store_tables(tmp_path / "results", merged_config(config), "alignment")
    assert len(tables) == 18 and tables[0].endswith("stats/alignment/llama/shakespeare/w32_d2_s0/step300.csv")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-n",
            "summarize_interventions",
            *tables,
            "--configfile",
            config,
            "--config",
            f"results={tmp_path / 'results'}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout, re.M))
    assert {
        rule: int(counts.get(rule, 0))
        for rule in ("train_model", "dump_gradients", "estimate_alignment", "intervene", "summarize_interventions")
    } == {
        "train_model": 18,
        "dump_gradients": 18,
        "estimate_alignment": 18,
        "intervene": 18,
        "summarize_interventions": 1,
    }


def test_relative_difference_is_zero_only_for_equal_values_and_nan_pairs():
    a = pd.Series([1.0, 0.0, float("nan"), 2.0])
    assert _largest_relative_difference(a, a.copy()) == 0.0
    assert _largest_relative_difference(a, pd.Series([1.0, 0.0, float("nan"), 2.02])) == pytest.approx(0.02 / 2.02)
    assert _largest_relative_difference(a, pd.Series([1.0, 0.0, 1.0, 2.0])) == float("inf")
    assert _largest_relative_difference(a, pd.Series([1.0, 1e-30, float("nan"), 2.0])) == 1.0
    assert _largest_relative_difference(pd.Series([1e-30]), pd.Series([0.0])) == float("inf")


def test_a_retrained_run_is_reused_whatever_its_wall_time_but_not_whatever_its_outcome():
    """grokking-late's join: wall time (`seconds`) is not compared, steps are; the committed rows come back as they
    are (no column of the retrained rows added) when every run of this one was the committed run's again."""
    join = Join(("regime", "seed"), ("regime", "seed"), ("regime",), not_compared=("seconds",))
    committed = pd.DataFrame(
        {
            "regime": ["nominal", "late", "late"],
            "seed": [0, 0, 3],
            "step_95": [600.0, 8800, None],
            "seconds": [75.0, 249.4, 398.6],
            "p": [97, 47, 47],
        }
    )
    new = pd.DataFrame({"regime": ["late"], "seed": [0], "step_95": [8800.0], "seconds": [512.0], "cpu_seconds": [1.0]})
    keep = {"regime": ["nominal", "late"]}
    rows, check = joined_rows(new, committed, join, keep=keep)
    assert check["reusable"] and check["columns"] == 1 and check["not_compared"] == ["seconds"]
    pd.testing.assert_frame_equal(rows, committed)
    rows, check = joined_rows(new.assign(step_95=8900.0), committed, join, keep=keep)
    # a run that does not reproduce is no check of the committed rows and no row of its own (p3-depth's seed 0)
    assert not check["reusable"] and check["differing_columns"] == ["step_95"] and rows.empty
    rows, _ = joined_rows(new, committed, join)  # without --keep: the committed rows of this run's regimes only
    assert rows["regime"].tolist() == ["late", "late"]


def test_the_late_arm_table_judges_speed_ups_paired_by_seed_with_censoring():
    seeds = [0, 1, 2, 3, 4, 5]
    summary = pd.DataFrame(
        {
            "regime": "late",
            "seed": seeds * 3,
            "optimizer": ["AdamW wd=0.01"] * 6 + ["poprisk-update-exact-wd0.01"] * 6 + ["AdamW wd=1"] * 6,
            "step_95": [
                9000,
                9500,
                10000,
                9200,
                9800,
                9600,
                1900,
                2000,
                2100,
                1950,
                2050,
                2000,
                None,
                None,
                500,
                600,
                700,
                800,
            ],
            "seconds": [90.0, 95, 100, 92, 98, 96, 38, 40, 42, 39, 41, 40, 150, 150, 5, 6, 7, 8],
        }
    )
    table = late_arm_table(summary, cap=15_000, eval_every=100, level=0.95).set_index("optimizer")
    gate = table.loc["poprisk-update-exact-wd0.01"]
    # the registered estimand is the median: 6 seeds give the 95 % order-statistic interval [x_(1), x_(6)]
    assert gate["verdict"] == "reproduced" and 4.5 < gate["speedup"] < 5.0 and gate["speedup_low"] > 3.8
    assert gate["steps_per_seed"] == "1,900, 2,000, 2,100, 1,950, 2,050, 2,000"
    assert gate["seconds_per_step"] == pytest.approx(240 / 12_000)
    slow = table.loc["AdamW wd=1"]  # censored in 2 seeds: "> 15,000", an interval from order statistics, never the cap
    assert slow["steps_per_seed"].startswith("> 15,000, > 15,000, 500") and slow["verdict"] == "unresolved"
    assert slow["speedup_low"] == 0.0 and slow["speedup_high"] == pytest.approx(10_000 / 400)
    assert pd.isna(table.loc["AdamW wd=0.01", "verdict"])


def test_a_units_cpu_per_step_is_its_last_parts_over_the_steps_it_ran(tmp_path):
    """A unit resumed at step 1,000 whose last part took 90 CPU-s to step 4,000: 0.03 s a step, 150 CPU-s in all; a
    unit with no log takes its benchmark file's cpu_time over every step."""
    unit = tmp_path / "AdamW_wd_0.15" / "seed6"
    unit.mkdir(parents=True)
    pd.DataFrame({"optimizer": ["AdamW wd=0.15"], "seed": [6], "step_95": [4000]}).to_csv(
        unit / "summary.csv", index=False
    )
    pd.DataFrame({"step": [0, 2000, 4000], "test_acc": [0.0, 0.5, 0.96]}).to_csv(unit / "curves.csv", index=False)
    (unit / "cpu_seconds.log").write_text("60\n90\n")
    (unit / "log.txt").write_text("grokking a/b mod 47\n...\ngrokking a/b mod 47\nresumed unit x at step 1000\n")
    summary, curves = unit_rows(unit, tmp_path / "none.tsv")
    assert summary["cpu_seconds"].iloc[0] == 150 and summary["cpu_seconds_per_step"].iloc[0] == pytest.approx(0.03)
    assert set(curves["regime"]) == {"calibrated"}
    for name in ("cpu_seconds.log", "log.txt"):
        (unit / name).unlink()
    (tmp_path / "seed6.tsv").write_text("s\tcpu_time\n100\t80\n")
    summary, _ = unit_rows(unit, tmp_path / "seed6.tsv")
    assert summary["cpu_seconds"].iloc[0] == 80 and summary["cpu_seconds_per_step"].iloc[0] == pytest.approx(0.02)
    assert summary["cpu_complete"].iloc[0] and summary["steps_run"].iloc[0] == 4000


def test_a_unit_resumed_by_its_job_or_missing_a_part_has_a_lower_bound_and_its_own_cpu_time_wins(tmp_path):
    """The job that finished a unit resumed it at step 3,000 (its Snakemake log, log.txt): the benchmark's 40 CPU-s
    cover 1,000 steps, a lower bound of the unit's CPU time. A unit whose first session part left no CPU record and
    whose last part's start is not logged: the cost per step is unknown, not the last part's over every step. A
    unit whose summary has its own cpu_seconds (every part's, from its resume state): that, complete."""
    unit = tmp_path / "poprisk" / "seed9"
    unit.mkdir(parents=True)
    pd.DataFrame({"optimizer": ["poprisk"], "seed": [9], "step_95": [4000]}).to_csv(unit / "summary.csv", index=False)
    pd.DataFrame({"step": [0, 2000, 4000], "test_acc": [0.0, 0.5, 0.96]}).to_csv(unit / "curves.csv", index=False)
    (tmp_path / "seed9.tsv").write_text("s\tcpu_time\n50\t40\n")
    (unit / "log.txt").write_text("grokking a/b mod 47: ...\nresumed unit (0, 0) at step 3000 from x/state.pt\n")
    summary, _ = unit_rows(unit, tmp_path / "seed9.tsv")
    assert summary["cpu_seconds"].iloc[0] == 40 and not summary["cpu_complete"].iloc[0]
    assert summary["cpu_seconds_per_step"].iloc[0] == pytest.approx(0.04)
    (unit / "log.txt").write_text("grokking a/b mod 47: ...\ngrokking a/b mod 47: ...\n")
    (unit / "cpu_seconds.log").write_text("76\n")
    summary, _ = unit_rows(unit, tmp_path / "seed9.tsv")
    assert summary["cpu_seconds"].iloc[0] == 76 and not summary["cpu_complete"].iloc[0]
    assert pd.isna(summary["cpu_seconds_per_step"].iloc[0])
    pd.DataFrame({"optimizer": ["poprisk"], "seed": [9], "step_95": [4000], "cpu_seconds": [120.0]}).to_csv(
        unit / "summary.csv", index=False
    )
    summary, _ = unit_rows(unit, tmp_path / "seed9.tsv")
    assert summary["cpu_seconds"].iloc[0] == 120 and summary["cpu_complete"].iloc[0]
    assert summary["cpu_seconds_per_step"].iloc[0] == pytest.approx(0.03)


def test_a_reading_censored_at_its_seeds_adamw_step_shows_that_step_not_the_cap(tmp_path):
    """Paired caps: a reading stopped at its seed's AdamW step (1,900) is "> 1,900" in the table, with the CPU time
    it spent, and its median is not "not by" the cap it never ran to."""
    from growcert.reference_runs.grokking import calibrated_arm_table

    summary = pd.DataFrame(
        {
            "optimizer": ["AdamW wd=0.15"] * 2 + ["poprisk"] * 2,
            "seed": [8, 9] * 2,
            "step_95": [1900, 20200, None, None],
            "steps_run": [1900, 20200, 1900, 20200],
            "cpu_seconds_per_step": [0.02, 0.02, 0.03, None],
            "seconds": [40.0, 400.0, 60.0, 600.0],
        }
    )
    table = calibrated_arm_table(summary, pd.DataFrame(), cap=32000, decay=0.15).set_index("optimizer")
    assert table.loc["poprisk", "steps_per_seed"] == "> 1,900, > 20,200"
    assert table.loc["poprisk", "cpu_seconds_to_95_per_seed"] == "> 57, > ≈ 606"
    assert "32,000" not in table.loc["poprisk", "median_step_95"]
    assert table.loc["poprisk", "cost_over_adamw"] == pytest.approx(1.5)
    assert table.loc["poprisk", "wall_seconds_per_step"] == pytest.approx(660 / 22100)


def test_report_shows_a_reference_folder_in_its_own_labelled_section(tmp_path):
    references = tmp_path / "reference-results"
    folder = references / "grokking-late"
    folder.mkdir(parents=True)
    (folder / "provenance.json").write_text(
        json.dumps(
            {"date": "2026-11-30 08:00 UTC", "commit": "abc1234", "command": "growcert reference export grokking-late"}
        )
    )
    pd.DataFrame({"regime": ["p97"], "optimizer": ["poprisk-update-exact-wd0"], "median_step_95": [5950]}).to_csv(
        folder / "table.csv", index=False
    )
    (folder / "README.md").write_text("# x\n\n## Does it reproduce?\n\n- p97 · poprisk-update-exact-wd0: reproduces\n")
    (references / "not-a-run").mkdir()  # no provenance: not shown
    results = tmp_path / "results"
    section = reference_section(results, references)
    text = (results / "report.html").read_text()
    assert "Reference run: grokking-late" in section and "not this pipeline run" in section
    assert (
        "2026-11-30 08:00 UTC" in section and "abc1234" in section and "poprisk-update-exact-wd0: reproduces" in section
    )
    assert "not-a-run" not in section and '<a href="#reference">Reference runs</a>' in text
    build_report(results, results / "empty.html", references=tmp_path / "none")
    assert "No reference runs" in (results / "empty.html").read_text()
