"""The unit of a P2 task (growcert.experiments.units): one arm at one seed, its own job and folder.

A unit rebuilds what its arm shares with the other arms of its seed from the seed, so the setup is bit-identical
across the units of a seed and a unit run alone (`growcert <task> --arm A --seed S`) writes the rows it has in a
run of the whole task in one process; the aggregate of units run apart is that whole run's tables and claims.
The plan gives one p2_unit job per (arm, seed) and the task rule gathers them."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from growcert import cli
from growcert.config import stage_settings
from growcert.errors import ConfigError
from growcert.experiments import task
from growcert.experiments.units import aggregate_units
from growcert.pipeline import artifacts
from growcert.plan import Plan, validate_config
from growcert.store.compare import VOLATILE_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
GROKKING = {
    "p": 11,
    "train_fraction": 0.6,
    "seeds": [0, 3],
    "steps": 30,
    "batch_size": 16,
    "eval_every": 10,
    "stop_at_test_acc": None,
    "model": {"width": 16, "depth": 1, "heads": 2},
    "adamw": {"weight_decays": [0.1]},
    "grokfast": {"enabled": False},
    "poprisk": {"weight_decays": [0.1], "gates": ["update"], "variances": ["microbatch"], "microbatches": 2},
}
PINN = {
    "ic_points": 16,
    "collocation_points": 32,
    "boundary_points": 8,
    "batch_size": 14,
    "width": 8,
    "depth": 1,
    "steps": 10,
    "eval_every": 5,
    "seeds": [0],
    "tuning_seeds": [1],
    "adamw_lrs": [1e-2],
    "poprisk": {"lrs": [1e-2], "gates": ["update"], "variances": ["streaming"]},
}


def quiet(_: str) -> None:
    pass


def test_the_setup_a_seed_shares_is_rebuilt_bit_identical_in_each_unit():
    """Each unit draws its seed's initial weights (and, for the PINN, its noisy observations and point pools) from
    the seed alone: whatever the global generator went through before (another arm's training), the same bits."""
    from growcert.experiments import grokking, pinn

    cpu = torch.device("cpu")
    settings = stage_settings("grokking", GROKKING)
    first = grokking.prepare_seed(settings, 3, cpu)[1]
    torch.rand(1000)  # what an earlier arm in the same process may have drawn
    second = grokking.prepare_seed(settings, 3, cpu)[1]
    assert first.keys() == second.keys()
    assert all(torch.equal(first[key], second[key]) for key in first)
    other = grokking.prepare_seed(settings, 0, cpu)[1]
    assert not all(torch.equal(first[key], other[key]) for key in first)  # the seed matters

    settings = stage_settings("pinn", PINN)
    problem, _, weights = pinn.prepare_seed(settings, 1, cpu)
    torch.rand(1000)
    again_problem, _, again_weights = pinn.prepare_seed(settings, 1, cpu)
    assert all(torch.equal(problem[key], again_problem[key]) for key in problem)
    assert all(torch.equal(weights[key], again_weights[key]) for key in weights)


def read(folder, name):
    return pd.read_csv(folder / f"{name}.csv").drop(columns=list(VOLATILE_COLUMNS), errors="ignore")  # timings differ


def test_units_run_apart_are_the_whole_task_and_aggregate_to_its_tables_and_claims(tmp_path):
    whole = tmp_path / "whole" / "grokking"
    reports = {
        kind: str(tmp_path / "whole" / f"{kind}.{suffix}")
        for kind, suffix in (("figure", "png"), ("claims", "csv"), ("table", "csv"))
    }
    assert (
        cli.main(
            [
                "grokking",
                "--settings",
                json.dumps(GROKKING),
                "--out",
                str(whole),
                "--figure",
                reports["figure"],
                "--claims",
                reports["claims"],
                "--table",
                reports["table"],
            ]
        )
        == 0
    )
    units = task("grokking").units(GROKKING)
    assert units == [
        ("AdamW_wd_0.1", 0),
        ("poprisk-update-microbatch-wd0.1", 0),
        ("AdamW_wd_0.1", 3),
        ("poprisk-update-microbatch-wd0.1", 3),
    ]

    apart = tmp_path / "apart" / "grokking"
    for arm, seed in reversed(units):  # any order: each unit is on its own
        folder = artifacts.TASK_UNIT.path(apart, arm=arm, seed=seed)
        assert (
            cli.main(
                [
                    "grokking",
                    "--settings",
                    json.dumps(GROKKING),
                    "--arm",
                    arm,
                    "--seed",
                    str(seed),
                    "--out",
                    str(folder),
                ]
            )
            == 0
        )
        for name in ("curves", "summary"):
            pd.testing.assert_frame_equal(
                read(folder, name), read(artifacts.TASK_UNIT.path(whole, arm=arm, seed=seed), name), check_exact=True
            )
        assert not (folder / ".resume").exists()
    claims = tmp_path / "apart" / "claims.csv"
    assert (
        cli.main(
            [
                "grokking",
                "--settings",
                json.dumps(GROKKING),
                "--aggregate",
                "--out",
                str(apart),
                "--figure",
                str(tmp_path / "apart" / "f.png"),
                "--claims",
                str(claims),
                "--table",
                str(tmp_path / "apart" / "t.csv"),
            ]
        )
        == 0
    )
    for name in ("curves", "summary"):
        pd.testing.assert_frame_equal(read(apart, name), read(whole, name), check_exact=True)
    assert claims.read_text() == open(reports["claims"]).read()
    provenance = json.loads((apart / "provenance.json").read_text())
    assert [unit["folder"] for unit in provenance["units"]] == [f"units/{arm}/seed{seed}" for arm, seed in units]


def test_a_rerun_of_the_whole_task_keeps_its_finished_units(tmp_path):
    settings = stage_settings("pinn", PINN)
    logs = []
    task("pinn").run_unit(
        settings, tmp_path / "units" / "AdamW-lr0.01" / "seed1", "AdamW-lr0.01", 1, log=quiet, device="cpu"
    )
    from growcert.experiments.pinn import run_pinn

    run_pinn(PINN, tmp_path, log=logs.append, threads=1, device="cpu")
    assert [line for line in logs if "kept" in line] == [
        f"unit AdamW-lr0.01 seed 1: finished in {tmp_path}/units/AdamW-lr0.01/seed1, kept"
    ]
    assert len(pd.read_csv(tmp_path / "summary.csv")) == 4  # 2 arms x 2 seeds (judged and tuning)


def test_aggregate_refuses_a_task_whose_units_have_not_finished(tmp_path):
    with pytest.raises(
        ConfigError,
        match=r"2 unit\(s\) of .* have not finished \(no summary.csv\), e.g. "
        r".*/units/AdamW-lr0.01/seed0",
    ):
        aggregate_units(task("pinn"), stage_settings("pinn", {**PINN, "poprisk": {"gates": []}}), tmp_path)


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--arm", "AdamW_wd_0.1"], "--arm and --seed name one unit together (and without --aggregate)"),
        (
            ["--arm", "AdamW_wd_1", "--seed", "0"],
            "--arm 'AdamW_wd_1' is not an arm of config key 'grokking' (its arms: AdamW_wd_0.1, "
            "poprisk-update-microbatch-wd0.1)",
        ),
        (["--arm", "AdamW_wd_0.1", "--seed", "1"], "--seed 1 is not a seed of config key 'grokking' (its seeds: 0, 3)"),
        ([], "growcert grokking needs --figure, --claims, --table (or --arm and --seed for one unit)"),
    ],
)
def test_a_bad_unit_is_one_line_naming_it_and_exit_2(arguments, message, tmp_path, capsys):
    status = cli.main(["grokking", "--settings", json.dumps(GROKKING), "--out", str(tmp_path / "out"), *arguments])
    error = capsys.readouterr().err
    assert status == 2 and error == f"growcert grokking: error: {message}\n"
    assert not (tmp_path / "out").exists()


def test_the_plan_makes_one_unit_job_per_arm_and_seed_and_the_task_job_gathers_them():
    config = validate_config(yaml.safe_load((ROOT / "configs" / "ci.yaml").read_text()))
    plan = Plan(config)
    wildcards = types.SimpleNamespace(task="grokking")
    units = task("grokking").units(config["grokking"])
    assert len(units) == len(config["grokking"]["seeds"]) * 9  # AdamW x 2 decays, Grokfast, 6 gate variants
    assert plan.task_units(wildcards) == [
        f"{config['results']}/grokking/units/{arm}/seed{seed}/summary.csv" for arm, seed in units
    ]
    assert plan.aggregate_option(wildcards) == "--aggregate" and plan.aggregate_threads(wildcards) == 1
    assert plan.task_units(types.SimpleNamespace(task="theory")) == []  # no arms: one job, as before
    assert plan.aggregate_option(types.SimpleNamespace(task="theory")) == ""
    arm, seed = units[-1]
    unit = json.loads(plan.unit_settings(types.SimpleNamespace(task="grokking", arm=arm, seed=str(seed))))
    assert unit["seeds"] == [seed] and unit["only_arms"] == ["poprisk-gradient-microbatch-wd0.01"]
    assert {key: value for key, value in unit.items() if key not in ("seeds", "only_arms")} == {
        key: value
        for key, value in stage_settings("grokking", config["grokking"]).items()
        if key not in ("seeds", "only_arms")
    }


# ------------------------------------------------------------------ paired caps (grokking.cap: paired)

PAIRED = {**GROKKING, "seeds": [0], "cap": "paired"}
READING = "poprisk-update-microbatch-wd0.1"


def test_a_paired_reading_stops_at_its_seeds_adamw_step_with_the_rows_of_the_fixed_run_up_to_it(tmp_path):
    """The reading's job reads its seed's AdamW unit summary and runs to that step: its rows are the fixed-cap
    run's up to there, bit for bit (stopping changes none of the steps before it); AdamW censored there: the cap."""
    fixed = tmp_path / "fixed"
    assert (
        cli.main(
            [
                "grokking",
                "--settings",
                json.dumps({**GROKKING, "seeds": [0]}),
                "--arm",
                READING,
                "--seed",
                "0",
                "--out",
                str(fixed),
            ]
        )
        == 0
    )
    for adamw_step, stopped in ((20, 20), (None, GROKKING["steps"])):
        baseline = tmp_path / f"adamw{adamw_step}" / "summary.csv"
        baseline.parent.mkdir()
        pd.DataFrame(
            [
                {
                    "optimizer": "AdamW wd=0.1",
                    "weight_decay": 0.1,
                    "seed": 0,
                    "memorised_step": None,
                    "step_95": adamw_step,
                    "step_99": None,
                    "final_test_acc": 0.9,
                    "seconds": 1.0,
                }
            ]
        ).to_csv(baseline, index=False)
        out = tmp_path / f"paired{adamw_step}"
        assert (
            cli.main(
                [
                    "grokking",
                    "--settings",
                    json.dumps(PAIRED),
                    "--arm",
                    READING,
                    "--seed",
                    "0",
                    "--unit-inputs",
                    str(baseline),
                    "--out",
                    str(out),
                ]
            )
            == 0
        )
        curves, whole = read(out, "curves"), read(fixed, "curves")
        assert curves["step"].max() == stopped
        pd.testing.assert_frame_equal(curves, whole[whole["step"] <= stopped], check_exact=True)
        recorded = json.loads((out / "provenance.json").read_text())
        assert recorded.get("paired_cap") == (adamw_step if adamw_step else None)


def test_a_paired_run_in_one_process_caps_each_reading_at_its_seeds_adamw_unit(tmp_path):
    from growcert.experiments.grokking import run_grokking

    tables = run_grokking({**PAIRED, "seeds": [0, 3]}, tmp_path, log=quiet, threads=1, device="cpu")
    units = json.loads((tmp_path / "provenance.json").read_text())["units"]
    summary = tables["summary"].set_index(["optimizer", "seed"])
    for unit in units:
        arm, seed = unit["folder"].split("/")[1], int(unit["folder"].split("seed")[-1])
        if arm == READING:  # AdamW never reaches 95 % here: the reading runs to the cap
            assert "paired_cap" not in unit and pd.isna(summary.loc[("AdamW wd=0.1", seed), "step_95"])
    assert task("grokking").unit_inputs(PAIRED, READING, 0) == [("AdamW_wd_0.1", 0)]
    assert task("grokking").unit_inputs(PAIRED, "AdamW_wd_0.1", 0) == []
    assert task("grokking").unit_inputs({**PAIRED, "cap": "fixed"}, READING, 0) == []


def test_a_reading_censored_at_its_paired_cap_is_bounded_there_not_at_the_cap():
    """Baseline reached 95 % at 1,000 (known to the evaluation interval 100), the reading did not by then: its
    speed-up lies in (0, 1000/1000], not (0, 1000/cap] as a run stopped at the cap would say."""
    import math

    import numpy as np

    from growcert.stats.seeds import step_bounds

    fixed = step_bounds([1000.0, 2000.0], [math.nan, 500.0], 8000, 100)
    paired = step_bounds([1000.0, 2000.0], [math.nan, 500.0], 8000, 100, variant_cap=[1000.0, 8000.0])
    assert paired.upper[0] == pytest.approx(0.0) and fixed.upper[0] == pytest.approx(math.log(1000 / 8000))
    assert paired.lower[0] == fixed.lower[0] == -math.inf
    np.testing.assert_array_equal(paired.upper[1:], fixed.upper[1:])  # a reading that reached it: unchanged


def test_paired_claims_read_a_censored_reading_up_to_its_seeds_adamw_step():
    from growcert.experiments.grokking_report import grokking_claims

    seeds = range(8)
    rows = [
        {"optimizer": "AdamW wd=0.1", "weight_decay": 0.1, "seed": seed, "step_95": 1000 + 100 * seed} for seed in seeds
    ]
    rows += [{"optimizer": READING, "weight_decay": 0.1, "seed": seed, "step_95": None} for seed in seeds]
    table = pd.DataFrame(rows)
    settings = {**GROKKING, "steps": 8000, "eval_every": 100}
    fixed, paired = (grokking_claims(table, {**settings, "cap": cap})[0] for cap in ("fixed", "paired"))
    assert paired["high"] == pytest.approx(1.0)  # the readings' upper bounds: B_s / B_s
    assert fixed["high"] < 0.25  # the cap read as each reading's censoring point: at most 1,700 / 8,000


@pytest.mark.parametrize(
    "settings, message",
    [
        ({**PAIRED, "cap": "sometimes"}, "config key 'grokking.cap': 'sometimes' is not one of ['fixed', 'paired']"),
    ],
)
def test_a_bad_paired_setting_is_one_line_naming_the_key_and_exit_2(settings, message, tmp_path, capsys):
    status = cli.main(
        [
            "grokking",
            "--settings",
            json.dumps(settings),
            "--out",
            str(tmp_path / "out"),
            "--figure",
            str(tmp_path / "f.png"),
            "--claims",
            str(tmp_path / "c.csv"),
            "--table",
            str(tmp_path / "t.csv"),
        ]
    )
    error = capsys.readouterr().err
    assert status == 2 and message in error and error.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_a_paired_reading_without_its_adamw_summary_is_one_line_and_exit_2(tmp_path, capsys):
    status = cli.main(
        ["grokking", "--settings", json.dumps(PAIRED), "--arm", READING, "--seed", "0", "--out", str(tmp_path / "out")]
    )
    assert status == 2 and capsys.readouterr().err == (
        "growcert grokking: error: config key 'grokking.cap': paired needs the summary.csv of "
        f"{READING}'s AdamW unit at its seed (--unit-inputs), got none\n"
    )


# ------------------------------------------------------------------ the grokking reference runs as configs


@pytest.mark.parametrize(
    "names, units_folder, count",
    [
        (("grokking-calibrated", "grokking-calibrated-seeds-14-21"), "units", 144),  # seeds 6-13, then the third look's
        (("grokking-calibration",), "units-calibration", 18),
    ],
)
def test_a_reference_run_is_a_config_of_one_job_per_arm_and_seed_holding_its_committed_units(
    names, units_folder, count
):
    """configs/<name>.yaml (each of the run's looks) plans one p2_unit job per arm x seed; every unit committed under
    docs/reference-results/grokking-calibrated/ is one of them, in its folder, with the summary a unit writes."""
    from growcert.experiments.grokking import SUMMARY_COLUMNS

    planned = set()
    for name in names:
        merged = yaml.safe_load((ROOT / "config.yaml").read_text())
        merged.update(yaml.safe_load((ROOT / "configs" / f"{name}.yaml").read_text()))
        config = validate_config(merged)
        planned |= set(Plan(config).task_units(types.SimpleNamespace(task="grokking")))
    assert len(planned) == count
    committed = sorted((ROOT / "docs" / "reference-results" / "grokking-calibrated" / units_folder).glob("*/seed*"))
    assert committed
    for folder in committed:
        unit = artifacts.UNIT.path(
            config["results"], task="grokking", arm=folder.parent.name, seed=folder.name.removeprefix("seed")
        )
        assert f"{unit}/summary.csv" in planned
        if (folder / "summary.csv").is_file():
            columns = pd.read_csv(folder / "summary.csv").columns.tolist()
            before_numerics = [column for column in SUMMARY_COLUMNS if not column.startswith("numerics")]
            before_cpu = [column for column in before_numerics if column != "cpu_seconds"]  # before its own CPU time
            assert columns in (SUMMARY_COLUMNS, before_numerics, before_cpu)
