"""advise-check at matched compute (`report.advice_matched`, docs/science.md, "advise-check at matched compute"):
regret, precision and calibration against hand computation on small tables, per family and never pooled; the
claim's registered form; the growth procedures (one fact, the schema's enum, and P2's gate on the new block only)."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
import torch

from growcert.config import stage_settings
from growcert.models import family_of
from growcert.referee import claims as registry
from growcert.referee.advise_effects import NON_INFERIORITY, SUPERIORITY, regret_effect
from growcert.referee.verdicts import CONTRADICTED, REPRODUCED
from growcert.report import advice_matched as matched
from growcert.schema import load_schema as schema
from growcert.stats.growth_outcomes import calibration_slope, covered, option_regret
from growcert.stats.seeds import t_quantile

SETTINGS = stage_settings("advise_check")


def _checkpoint(
    family, seed, train_on, grown, advice, values, se=0.005, predicted=None, half_width=0.05, step=100, variant="whole"
):
    """One checkpoint's rows: training on's observed gain `train_on` (its SE 0.01), each point's observed gain in
    `grown` (vs_train_on = train_on − grown, with SE `se`), advise's decision `advice`, first-order `values`, and the
    predicted gains (train on first, then each point) with intervals ± half_width (default: the observed ones)."""
    predicted = predicted or [train_on, *grown]
    return [
        {
            "family": family,
            "variant": variant,
            "model": f"{family}_s{seed}_{step}",
            "train_seed": seed,
            "step": step,
            "point": f"block{k}",
            "point_index": k,
            "value": values[k],
            "advice": advice,
            "train_on_observed": train_on,
            "train_on_observed_se": 0.01,
            "observed_gain": gain,
            "observed_gain_se": 0.01,
            "vs_train_on": train_on - gain,
            "vs_train_on_se": se,
            "train_on_predicted": predicted[0],
            "train_on_predicted_lo": predicted[0] - half_width,
            "train_on_predicted_hi": predicted[0] + half_width,
            "predicted_gain": predicted[k + 1],
            "predicted_gain_lo": predicted[k + 1] - half_width,
            "predicted_gain_hi": predicted[k + 1] + half_width,
            "predicted_added": predicted[k + 1] - predicted[0],
            "predicted_added_lo": -1.0,
            "predicted_added_hi": 1.0,
            "flops_per_step": 1000.0,
            "extra_flops_per_step": 100.0 * (k + 1),
            "loss_unit": family_of(family).loss_unit,
        }
        for k, gain in enumerate(grown)
    ]


def _small_table() -> pd.DataFrame:
    """llama, two seeds: seed 0 told to grow at block0 (gains: train on 0.10, block0 0.13, block1 0.08), seed 1 told to
    train on (0.05; 0.04, 0.06, the last not beyond noise). ResNet, two seeds, each told "no evidence" while growing at
    block1 gains 1.0 more than training on (units of another size: nats per image)."""
    rows = (
        _checkpoint("llama", 0, 0.10, [0.13, 0.08], "grow at block0", [1.0, 5.0], predicted=[0.20, 0.26, 0.16])
        + _checkpoint("llama", 1, 0.05, [0.04, 0.06], "train on", [3.0, 1.0], se=0.01, half_width=0.01)
        + _checkpoint("resnet", 0, 1.0, [0.5, 2.0], "no evidence", [1.0, 2.0], se=0.1)
        + _checkpoint("resnet", 1, 1.0, [0.5, 2.0], "no evidence", [1.0, 2.0], se=0.1)
    )
    return pd.DataFrame(rows)


def _estimate(card, family, score, rule):
    row = card[(card["family"] == family) & (card["score"] == score) & (card["rule"] == rule)]
    assert len(row) == 1, (family, score, rule)
    return row.iloc[0]


def test_the_matched_scorecard_is_given_on_every_seed_and_on_each_half():
    """The confirmation half's rows are the scorecard of the odd seeds alone (llama seed 1: told to train on, so
    advise's regret is always training on's, 0.01; the best option there is block1's 0.06), the exploration half's
    the even seeds' (seed 0: advise took block0, the best, regret 0), and the first rows every seed's."""
    table = _small_table()
    card = matched.scorecard_by_half(table, SETTINGS)
    assert list(card.columns) == ["half", *matched.SCORE_COLUMNS]
    assert list(card["half"].unique()) == ["all", "exploration", "confirmation"]
    every = card[card["half"] == "all"].drop(columns="half").reset_index(drop=True)
    pd.testing.assert_frame_equal(every, matched.scorecard(table, SETTINGS))
    confirmation = card[card["half"] == "confirmation"].drop(columns="half")
    odd = matched.scorecard(table[table["train_seed"] % 2 == 1], SETTINGS)
    pd.testing.assert_frame_equal(confirmation.reset_index(drop=True), odd)
    assert _estimate(confirmation, "llama", "regret", "advise")["estimate"] == pytest.approx(0.01)
    assert _estimate(confirmation, "llama", "regret", "always_train_on")["estimate"] == pytest.approx(0.01)
    assert _estimate(confirmation, "llama", "regret", "advise")["seeds"] == 1
    exploration = card[card["half"] == "exploration"].drop(columns="half")
    assert _estimate(exploration, "llama", "regret", "advise")["estimate"] == pytest.approx(0.0)


def test_the_matched_scorecard_by_hand():
    card = matched.scorecard(_small_table(), SETTINGS)
    half = t_quantile(0.95, 2) * np.std([0.0, 0.01], ddof=1) / math.sqrt(2)
    # llama: options' gains [0.10, 0.13, 0.08] and [0.05, 0.04, 0.06]; advise takes block0 then train on
    advise = _estimate(card, "llama", "regret", "advise")
    assert advise["estimate"] == pytest.approx(0.005) and advise["seeds"] == 2 and advise["checkpoints"] == 2
    assert (advise["low"], advise["high"]) == pytest.approx((0.005 - half, 0.005 + half))
    assert _estimate(card, "llama", "regret", "always_train_on")["estimate"] == pytest.approx((0.03 + 0.01) / 2)
    assert _estimate(card, "llama", "regret", "largest_value")["estimate"] == pytest.approx((0.05 + 0.02) / 2)
    assert _estimate(card, "llama", "regret", "last")["estimate"] == pytest.approx((0.05 + 0.0) / 2)
    assert _estimate(card, "llama", "gain", "advise")["estimate"] == pytest.approx((0.13 + 0.05) / 2)
    # the FLOPs a choice costs, as a share of the ungrown step: block0 costs 100 of 1000, training on nothing
    assert _estimate(card, "llama", "extra FLOPs per step (share of the ungrown step)", "advise")[
        "estimate"
    ] == pytest.approx(0.05)
    assert _estimate(card, "llama", "extra FLOPs per step (share of the ungrown step)", "last")[
        "estimate"
    ] == pytest.approx(0.2)
    # precision: "grow at block0" right (it beat training on: −0.03 < −2·0.005); "train on" right (it helped, 0.05 >
    # 2·0.01, and no growth beat it: block1's −0.01 is within 2·0.01); no "no evidence" in llama
    grow, train_on = _estimate(card, "llama", "precision", "grow at"), _estimate(card, "llama", "precision", "train on")
    assert (grow["estimate"], grow["checkpoints"], train_on["estimate"], train_on["checkpoints"]) == (1.0, 1, 1.0, 1)
    assert _estimate(card, "llama", "precision", "no evidence")["checkpoints"] == 0
    # ResNet: "no evidence" is scored as training on, which left 1.0 nats per image; its word was wrong (block1 beat)
    assert _estimate(card, "resnet", "regret", "advise")["estimate"] == pytest.approx(1.0)
    assert _estimate(card, "resnet", "regret", "largest_value")["estimate"] == pytest.approx(0.0)
    assert _estimate(card, "resnet", "precision", "no evidence")["estimate"] == 0.0
    assert set(card["unit"]) == {"nats per token", "nats per image"}


def test_calibration_by_hand():
    calibration = matched.calibration(_small_table(), SETTINGS).set_index(["family", "quantity", "option"])
    every = calibration.loc[("llama", "gain", "every option")]
    # seed 0: observed = 0.5 × predicted on its three options; seed 1: observed = predicted
    assert every["slope"] == pytest.approx(0.75) and every["points"] == 6 and every["seeds"] == 2
    # coverage: seed 0, every observed gain is outside its interval (0.10 ∉ [0.15, 0.25], 0.13 ∉ [0.21, 0.31],
    # 0.08 ∉ [0.11, 0.21]); seed 1, all inside (prediction = observation ± 0.01)
    assert every["coverage"] == pytest.approx((0 + 1) / 2)
    train_on = calibration.loc[("llama", "gain", "train on")]
    assert train_on["mean_predicted"] == pytest.approx((0.20 + 0.05) / 2)
    assert train_on["mean_observed"] == pytest.approx((0.10 + 0.05) / 2) and math.isnan(train_on["slope"])
    added = calibration.loc[("resnet", "added", "grow at block1")]
    assert added["mean_observed"] == pytest.approx(1.0)  # grown beat training on by 1.0: −vs_train_on
    assert calibration_slope([1, 2, 3], [2, 4, 6]) == pytest.approx(2.0) and math.isnan(
        calibration_slope([1, 1], [0, 1])
    )
    assert list(covered([0.5, 2.0, math.nan], [0, 0, 0], [1, 1, 1])) == [True, False, False]
    assert option_regret([0.1, 0.3, -0.2], 2) == pytest.approx(0.5) and option_regret([0.1], 0) == 0.0


def test_scores_are_per_family_and_never_pooled():
    """Every score of a family is the score of that family's rows alone: a scorecard pooled over families (one
    interval over llama's nats per token and ResNet's nats per image) fails here."""
    table = _small_table()
    for score in (matched.scorecard, matched.calibration):
        together = score(table, SETTINGS)
        assert set(together["family"]) == {"llama", "resnet"}
        for family in ("llama", "resnet"):
            alone = score(table[table["family"] == family], SETTINGS)
            mine = together[together["family"] == family].reset_index(drop=True)
            pd.testing.assert_frame_equal(mine, alone.reset_index(drop=True))


def test_growth_won_lists_where_growth_beat_training_on_and_what_advise_said():
    won = matched.growth_won(_small_table(), 0.001, 2.0)
    # llama seed 1's block1 beat training on by 0.01 ≥ the SESOI, but within its noise (2 × 0.01)
    assert list(won["model"]) == ["llama_s0_100", "llama_s1_100", "resnet_s0_100", "resnet_s1_100"]
    assert list(won["point"]) == ["block0", "block1", "block1", "block1"]
    assert list(won["advice"]) == ["grow at block0", "train on", "no evidence", "no evidence"]
    assert list(won["half"]) == ["exploration", "confirmation", "exploration", "confirmation"]
    assert list(won["beyond_noise"]) == [True, False, True, True]


def _claim_table(advice: str) -> pd.DataFrame:
    """Eight seeds per family; at each checkpoint growing at block0 beats training on by 0.01·(1 + 0.2·seed) (llama)
    or ten times that (ResNet), beyond noise, and growing at block1 loses 0.05 to it; advise says `advice`
    throughout."""
    rows = []
    for family, scale in (("llama", 0.01), ("resnet", 0.1)):
        for seed in range(8):
            rows += _checkpoint(family, seed, 0.1, [0.1 + scale * (1 + 0.2 * seed), 0.05], advice, [1.0, 2.0], se=1e-4)
    return pd.DataFrame(rows)


def _part(rows, family):
    return next(row for row in rows if row["role"] == "part" and family in row["claim"])


def test_the_claim_is_judged_per_family_on_the_confirmation_half_in_its_registered_form(monkeypatch):
    rows = matched.claim_rows(_claim_table("grow at block0"), SETTINGS, "test")
    primary = [row for row in rows if row["role"] == "primary"]
    assert len(primary) == 1 and "every family" in primary[0]["claim"]
    assert len([row for row in rows if row["role"] == "part"]) == 2
    # confirmation seeds 1, 3, 5, 7: always train on's regret 0.01·(1.2, 1.6, 2.0, 2.4) (llama), advise's 0
    llama, resnet = _part(rows, "llama"), _part(rows, "resnet")
    assert llama["estimate"] == pytest.approx(0.018) and llama["seeds"] == 4 and llama["verdict"] == REPRODUCED
    assert resnet["estimate"] == pytest.approx(0.18) and primary[0]["verdict"] == REPRODUCED
    assert registry.CLAIMS[matched.CLAIM].form == SUPERIORITY
    assert any(row["role"] == "secondary" and "exploration half" in row["claim"] for row in rows)
    # the registered form, not the code path, orients the effect: in the non-inferiority form (advise's regret minus
    # train on's, at most the margin) a rule that never grows wins for free, and one that grows where growth loses
    # (block1: 0.05 below training on) is contradicted
    claim = registry.CLAIMS[matched.CLAIM]
    monkeypatch.setitem(
        registry.CLAIMS,
        matched.CLAIM,
        dataclasses.replace(claim, form=NON_INFERIORITY, effect=regret_effect(NON_INFERIORITY)),
    )
    never = _part(matched.claim_rows(_claim_table("train on"), SETTINGS, "test"), "llama")
    assert never["estimate"] == pytest.approx(0.0) and never["verdict"] == REPRODUCED
    wrong = _part(matched.claim_rows(_claim_table("grow at block1"), SETTINGS, "test"), "llama")
    assert wrong["estimate"] == pytest.approx(0.05) and wrong["verdict"] == CONTRADICTED
    with pytest.raises(ValueError, match="form"):
        dataclasses.replace(claim, form="bigger")


def test_the_growth_procedures_are_the_schemas_and_the_gate_steps_only_the_new_block():
    from growcert.optim import PopulationRiskAdam
    from growcert.stages import advise_check as stage

    variants = schema()["properties"]["advise_check"]["properties"]["variants"]
    assert variants["items"]["enum"] == list(stage.PROCEDURES) == variants["default"]
    procedures = schema()["properties"]["advise"]["properties"]["growth_procedure"]["enum"]
    assert set(procedures) <= set(stage.PROCEDURES)
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 3))
    block = model[1]
    gated = stage.optimizers(model, block, stage.PROCEDURES["whole_gated"], 0.01)
    assert [type(optimizer) for optimizer in gated] == [torch.optim.AdamW, PopulationRiskAdam]
    assert [p for group in gated[1].param_groups for p in group["params"]] == list(block.parameters())
    assert [p for group in gated[0].param_groups for p in group["params"]] == list(model[0].parameters())
    whole = stage.optimizers(model, block, stage.PROCEDURES["whole"], 0.01)
    assert [type(optimizer) for optimizer in whole] == [torch.optim.AdamW, torch.optim.AdamW]
    only = stage.optimizers(model, block, stage.PROCEDURES["new_block"], 0.01)
    assert len(only) == 1 and [p for p in only[0].param_groups[0]["params"]] == list(block.parameters())


def test_the_measured_answer_in_words_counts_the_confirmation_half_by_hand():
    """report.advice_answer on the small table: its confirmation half is seed 1 of each family (llama told to train
    on, training on's gain 0.05, block1 beating it by 0.01; ResNet told "no evidence", block1 beating training on by
    1.0 nats per image); the sentence gives the words advise said, where training on helped and growth won, and the
    rules with the lowest mean regret."""
    from growcert.report.advice_answer import answer_lines

    llama, resnet = answer_lines(_small_table(), SETTINGS)
    assert llama.startswith(f"llama (1 checkpoints, procedure whole, S = {SETTINGS['steps']} steps, nats per token)")
    assert "advise said train on at 1, grow at 0 and no evidence at 0" in llama
    assert (
        "Training on lowered held-out loss at 1 of 1; growing somewhere beat training on by at least 0.001 at 1"
        in llama
    )
    assert "Lowest mean regret: " in llama and "growing at the last point" in llama.split("Lowest mean regret: ")[1]
    assert llama.endswith("always training on 0.01, advise 0.01.")
    assert "no evidence at 1" in resnet and "nats per image" in resnet and resnet.endswith("advise 1.")
    assert "growing at the largest first-order value" in resnet.split("Lowest mean regret: ")[1]
    assert answer_lines(_small_table().drop(columns="loss_unit"), SETTINGS) == []  # a table from before matched compute


def test_the_reports_advice_section_opens_with_the_measured_answer(tmp_path):
    """The "Is the advice right?" section says the reference run's answer.txt first, one paragraph per family."""
    from growcert.report.advice_check import ADVICE_REFERENCE, advice_section

    folder = tmp_path / ADVICE_REFERENCE
    folder.mkdir()
    pd.DataFrame({"score": ["precision"], "estimate": [0.5]}).to_csv(folder / "scorecard.csv", index=False)
    assert "The measured answer" not in advice_section(tmp_path)
    (folder / "answer.txt").write_text("llama: advise said no evidence at 3.\n\nresnet: train on & grow.\n\n")
    section = advice_section(tmp_path)
    assert "<p><b>The measured answer.</b></p><p>llama: advise said no evidence at 3.</p>" in section
    assert "<p>resnet: train on &amp; grow.</p>" in section
    assert section.index("The measured answer") < section.index("Scorecard of the first-order reading")
