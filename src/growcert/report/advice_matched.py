"""advise-check at matched compute: advise's decision between the options a user has (train on, grow at k, no
evidence) scored against the options' observed gains, every option spending the same S steps on the same batches
(docs/science.md, "advise-check at matched compute"). From the tidy table of `stages.advise_check` (one row per
checkpoint × point × growth procedure) with its MATCHED_COLUMNS; per family, never pooled (llama's gains are nats
per token, ResNet's nats per image), and per procedure:

    regret      per checkpoint, the best option's observed gain (train on included) minus the gain of the option a
                rule takes (`stats.growth_outcomes.option_regret`), for advise (its decision; "no evidence" is scored
                as training on: advise does not tell the user to grow, and training on is what they do then) and the
                baselines: always train on, always grow at the largest first-order value, a random point, the last;
    gain        the chosen option's observed gain over the checkpoint (frozen minus trained), and the extra FLOPs
                per step its growth costs (0 for training on);
    precision   of each decision word: "grow at k" is right where growing at k beat training on beyond the noise
                (vs_train_on < −beat_z·se); "train on" where training on lowered held-out loss beyond its noise and no
                growth beat it; "no evidence" where no growth beat training on;
    calibration per option (train on, grow at each point) and over all of them: predicted against observed gain,
                the least-squares slope of observed on predicted and the share of observed gains inside their
                prediction intervals; and the same for the gain a growth adds beyond training on.
Every score is computed per training seed on that seed's checkpoints and given a Student t interval over seeds.

The claim (CLAIM, `referee.claims`): on the confirmation half of the seeds (`stats.growth_outcomes.seed_half`), per
family, per seed the mean over its checkpoints of always-train-on's regret minus advise's, on the procedure advise's
options stand for (`advise.growth_procedure`); the families judged together as a universal claim
(`referee.families.judge_family`); its registered form (`Claim.form`: superiority or non-inferiority) orients the
effect. `growth_won` lists every checkpoint where some growth beat training on by the claim's SESOI, with advise's
decision there: a rule that never grows wins a non-inferiority comparison for free, so those checkpoints are shown.
"""

from __future__ import annotations

import math
import zlib
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from growcert.config import stage_settings
from growcert.files import write_csv
from growcert.pipeline.artifacts import ADVICE_CALIBRATION, CALIBRATION, GROWTH_WON, MATCHED_SCORECARD
from growcert.referee.advise_effects import NON_INFERIORITY, REGRET_SESOI
from growcert.referee.claims import CLAIMS
from growcert.referee.families import judge_family
from growcert.referee.looks import look_level, with_note
from growcert.referee.rows import claim_row
from growcert.referee.verdicts import Judgement, judge_samples
from growcert.report.advice import GROW_AT, NO_EVIDENCE, TRAIN_ON, first_order_rows
from growcert.report.figures import save_figure
from growcert.stats.growth_outcomes import (
    CONFIRMATION,
    EVERY_HALF,
    EXPLORATION,
    calibration_slope,
    covered,
    option_regret,
    per_seed_interval,
    seed_half,
)

CLAIM = "advise_regret_below_train_on"
# Column lists laid out by hand: ruff format would put each column on a line of its own
# fmt: off
# advise's options per point (`option_columns`): its prediction of each option's gain over the S steps
OPTION_COLUMNS = ["predicted_gain", "predicted_gain_lo", "predicted_gain_hi", "predicted_added", "predicted_added_lo",
                  "predicted_added_hi", "option_local", "advice", "train_on_predicted", "train_on_predicted_lo",
                  "train_on_predicted_hi", "train_on_local"]
# ... and what the arms measured (stages.advise_check.grow_every_point)
MATCHED_COLUMNS = OPTION_COLUMNS + ["vs_train_on", "vs_train_on_se", "observed_gain", "observed_gain_se",
                                    "train_on_observed", "train_on_observed_se", "flops_per_step",
                                    "extra_flops_per_step", "loss_unit"]
RULES = ("advise", "always_train_on", "largest_value", "random", "last")
WORDS = (TRAIN_ON, GROW_AT, NO_EVIDENCE)
INTERVAL = "Student t over per-seed scores (clustered by training seed)"
SCORE_COLUMNS = ["family", "unit", "variant", "score", "rule", "estimate", "low", "high", "level", "seeds",
                 "checkpoints", "interval"]
CALIBRATION_COLUMNS = ["family", "unit", "variant", "quantity", "option", "points", "mean_predicted", "mean_observed",
                       "slope", "slope_low", "slope_high", "coverage", "coverage_low", "coverage_high", "seeds"]
WON_COLUMNS = ["family", "variant", "half", "model", "train_seed", "step", "point", "vs_train_on", "vs_train_on_se",
               "beyond_noise", "advice"]
# fmt: on


def option_columns(table: pd.DataFrame) -> pd.DataFrame:
    """advise's options table (`report.advice.options_table`) as one row per point: the first-order reading
    (`first_order_rows`) with the point's predicted gain and added gain, the decision (`advice`) and training on's
    predicted gain on every row."""
    train_on = table[table["option"] == TRAIN_ON].iloc[0]
    rows = first_order_rows(table)
    named = {
        "gain": "predicted_gain",
        "gain_lo": "predicted_gain_lo",
        "gain_hi": "predicted_gain_hi",
        "added": "predicted_added",
        "added_lo": "predicted_added_lo",
        "added_hi": "predicted_added_hi",
        "local": "option_local",
    }
    return rows.rename(columns=named).assign(
        advice=str(train_on["decision"]),
        train_on_predicted=float(train_on["gain"]),
        train_on_predicted_lo=float(train_on["gain_lo"]),
        train_on_predicted_hi=float(train_on["gain_hi"]),
        train_on_local=bool(train_on["local"]),
    )


def has_matched(table: pd.DataFrame) -> bool:
    """Whether the table carries the matched-compute columns (tables made before them do not)."""
    return all(column in table.columns for column in MATCHED_COLUMNS)


def primary_procedure(settings: dict[str, Any]) -> str:
    """The growth procedure advise's grow options stand for: advise.growth_procedure, with advise-check's overrides."""
    return stage_settings("advise", settings["advise"])["growth_procedure"]


def random_point(model: str, seed: int, count: int) -> int:
    """The random baseline's point (0-based, of `count`): drawn from the seed and the checkpoint's name."""
    return int(np.random.default_rng([seed, zlib.crc32(str(model).encode())]).integers(count))


def _chosen(part: pd.DataFrame, rule: str, seed: int) -> int:
    """The option a rule takes at one checkpoint (`part`: its rows of one procedure, in point order): 0 is training
    on, k + 1 growing at the k-th point."""
    if rule == "advise":
        advice = str(part["advice"].iloc[0])
        if advice.startswith(GROW_AT + " "):
            return 1 + list(part["point"]).index(advice[len(GROW_AT) + 1 :])
        return 0  # train on, or no evidence (scored as training on: the module docstring)
    if rule == "always_train_on":
        return 0
    if rule == "largest_value":
        return 1 + int(np.argmax(part["value"].to_numpy(float)))
    if rule == "random":
        return 1 + random_point(part["model"].iloc[0], seed, len(part))
    if rule == "last":
        return len(part)
    raise ValueError(f"rule {rule!r}: one of {', '.join(RULES)}")


def word_of(advice: str) -> str:
    """The decision word of an advice: train on, grow at (any point) or no evidence."""
    return GROW_AT if str(advice).startswith(GROW_AT + " ") else str(advice)


def choices(table: pd.DataFrame, settings: dict[str, Any]) -> pd.DataFrame:
    """One row per checkpoint × procedure × rule: the option taken, its observed gain and extra FLOPs per step, the
    regret; and per checkpoint × procedure whether advise's word was right (`right`, on the advise rows)."""
    z, rows = settings["beat_z"], []
    for (family, variant, model), part in table.groupby(["family", "variant", "model"], sort=False):
        part = part.sort_values("point_index")
        gains = np.concatenate([[part["train_on_observed"].iloc[0]], part["observed_gain"].to_numpy(float)])
        flops = np.concatenate([[0.0], part["extra_flops_per_step"].to_numpy(float)])
        beat = part["vs_train_on"].to_numpy(float) < -z * part["vs_train_on_se"].to_numpy(float)
        word = word_of(part["advice"].iloc[0])
        for rule in RULES:
            chosen = _chosen(part, rule, settings["seed"])
            right = math.nan
            if rule == "advise":
                trained_on_helped = part["train_on_observed"].iloc[0] > z * part["train_on_observed_se"].iloc[0]
                right = (
                    bool(beat[chosen - 1])
                    if word == GROW_AT
                    else bool(trained_on_helped and not beat.any())
                    if word == TRAIN_ON
                    else bool(not beat.any())
                )
            rows.append(
                {
                    "family": family,
                    "variant": variant,
                    "model": model,
                    "train_seed": part["train_seed"].iloc[0],
                    "rule": rule,
                    "word": word,
                    "option": TRAIN_ON if chosen == 0 else f"{GROW_AT} {part['point'].iloc[chosen - 1]}",
                    "gain": gains[chosen],
                    "regret": option_regret(gains, chosen),
                    "extra_flops": flops[chosen],
                    "flops_per_step": part["flops_per_step"].iloc[0],
                    "right": right,
                }
            )
    return pd.DataFrame(rows)


def loss_unit(table: pd.DataFrame, family: str) -> str:
    """The unit of family `family`'s gains: its record's loss unit, which advise-check writes in each row
    (`loss_unit`; "nats per example" in a table from before it did)."""
    units = table.loc[table["family"] == family, "loss_unit"] if "loss_unit" in table else pd.Series(dtype=str)
    return str(units.iloc[0]) if len(units) else "nats per example"


def _row(
    unit: str, family: str, variant: str, score: str, rule: str, per_seed: pd.Series, checkpoints: int, level: float
) -> dict[str, Any]:
    estimate, low, high, seeds = per_seed_interval(per_seed.to_numpy(float), level)
    return {
        "family": family,
        "unit": unit,
        "variant": variant,
        "score": score,
        "rule": rule,
        "estimate": estimate,
        "low": low,
        "high": high,
        "level": level,
        "seeds": seeds,
        "checkpoints": checkpoints,
        "interval": INTERVAL,
    }


def scorecard(table: pd.DataFrame, settings: dict[str, Any]) -> pd.DataFrame:
    """Per family and procedure: every rule's regret, gain and extra FLOPs per step (as a share of the ungrown
    step's), and the precision of each of advise's decision words; per-seed scores, t over seeds."""
    picked, level, rows = choices(table, settings), settings["level"], []
    for (family, variant), mine in picked.groupby(["family", "variant"], sort=False):
        for rule in RULES:
            theirs = mine[mine["rule"] == rule]
            per_seed = theirs.groupby("train_seed")
            share = (theirs["extra_flops"] / theirs["flops_per_step"]).groupby(theirs["train_seed"]).mean()
            rows += [
                _row(
                    loss_unit(table, family),
                    family,
                    variant,
                    "regret",
                    rule,
                    per_seed["regret"].mean(),
                    len(theirs),
                    level,
                ),
                _row(
                    loss_unit(table, family), family, variant, "gain", rule, per_seed["gain"].mean(), len(theirs), level
                ),
                _row(
                    loss_unit(table, family),
                    family,
                    variant,
                    "extra FLOPs per step (share of the ungrown step)",
                    rule,
                    share,
                    len(theirs),
                    level,
                ),
            ]
        advised = mine[mine["rule"] == "advise"]
        for word in WORDS:
            said = advised[advised["word"] == word]
            right = said.groupby("train_seed")["right"].mean().reindex(advised["train_seed"].unique())
            rows.append(_row(loss_unit(table, family), family, variant, "precision", word, right, len(said), level))
    return pd.DataFrame(rows, columns=SCORE_COLUMNS)


def scorecard_by_half(table: pd.DataFrame, settings: dict[str, Any]) -> pd.DataFrame:
    """The scorecard (leading column `half`) on every seed, then on each half of the seed split: the confirmation
    half's rows are the ones the claim is judged on."""
    halves = seed_half(table["train_seed"].to_numpy())
    cards = [scorecard(table, settings).assign(half=EVERY_HALF)]
    cards += [
        scorecard(table[halves == half], settings).assign(half=half)
        for half in (EXPLORATION, CONFIRMATION)
        if (halves == half).any()
    ]
    return pd.concat(cards, ignore_index=True)[["half", *SCORE_COLUMNS]]


def _pairs(table: pd.DataFrame) -> pd.DataFrame:
    """One row per option and checkpoint: quantity (gain: over the checkpoint; added: beyond training on), option,
    predicted, its interval and observed."""
    growth = table.assign(option=GROW_AT + " " + table["point"].astype(str))
    first = table.sort_values("point_index").groupby(["family", "variant", "model"], sort=False).head(1)
    parts = [
        first.assign(
            quantity="gain",
            option=TRAIN_ON,
            predicted=first["train_on_predicted"],
            predicted_lo=first["train_on_predicted_lo"],
            predicted_hi=first["train_on_predicted_hi"],
            observed=first["train_on_observed"],
        ),
        growth.assign(
            quantity="gain",
            predicted=growth["predicted_gain"],
            predicted_lo=growth["predicted_gain_lo"],
            predicted_hi=growth["predicted_gain_hi"],
            observed=growth["observed_gain"],
        ),
        growth.assign(
            quantity="added",
            predicted=growth["predicted_added"],
            predicted_lo=growth["predicted_added_lo"],
            predicted_hi=growth["predicted_added_hi"],
            observed=-growth["vs_train_on"],
        ),
    ]
    columns = [
        "family",
        "variant",
        "model",
        "train_seed",
        "quantity",
        "option",
        "predicted",
        "predicted_lo",
        "predicted_hi",
        "observed",
    ]
    return pd.concat([part[columns] for part in parts], ignore_index=True)


def calibration(table: pd.DataFrame, settings: dict[str, Any]) -> pd.DataFrame:
    """Per family, procedure, quantity and option (and "every option" of the quantity): predicted against observed,
    the slope (per seed, t over seeds) and the coverage of the prediction intervals (per seed, t over seeds)."""
    pairs, level, rows = _pairs(table), settings["level"], []
    pairs = pairs.assign(inside=covered(pairs["observed"], pairs["predicted_lo"], pairs["predicted_hi"]))
    for (family, variant, quantity), mine in pairs.groupby(["family", "variant", "quantity"], sort=False):
        for option, theirs in [*mine.groupby("option", sort=False), ("every option", mine)]:
            seeds = theirs.groupby("train_seed")
            slope = seeds.apply(
                lambda seed: calibration_slope(seed["predicted"], seed["observed"]), include_groups=False
            )
            slope_estimate, slope_low, slope_high, _ = per_seed_interval(slope.to_numpy(float), level)
            coverage, coverage_low, coverage_high, count = per_seed_interval(
                seeds["inside"].mean().to_numpy(float), level
            )
            rows.append(
                {
                    "family": family,
                    "unit": loss_unit(table, family),
                    "variant": variant,
                    "quantity": quantity,
                    "option": option,
                    "points": len(theirs),
                    "mean_predicted": float(theirs["predicted"].mean()),
                    "mean_observed": float(theirs["observed"].mean()),
                    "slope": slope_estimate,
                    "slope_low": slope_low,
                    "slope_high": slope_high,
                    "coverage": coverage,
                    "coverage_low": coverage_low,
                    "coverage_high": coverage_high,
                    "seeds": count,
                }
            )
    return pd.DataFrame(rows, columns=CALIBRATION_COLUMNS)


def growth_won(table: pd.DataFrame, sesoi: float, z: float) -> pd.DataFrame:
    """Every checkpoint × procedure where some growth beat training on by at least `sesoi` (the best such point),
    its half of the seed split, whether that was beyond the outcome's noise too, and advise's decision there."""
    won = table[table["vs_train_on"] <= -sesoi].sort_values("vs_train_on")
    won = won.groupby(["family", "variant", "model"], sort=False).head(1).sort_values(["family", "variant", "model"])
    return won.assign(
        half=seed_half(won["train_seed"].to_numpy()), beyond_noise=won["vs_train_on"] < -z * won["vs_train_on_se"]
    )[WON_COLUMNS].reset_index(drop=True)


def _oriented(picked: pd.DataFrame) -> pd.Series:
    """Per seed the mean over its checkpoints of the claim's effect, oriented by its registered form: always train
    on's regret minus advise's (superiority), or advise's minus always train on's (non-inferiority)."""
    regrets = picked.pivot_table(index=["model", "train_seed"], columns="rule", values="regret").reset_index()
    difference = regrets["always_train_on"] - regrets["advise"]
    if CLAIMS[CLAIM].form == NON_INFERIORITY:
        difference = -difference
    return difference.groupby(regrets["train_seed"]).mean()


def claim_rows(
    table: pd.DataFrame, settings: dict[str, Any], this_run: str, reference: str | None = None
) -> list[dict[str, Any]]:
    """The claim judged on the confirmation half, per family (parts) and over the families (the primary row, by the
    registered quantifier), on the primary procedure; secondary rows: the exploration half and every other
    procedure, per family."""
    picked = choices(table, settings)
    picked = picked[picked["rule"].isin(["advise", "always_train_on"])]
    halves = seed_half(picked["train_seed"].to_numpy())
    primary = primary_procedure(settings)
    effect = CLAIMS[CLAIM].effect
    confirmation = picked[(halves == CONFIRMATION) & (picked["variant"] == primary)]
    families = sorted(confirmation["family"].unique())
    samples = {family: _oriented(confirmation[confirmation["family"] == family]) for family in families}
    rows = []
    if samples:
        at = look_level(CLAIM, max(len(values) for values in samples.values()), reference, settings["level"])

        def judge(level: float, plan: bool = True) -> dict[str, Judgement]:
            return {
                family: judge_samples(effect, values.to_numpy(float), level, plan) for family, values in samples.items()
            }

        judged = judge_family(CLAIM, judge, at.level, unit="families")
        note = f"procedure {primary}, confirmation half ({CONFIRMATION}: odd training seeds)"
        rows += [
            with_note(
                claim_row(
                    CLAIM,
                    judgement,
                    this_run,
                    f"{note}; {loss_unit(table, family)}",
                    scope=f"{family}, procedure {primary}",
                    role="part" if len(samples) > 1 else "primary",
                ),
                at,
            )
            for family, judgement in judged.readings.items()
        ]
        if len(samples) > 1:
            rows.append(with_note(claim_row(CLAIM, judged.claim, this_run, note, scope=judged.scope("families")), at))
    for (half, variant, family), part in picked.assign(half=halves).groupby(["half", "variant", "family"]):
        if half == CONFIRMATION and variant == primary:
            continue
        judgement = judge_samples(effect, _oriented(part).to_numpy(float), settings["level"])
        rows.append(
            claim_row(
                CLAIM,
                judgement,
                this_run,
                f"{half} half, procedure {variant}",
                role="secondary",
                scope=f"{family}, procedure {variant}, {half} half",
            )
        )
    return rows


def plot_calibration(table: pd.DataFrame, out_png: str | Path) -> None:
    """Predicted against observed gain over the S steps, one panel per family (its own unit) and procedure, one
    colour per option, the diagonal drawn."""
    pairs = _pairs(table)
    pairs = pairs[pairs["quantity"] == "gain"]
    panels = list(pairs.groupby(["family", "variant"], sort=False))
    figure, axes = plt.subplots(1, max(1, len(panels)), figsize=(4.4 * max(1, len(panels)), 4.2), squeeze=False)
    for axis, ((family, variant), part) in zip(axes[0], panels):
        for option, theirs in part.groupby("option", sort=True):
            axis.errorbar(
                theirs["predicted"],
                theirs["observed"],
                xerr=[theirs["predicted"] - theirs["predicted_lo"], theirs["predicted_hi"] - theirs["predicted"]],
                fmt="o",
                ms=3,
                lw=0.5,
                alpha=0.7,
                label=option,
            )
        finite = part[["predicted", "observed"]].to_numpy(float)
        finite = finite[np.isfinite(finite)]
        low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        axis.plot([low, high], [low, high], color="black", lw=0.8, ls="--")
        axis.set(
            xlabel=f"predicted gain ({loss_unit(table, family)})",
            ylabel="observed gain",
            title=f"{family}, procedure {variant}",
        )
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    figure.tight_layout()
    save_figure(figure, out_png)


def write_matched(out: str | Path, table: pd.DataFrame, settings: dict[str, Any]) -> dict[str, Path]:
    """matched_scorecard.csv (on every seed and on each half), calibration.csv, growth_won.csv and the calibration
    figure (the registry's stem)."""
    out = Path(out)
    paths = {
        "matched_scorecard": MATCHED_SCORECARD.path(out),
        "calibration": CALIBRATION.path(out),
        "growth_won": GROWTH_WON.path(out),
        "calibration_figure": out / ADVICE_CALIBRATION.file,
    }
    plot_calibration(table, paths["calibration_figure"])
    write_csv(scorecard_by_half(table, settings), paths["matched_scorecard"])
    write_csv(calibration(table, settings), paths["calibration"])
    write_csv(growth_won(table, REGRET_SESOI, settings["beat_z"]), paths["growth_won"])
    return paths


def score_lines(table: pd.DataFrame, settings: dict[str, Any]) -> list[str]:
    """Per family and procedure, each rule's regret, one line each."""
    card = scorecard(table, settings)
    return [
        f"{row.family} ({row.unit}), {row.variant}: regret of {row.rule} = {row.estimate:.3g}"
        + ("" if math.isnan(row.low) else f" [{row.low:.3g}, {row.high:.3g}]")
        + f" ({row.checkpoints} checkpoints)"
        for row in card[card["score"] == "regret"].itertuples()
    ]
