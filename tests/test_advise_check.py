"""`growcert advise-check`: end to end on a tiny trained llama, the same batches for every arm and its control, the
scores against hand-computed values, and bad inputs."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from helpers import assert_tables_match

from growcert.cli import main
from growcert.config import stage_settings
from growcert.data import load_prepared
from growcert.referee.claims import CLAIMS
from growcert.report import advice_check
from growcert.stages.summaries import summarize_advise_check
from growcert.stats.growth_outcomes import CONFIRMATION, EXPLORATION, paired_outcome, regret, reliability, seed_half
from growcert.stats.seeds import t_quantile

EXAMPLES = 32
SETTINGS = {"steps": 6, "outcome_examples": 48}
OUTPUTS = (
    "advice",
    "advise_check.csv",
    "claims.csv",
    "provenance.json",
    "reliability.csv",
    "reliability.png",
    "scorecard.csv",
    "matched_scorecard.csv",
    "calibration.csv",
    "growth_won.csv",
    "answer.txt",
    "advice_calibration.png",
)


@pytest.fixture(scope="module")
def llama(tiny_llama):
    """(checkpoint, prepared folder) of the session's tiny llama (conftest.tiny_llama)."""
    return tiny_llama


@pytest.fixture(scope="module")
def checked(llama, tmp_path_factory):
    checkpoint, data = llama
    out = tmp_path_factory.mktemp("advise-check") / "out"
    assert (
        main(
            [
                "advise-check",
                "--model",
                str(checkpoint),
                "--data",
                str(data),
                "--out",
                str(out),
                "--examples",
                str(EXAMPLES),
                "--settings",
                json.dumps(SETTINGS),
            ]
        )
        == 0
    )
    return out


def test_every_point_and_variant_is_grown_beside_advises_decision(checked):
    assert sorted(path.name for path in checked.iterdir()) == sorted(OUTPUTS)  # the work folder is gone
    table = pd.read_csv(checked / "advise_check.csv")
    # what advise-check scores per point is advise's first-order reading (column first_order of advice.csv)
    decided = pd.read_csv(checked / "advice" / "advice.csv").query("option != 'train on'").set_index("point")
    procedures = ["new_block", "whole", "whole_gated"]
    assert list(table["point"]) == [point for point in ("block0", "block1", "block2") for _ in procedures]
    assert list(table["variant"]) == procedures * 3
    assert list(table["decision"]) == list(decided.loc[table["point"], "first_order"])
    for column in ("value", "b_exact", "scaled_value"):
        assert np.array_equal(table[column], decided.loc[table["point"], column], equal_nan=True), column
    assert (table["n_outcome"] == SETTINGS["outcome_examples"]).all() and (table["outcome_se"] > 0).all()
    # the outcome is grown − control on the same examples: its mean is the difference of the two mean losses
    assert np.allclose(table["outcome"], table["grown_loss"] - table["control_loss"], atol=1e-12)
    # new_block's counterpart is the checkpoint itself: one loss for every point
    frozen = table[table["variant"] == "new_block"]
    assert (frozen["control"] == "frozen").all() and frozen["control_loss"].nunique() == 1
    scorecard = pd.read_csv(checked / "scorecard.csv")
    assert set(scorecard["rule"]) >= {"advise", "largest_value", "random", "last"}
    claims = pd.read_csv(checked / "claims.csv")
    first_order = claims[claims["claim_id"] == advice_check.CLAIM]
    assert list(first_order["role"]) == ["primary", "secondary", "secondary"]
    # the matched-compute claim, on one checkpoint of seed 0 (the exploration half): secondary rows only
    assert set(claims["claim_id"]) == {advice_check.CLAIM, "advise_regret_below_train_on"}
    # matched compute: every arm's observed gain over the checkpoint and training on's, paired on the same examples
    assert np.allclose(table["vs_train_on"], table["train_on_observed"] - table["observed_gain"], atol=1e-12)
    whole = table[table["variant"] != "new_block"]
    assert np.allclose(whole["vs_train_on"], whole["outcome"], atol=1e-12)  # whole's counterpart is training on
    # advise's options, every row: its decision between them and each option's predicted gain (advice.csv's)
    options = pd.read_csv(checked / "advice" / "advice.csv").set_index("option")
    assert set(table["advice"]) == {options["decision"].iloc[0]}
    assert np.allclose(table["train_on_predicted"], options.loc["train on", "gain"])
    assert np.allclose(table["predicted_gain"], options.loc["grow at " + table["point"], "gain"])
    # growth costs FLOPs per step: a block of two linear maps on the stream, counted on one training batch
    assert (table["extra_flops_per_step"] > 0).all() and (table["flops_per_step"] > table["extra_flops_per_step"]).all()
    assert table.groupby("point")["extra_flops_per_step"].nunique().eq(1).all()  # the same block in every procedure


def test_every_grown_arm_and_the_control_were_fed_the_same_batches(checked, llama):
    """The digests recorded from what each arm was fed: one batch order, the one drawn from the seed."""
    from growcert.stages.advise_check import batch_order, digest

    table = pd.read_csv(checked / "advise_check.csv", dtype={"batches": str, "control_batches": str})
    drawn = digest(batch_order(load_prepared(llama[1]), stage_settings("advise_check", SETTINGS), 16))
    assert set(table["batches"]) == {drawn}
    assert set(table.loc[table["variant"] == "whole", "control_batches"]) == {drawn}


def test_a_grown_arm_whose_block_never_trains_is_its_control_to_the_last_bit(llama, monkeypatch):
    """A zero-output block that stays zero leaves the function and every gradient of the base unchanged, so the
    grown model trained on the control's batches IS the control: outcome exactly 0 at every point. Fed any other
    batches, it is not (the last assertion shows the comparison can tell)."""
    from growcert.models.checkpoint import load_checkpoint
    from growcert.stages import advise_check as stage

    checkpoint, folder = llama
    data = load_prepared(folder)
    base, _ = load_checkpoint(checkpoint)
    base_only = stage.Procedure(base=True, gate=False, counterpart=stage.CONTROL, block=False)
    monkeypatch.setitem(stage.PROCEDURES, "base_only", base_only)
    settings = stage_settings("advise_check", SETTINGS)
    outcome = load_examples(data, 16, 32)
    rows = stage.grow_every_point(
        base, ["block0", "block1", "block2"], data, 16, outcome, settings, {"hidden": None, "seed": 0}, ["base_only"]
    )
    assert (rows["outcome"] == 0.0).all() and (rows["grown_loss"] == rows["control_loss"]).all(), rows
    order = stage.batch_order(data, settings, 16)
    shuffled = order[np.random.default_rng(1).permutation(len(order))]
    first, second = (load_checkpoint(checkpoint)[0] for _ in range(2))
    for model, batches in ((first, order), (second, shuffled)):
        stage.train_on(
            model, stage.optimizers(model, None, stage.PROCEDURES["whole"], settings["lr"]), batches, data, 16, True
        )
    assert not np.array_equal(stage.per_example_losses(first, outcome), stage.per_example_losses(second, outcome))


def load_examples(data, context, count):
    from growcert.data.batches import fixed_examples

    return fixed_examples(data, "test", count, 5, context)


def test_paired_outcome_regret_and_reliability_by_hand():
    mean, se = paired_outcome([1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 0.0, 0.0])
    assert mean == 2.5 and math.isclose(se, math.sqrt(5 / 3) / 2)  # sd of 1..4 is √(5/3)
    assert regret([0.1, -0.2, 0.3], 0) == pytest.approx(0.2) and regret([0.1, -0.2, 0.3], None) == pytest.approx(0.3)
    assert regret([-1.0, -2.0], None) == 0.0 and regret([-1.0, -2.0], 0) == 1.0  # not growing was the best option
    bins = reliability([0.05, 0.15, 0.95, 1.0, math.nan], [True, False, True, False, True], 2)
    assert [(b["growths"], b["share_worse"]) for b in bins] == [(2, 0.5), (2, 0.5)]
    assert bins[0]["mean_b_exact"] == pytest.approx(0.1) and bins[1]["mean_b_exact"] == pytest.approx(0.975)


def _synthetic(rows_by_seed):
    """A checked table of one checkpoint per seed: rows (decision, value, scaled_value, outcome, se) per point."""
    rows = []
    for seed, points in rows_by_seed.items():
        for index, (decision, value, scaled, outcome, se) in enumerate(points):
            rows.append(
                {
                    "model": f"m{seed}",
                    "train_seed": seed,
                    "point": f"block{index}",
                    "point_index": index,
                    "variant": "new_block",
                    "decision": decision,
                    "value": value,
                    "scaled_value": scaled,
                    "outcome": outcome,
                    "outcome_se": se,
                    "b_exact": 0.1,
                }
            )
    return pd.DataFrame(rows)


def test_the_scores_by_hand():
    """Seed 0: grow here at block0 and block1 (advise picks block1, the larger scaled value), gains 1, −1, 2; seed 1:
    no grow-here point (advise does not grow), gains 0.5, −0.2, −0.1. Regret: the best option (not growing is one)
    minus the pick."""
    grow, none = "grow here", "no evidence"
    table = _synthetic(
        {
            0: [(grow, 5.0, 1.0, -1.0, 0.1), (grow, 1.0, 3.0, 1.0, 0.1), (none, 2.0, 0.0, -2.0, 0.1)],
            1: [(none, 1.0, 0.0, -0.5, 0.1), (none, 2.0, 0.0, 0.2, 0.1), (none, 3.0, 0.0, 0.1, 0.1)],
        }
    )
    settings = stage_settings("advise_check")
    card = advice_check.scorecard(table, settings).set_index(["score", "rule"])
    # precision: seed 0 only (seed 1 has no grow-here point): block0 beat, block1 did not
    assert card.loc[("precision", grow), ["estimate", "seeds", "points"]].tolist() == [0.5, 1, 2]
    # miss rate of no evidence: seed 0 1/1 (block2 beat), seed 1 1/3 (block0 beat: −0.5 < −2·0.1)
    miss = card.loc[("miss rate", none)]
    half = t_quantile(0.95, 2) * np.std([1.0, 1 / 3], ddof=1) / math.sqrt(2)
    assert miss["estimate"] == pytest.approx(2 / 3) and miss["low"] == pytest.approx(2 / 3 - half)
    regrets = {rule: card.loc[("regret", rule), "estimate"] for rule in advice_check.RULES}
    # seed 0: best 2; advise block1 (gain −1) regret 3, largest value block0 (1) 1, last block2 (2) 0;
    # seed 1: best 0.5; advise no growth 0.5, largest value and last block2 (−0.1) 0.6
    assert regrets["advise"] == pytest.approx(1.75) and regrets["largest_value"] == pytest.approx(0.8)
    assert regrets["last"] == pytest.approx(0.3)
    rows = advice_check.claim_judgement_rows(table, settings, "test")
    assert rows[0]["estimate"] == pytest.approx(((-1 - 1) + (0 - (-0.1))) / 2) and rows[0]["seeds"] == 2


@pytest.mark.parametrize(
    "case",
    [
        "missing model",
        "data of the wrong kind",
        "a bad setting",
        "a Hugging Face model",
        "no held-out rows left beside advise's",
    ],
)
def test_a_bad_input_is_one_line_exit_2_and_nothing_written(case, llama, prepared, tmp_path, capsys):
    checkpoint, data = llama
    if case == "a Hugging Face model":
        from test_hf import save_tiny

        checkpoint = save_tiny(tmp_path / "tiny-neox", "gpt_neox", width=16, depth=2)
        capsys.readouterr()
    argv = {
        "missing model": ["--model", str(tmp_path / "missing.pt"), "--data", str(data)],
        "data of the wrong kind": ["--model", str(checkpoint), "--data", str(prepared("digits").folder)],
        "a bad setting": ["--model", str(checkpoint), "--data", str(data), "--settings", '{"steps": 0}'],
        "a Hugging Face model": ["--model", str(checkpoint), "--data", str(data)],
        "no held-out rows left beside advise's": [
            "--model",
            str(checkpoint),
            "--data",
            str(data),
            "--examples",
            "10000000",
        ],
    }[case]
    named = {
        "missing model": "missing.pt",
        "data of the wrong kind": str(prepared("digits").folder),
        "a bad setting": "steps",
        "a Hugging Face model": "--model",
        "no held-out rows left beside advise's": "held-out examples remain",
    }[case]
    out = tmp_path / "fresh"
    assert main(["advise-check", *argv, "--out", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("growcert advise-check: error: ") and named in lines[0], lines
    assert not out.exists()


def test_tables_of_many_checkpoints_pool_into_scores_over_seeds(checked, tmp_path, capsys):
    """The one checkpoint's table as two seeds' (the second's outcomes shifted): the pooled scorecard's gains are
    the two seeds' mean with a t interval; a table that is not advise-check's is one line, exit 2."""
    table = pd.read_csv(checked / "advise_check.csv")
    other = table.assign(model="other.pt", train_seed=table["train_seed"] + 1, outcome=table["outcome"] - 0.01)
    paths = [tmp_path / "a.csv", tmp_path / "b.csv"]
    table.to_csv(paths[0], index=False)
    other.to_csv(paths[1], index=False)
    assert main(["summarize-advise-check", *map(str, paths), "--out", str(tmp_path / "pooled")]) == 0
    card = pd.read_csv(tmp_path / "pooled" / "scorecard.csv").set_index(["variant", "score", "rule"])
    single = advice_check.scorecard(table, stage_settings("advise_check")).set_index(["variant", "score", "rule"])
    last = card.loc[("new_block", "gain", "last")]
    assert last["seeds"] == 2 and last["estimate"] == pytest.approx(
        single.loc[("new_block", "gain", "last"), "estimate"] + 0.005
    )
    assert last["low"] < last["estimate"] < last["high"]
    claims = pd.read_csv(tmp_path / "pooled" / "claims.csv")
    assert (claims["claim_id"] == advice_check.CLAIM).sum() == 3  # a row per procedure
    # seed 1 is the confirmation half: the matched claim's primary row is judged on it alone (1 seed: not tested)
    matched = claims[(claims["claim_id"] == "advise_regret_below_train_on") & (claims["role"] == "primary")]
    assert len(matched) == 1 and matched["seeds"].iloc[0] == 1
    assert {"matched_scorecard.csv", "calibration.csv", "growth_won.csv", "advice_calibration.png"} <= {
        path.name for path in (tmp_path / "pooled").iterdir()
    }
    capsys.readouterr()
    (tmp_path / "wrong.csv").write_text("a,b\n1,2\n")
    assert main(["summarize-advise-check", str(tmp_path / "wrong.csv"), "--out", str(tmp_path / "no")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "not an advise-check table" in lines[0] and not (tmp_path / "no").exists()


def test_the_snakemake_target_plans_one_advise_check_per_checkpoint_and_one_summary(tmp_path, planned_jobs):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-n",
            "-p",
            "summarize_advise_check",
            "--configfile",
            "configs/ci.yaml",
            "--config",
            f"results={tmp_path / 'results'}",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    import yaml

    from growcert.plan import Plan, validate_config

    config = yaml.safe_load((root / "configs/ci.yaml").read_text())
    checkpoints = len(Plan(validate_config({**config, "results": str(tmp_path / "results")})).advise_check_tables())
    assert planned_jobs(result.stdout)["advise_check"] == checkpoints > 1
    assert planned_jobs(result.stdout)["summarize_advise_check"] == 1
    commands = [line for line in result.stdout.splitlines() if "growcert advise-check --model" in line]
    assert len(commands) == checkpoints and all(".pt --data" in line for line in commands)


def _full_table(points_by_seed, variants=("new_block",), model=lambda seed: f"m{seed}.pt"):
    """A checked table with every column of the stage's: one checkpoint per seed, rows (decision, detectability,
    scaled_value, outcome) per point, outcome_se 0.01, the same outcomes in every variant."""
    rows = []
    for seed, points in points_by_seed.items():
        for variant in variants:
            for index, (decision, detectability, scaled, outcome) in enumerate(points):
                rows.append(
                    {column: math.nan for column in advice_check.COLUMNS}
                    | {
                        "model": model(seed),
                        "family": "llama",
                        "train_seed": seed,
                        "point": f"block{index}",
                        "point_index": index,
                        "variant": variant,
                        "decision": decision,
                        "value": scaled,
                        "scaled_value": scaled,
                        "detectability": detectability,
                        "b_exact": 0.1,
                        "outcome": outcome,
                        "outcome_se": 0.01,
                    }
                )
    return pd.DataFrame(rows, columns=advice_check.COLUMNS)


def _brute_force_pick(points, rule):
    """The candidate's point by a plain loop over (decision, detectability, scaled_value, outcome) rows; None: none."""
    chosen = None
    for index, (decision, detectability, _, _) in enumerate(points):
        if rule == "most_detectable" and (chosen is None or detectability > points[chosen][1]):
            chosen = index
        if rule == "deepest_grow_here" and decision == "grow here":
            chosen = index
    return chosen


GROW, NONE, FLAT = "grow here", "no evidence", "saturated"
CASES = {
    0: [(GROW, 3.0, 2.0, -0.5), (NONE, 9.0, 0.1, -0.1), (GROW, 1.0, 1.0, -0.2), (FLAT, 2.0, 1.0, -0.3)],
    1: [(NONE, 0.5, 0.0, 0.2), (NONE, 0.4, 0.0, -0.4), (NONE, 0.1, 0.0, 0.1)],
    2: [(FLAT, 5.0, 1.0, -0.3), (GROW, 5.0, 3.0, -0.1), (GROW, 4.0, 2.5, 0.2)],
    3: [(GROW, 2.0, 4.0, 0.3), (FLAT, 7.0, 1.0, -0.6), (NONE, 1.0, 0.0, 0.0)],
}


@pytest.mark.parametrize("rule", advice_check.CANDIDATE_RULES)
def test_candidate_rules_pick_what_a_brute_force_loop_picks_and_score_by_hand(rule):
    """Per checkpoint the candidate's point equals a plain loop's (most_detectable: the largest ‖μ‖²/SE, the
    shallowest on a tie; deepest_grow_here: the deepest grow-here point, none without one); its gain row is the
    mean over seeds of those points' gains, and comparison.csv's row against the shipped rule is the per-seed
    difference, by hand."""
    table = _full_table(CASES)
    settings = stage_settings("advise_check", {"advise_rule": rule})
    picked = advice_check.choices(table.assign(beat=False), settings["seed"], advice_check.scored_rules(settings))
    mine = picked[picked["rule"] == rule].set_index("train_seed")
    expected = {seed: _brute_force_pick(points, rule) for seed, points in CASES.items()}
    assert {seed: mine.loc[seed, "point"] for seed in CASES} == {
        seed: "" if index is None else f"block{index}" for seed, index in expected.items()
    }
    gains = {seed: 0.0 if index is None else -CASES[seed][index][3] for seed, index in expected.items()}
    card = advice_check.scorecard(table, settings).set_index(["score", "rule"])
    assert card.loc[("gain", rule), "estimate"] == pytest.approx(np.mean(list(gains.values())))
    # the shipped rule: the grow-here point of largest scaled value (seed 0 block0, 1 none, 2 block1, 3 block0)
    shipped = {0: 0.5, 1: 0.0, 2: 0.1, 3: -0.3}
    comparison = advice_check.comparison_rows(table, settings).set_index("against")
    assert comparison.loc["advise", "estimate"] == pytest.approx(np.mean([gains[s] - shipped[s] for s in CASES]))
    assert comparison.loc["advise", "role"] == "primary" and comparison.loc["advise", "seeds"] == 4
    assert comparison.loc["advise", "sesoi"] == CLAIMS[advice_check.CLAIM].effect.sesoi
    assert (comparison.drop("advise")["role"] == "secondary").all()


def test_the_split_by_seed_is_fixed_and_its_halves_disjoint():
    """Even seeds explore, odd seeds confirm: the same answer on any order of the seeds, each seed in one half."""
    seeds = np.arange(20)
    halves = seed_half(seeds)
    assert set(seeds[halves == EXPLORATION]) == set(range(0, 20, 2))
    assert set(seeds[halves == CONFIRMATION]) == set(range(1, 20, 2))
    shuffled = np.random.default_rng(1).permutation(seeds)
    assert (seed_half(shuffled) == np.where(shuffled % 2 == 0, EXPLORATION, CONFIRMATION)).all()
    assert (seed_half(seeds.astype(float)) == halves).all()  # a CSV reader's floats: the same split
    with pytest.raises(ValueError, match="whole numbers"):
        seed_half([1.5])


def test_confirmation_scores_never_read_exploration_rows(tmp_path, capsys):
    """Scoring the confirmation half of a table whose exploration rows are poisoned (outcomes of ±1000, decisions
    swapped) gives the very scores of the confirmation rows alone; the pooled table holds odd seeds only, and the
    registered claim is not judged on a half."""
    table = _full_table(CASES, variants=("new_block", "whole"))
    exploring = table["train_seed"] % 2 == 0
    poisoned = table.copy()
    poisoned.loc[exploring, "outcome"] = np.where(poisoned.loc[exploring, "point_index"] % 2 == 0, 1000.0, -1000.0)
    poisoned.loc[exploring, "decision"] = GROW
    outs = {}
    for name, frame in {"clean": table, "poisoned": poisoned, "alone": table[~exploring]}.items():
        path = tmp_path / f"{name}.csv"
        frame.to_csv(path, index=False)
        settings = stage_settings(
            "advise_check", {"advise_rule": "most_detectable", "half": "all" if name == "alone" else CONFIRMATION}
        )
        outs[name] = tmp_path / f"out-{name}"
        summarize_advise_check([path], settings, outs[name])
    for name in ("scorecard.csv", "comparison.csv", "reliability.csv"):
        alone = pd.read_csv(outs["alone"] / name)
        pd.testing.assert_frame_equal(pd.read_csv(outs["clean"] / name), alone)
        pd.testing.assert_frame_equal(pd.read_csv(outs["poisoned"] / name), alone)
    assert set(pd.read_csv(outs["poisoned"] / "advise_check.csv")["train_seed"]) == {1, 3}
    assert not (outs["poisoned"] / "claims.csv").exists() and (outs["alone"] / "claims.csv").exists()


def test_the_tuning_checkpoint_never_enters_the_pooled_scores(tmp_path):
    """A tuning checkpoint's rows (however good or bad) leave every pooled score as it is without them, and the
    summary says so in one line; the reference config's tuning checkpoint is one the pipeline trains and checks."""
    table = _full_table(CASES, model=lambda seed: f"results/models/run_s{seed}/step300.pt")
    tuning = _full_table(
        {9: [(GROW, 9.0, 9.0, -50.0), (NONE, 0.0, 0.0, 50.0)]}, model=lambda seed: "results/models/tuning/step300.pt"
    )
    paths = [tmp_path / "scored.csv", tmp_path / "tuning.csv"]
    table.to_csv(paths[0], index=False)
    tuning.to_csv(paths[1], index=False)
    plain = summarize_advise_check(paths[:1], stage_settings("advise_check"), tmp_path / "plain")
    said = summarize_advise_check(
        paths,
        stage_settings("advise_check", {"tuning_checkpoint": "./results/models/tuning/step300.pt"}),
        tmp_path / "pooled",
    )
    assert said.splitlines()[0] == "tuning checkpoint ./results/models/tuning/step300.pt: 2 rows left out"
    for name in ("scorecard.csv", "claims.csv", "reliability.csv", "advise_check.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "pooled" / name), pd.read_csv(tmp_path / "plain" / name))
    assert said.splitlines()[1:] == plain.splitlines()[:-1] + [said.splitlines()[-1]]

    from pathlib import Path

    import yaml

    from growcert.pipeline.artifacts import CHECKPOINT, RUN_DIR
    from growcert.plan import Plan, validate_config
    from growcert.plan.grids import run_wildcards

    config = validate_config(
        yaml.safe_load((Path(__file__).resolve().parents[1] / "configs/advise-check.yaml").read_text())
    )
    plan = Plan(config)
    checkpoints = [
        CHECKPOINT.path(RUN_DIR.path(config["results"], **run_wildcards(run)), step=step)
        for run in plan.runs()
        for step in plan.analysed_steps(run, "all")
    ]
    named = config["advise_check"]["tuning_checkpoint"]
    assert named in checkpoints and len(checkpoints) == len(plan.advise_check_tables())
    tuning_run = [run for run in plan.runs() if f"{RUN_DIR.path(config['results'], **run_wildcards(run))}/" in named]
    assert len(tuning_run) == 1 and plan.analysed_steps(tuning_run[0], "all") == [300]
    assert all(run.seed != tuning_run[0].seed for run in plan.runs() if run != tuning_run[0])


@pytest.mark.parametrize("form", ["before-plateau", "first-form"])
@pytest.mark.parametrize("half", [EXPLORATION, CONFIRMATION])
@pytest.mark.parametrize("rule", advice_check.CANDIDATE_RULES)
def test_the_committed_candidate_scores_are_what_the_command_prints(rule, half, form, tmp_path):
    """docs/reference-results/advise-check/<form>/rules/<rule>/<half>, where the candidates were judged (in
    before-plateau/, the run at the tuned S and lr before the plateau checkpoints, and in first-form/, the run at the
    untuned S and lr): the command its README gives, on the committed table, writes the very scorecard and comparison
    kept there."""
    from pathlib import Path

    run = Path(__file__).resolve().parents[1] / "docs" / "reference-results" / "advise-check" / form
    settings = json.dumps({"advise_rule": rule, "half": half})
    assert (
        main(["summarize-advise-check", str(run / "advise_check.csv"), "--settings", settings, "--out", str(tmp_path)])
        == 0
    )
    for name in ("scorecard.csv", "comparison.csv"):
        assert_tables_match(
            pd.read_csv(tmp_path / name, dtype=str), pd.read_csv(run / "rules" / rule / half / name, dtype=str), name
        )
