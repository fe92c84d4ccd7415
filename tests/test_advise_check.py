"""`growcert advise-check`: end to end on a tiny trained llama, the same batches for every arm and its control, the
scores against hand-computed values, and bad inputs."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from growcert.cli import main
from growcert.config import stage_settings
from growcert.data import load_prepared
from growcert.report import advice_check
from growcert.stats.growth_outcomes import paired_outcome, regret, reliability
from growcert.stats.seeds import t_quantile

EXAMPLES = 32
SETTINGS = {"steps": 6, "outcome_examples": 48}
OUTPUTS = ("advice", "advise_check.csv", "claims.csv", "provenance.json", "reliability.csv", "reliability.png",
           "scorecard.csv")


@pytest.fixture(scope="module")
def llama(tiny_llama):
    """(checkpoint, prepared folder) of the session's tiny llama (conftest.tiny_llama)."""
    return tiny_llama


@pytest.fixture(scope="module")
def checked(llama, tmp_path_factory):
    checkpoint, data = llama
    out = tmp_path_factory.mktemp("advise-check") / "out"
    assert main(["advise-check", "--model", str(checkpoint), "--data", str(data), "--out", str(out),
                 "--examples", str(EXAMPLES), "--settings", json.dumps(SETTINGS)]) == 0
    return out


def test_every_point_and_variant_is_grown_beside_advises_decision(checked):
    assert sorted(path.name for path in checked.iterdir()) == sorted(OUTPUTS)  # the work folder is gone
    table = pd.read_csv(checked / "advise_check.csv")
    decided = pd.read_csv(checked / "advice" / "advice.csv").set_index("point")
    assert list(table["point"]) == ["block0", "block0", "block1", "block1", "block2", "block2"]
    assert list(table["variant"]) == ["new_block", "whole"] * 3
    assert list(table["decision"]) == list(decided.loc[table["point"], "decision"])
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
    assert list(claims["role"]) == ["primary", "secondary"] and (claims["claim_id"] == advice_check.CLAIM).all()


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
    base_only = (lambda model, block: [p for p in model.parameters() if all(p is not q for q in block.parameters())],
                 True, stage.CONTROL)
    monkeypatch.setitem(stage.VARIANTS, "base_only", base_only)
    settings = stage_settings("advise_check", SETTINGS)
    outcome = load_examples(data, 16, 32)
    rows = stage.grow_every_point(base, ["block0", "block1", "block2"], data, 16, outcome, settings,
                                  {"hidden": None, "seed": 0}, ["base_only"])
    assert (rows["outcome"] == 0.0).all() and (rows["grown_loss"] == rows["control_loss"]).all(), rows
    order = stage.batch_order(data, settings, 16)
    shuffled = order[np.random.default_rng(1).permutation(len(order))]
    first, second = (load_checkpoint(checkpoint)[0] for _ in range(2))
    for model, batches in ((first, order), (second, shuffled)):
        stage.train_on(model, list(model.parameters()), batches, data, 16, settings["lr"], True)
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
            rows.append({"model": f"m{seed}", "train_seed": seed, "point": f"block{index}", "point_index": index,
                         "variant": "new_block", "decision": decision, "value": value, "scaled_value": scaled,
                         "outcome": outcome, "outcome_se": se, "b_exact": 0.1})
    return pd.DataFrame(rows)


def test_the_scores_by_hand():
    """Seed 0: grow here at block0 and block1 (advise picks block1, the larger scaled value), gains 1, −1, 2; seed 1:
    no grow-here point (advise does not grow), gains 0.5, −0.2, −0.1. Regret: the best option (not growing is one)
    minus the pick."""
    grow, none = "grow here", "no evidence"
    table = _synthetic({0: [(grow, 5.0, 1.0, -1.0, 0.1), (grow, 1.0, 3.0, 1.0, 0.1), (none, 2.0, 0.0, -2.0, 0.1)],
                        1: [(none, 1.0, 0.0, -0.5, 0.1), (none, 2.0, 0.0, 0.2, 0.1), (none, 3.0, 0.0, 0.1, 0.1)]})
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


@pytest.mark.parametrize("case", ["missing model", "data of the wrong kind", "a bad setting", "a Hugging Face model",
                                  "no held-out rows left beside advise's"])
def test_a_bad_input_is_one_line_exit_2_and_nothing_written(case, llama, prepared, tmp_path, capsys):
    checkpoint, data = llama
    if case == "a Hugging Face model":
        from test_hf import save_tiny

        checkpoint = save_tiny(tmp_path / "tiny-neox", "gpt_neox", width=16, depth=2)
        capsys.readouterr()
    argv = {"missing model": ["--model", str(tmp_path / "missing.pt"), "--data", str(data)],
            "data of the wrong kind": ["--model", str(checkpoint), "--data", str(prepared("digits").folder)],
            "a bad setting": ["--model", str(checkpoint), "--data", str(data), "--settings", '{"steps": 0}'],
            "a Hugging Face model": ["--model", str(checkpoint), "--data", str(data)],
            "no held-out rows left beside advise's": ["--model", str(checkpoint), "--data", str(data), "--examples",
                                                      "10000000"]}[case]
    named = {"missing model": "missing.pt", "data of the wrong kind": str(prepared("digits").folder),
             "a bad setting": "steps", "a Hugging Face model": "--model", "no held-out rows left beside advise's":
             "held-out examples remain"}[case]
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
    assert last["seeds"] == 2 and last["estimate"] == pytest.approx(single.loc[("new_block", "gain", "last"),
                                                                              "estimate"] + 0.005)
    assert last["low"] < last["estimate"] < last["high"]
    assert len(pd.read_csv(tmp_path / "pooled" / "claims.csv")) == 2
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
    result = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "summarize_advise_check", "--configfile",
                             "configs/ci.yaml", "--config", f"results={tmp_path / 'results'}"],
                            cwd=root, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    import yaml

    from growcert.plan import Plan, validate_config

    config = yaml.safe_load((root / "configs/ci.yaml").read_text())
    checkpoints = len(Plan(validate_config({**config, "results": str(tmp_path / "results")})).advise_check_tables())
    assert planned_jobs(result.stdout)["advise_check"] == checkpoints > 1
    assert planned_jobs(result.stdout)["summarize_advise_check"] == 1
    commands = [line for line in result.stdout.splitlines() if "growcert advise-check --model" in line]
    assert len(commands) == checkpoints and all(".pt --data" in line for line in commands)
