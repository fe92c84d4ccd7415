"""`growcert advise-check` scored: is advise's decision right, against actually growing? From the tidy table of
`stages.advise_check` (one row per checkpoint × point × variant; one checkpoint's, or several concatenated), per
variant (docs/science.md, "advise-check (is the advice right?)"):

    precision   of "grow here": the share of its points where growing beat the control beyond the outcome's own
                noise (outcome < −beat_z·se, `stats.growth_outcomes.beat`);
    miss rate   of "no evidence" and of "saturated": the share of those points where growing would have beaten it;
    gain        per checkpoint, the held-out gain (−outcome) at the point a rule picks: advise (its recommended
                point, the first of `advice.grow_candidates`, or no growth, gain 0, when it has none), and the
                baselines on the same points: largest_value (always grow at the largest first-order value, no
                certificate: the TINY/GradMax rule), random (a point drawn from the seed and the checkpoint's
                name), last (the last point);
    regret      per checkpoint and rule, the best option's gain (not growing too) minus the rule's (`regret`);
    reliability B_exact binned against the observed share of growths that made held-out loss worse.
Every score is per training seed (that seed's checkpoints alone), with a Student t interval over the per-seed scores
(`stats.growth_outcomes.per_seed_interval`): clustered by seed. One checkpoint gives one seed: no interval.

The claim (`advise_beats_first_order`): per seed, the mean over its checkpoints of advise's gain minus
largest_value's on the primary variant (PRIMARY_VARIANT), judged by `verdicts.judge_samples`.

Candidate rules (settings `advise_rule`, docs/science.md "advise-check: a rule the data suggest"): the shipped rule
never changes; a named candidate (CANDIDATE_RULES, `candidate_pick`), proposed from the exploration half of the
checkpoints, is scored beside it and the baselines (its own gain, regret and share of picks that beat the control),
and `comparison_rows` judges, per variant, its gain minus every other rule's by the referee's rule with the claim's
SESOI. Pooling (`summarize`) scores one half of the fixed split by training seed (`half`,
`stats.growth_outcomes.seed_half`) and never the tuning checkpoint S and lr were fixed on (`tuning_checkpoint`).
"""

from __future__ import annotations

import base64
import dataclasses
import html
import math
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from growcert.files import write_csv, write_text
from growcert.pipeline.artifacts import (
    ADVICE_ANSWER,
    ADVICE_CALIBRATION,
    ADVISE_CHECK_ROWS,
    CALIBRATION,
    CLAIM_ROWS,
    COMPARISON,
    GROWTH_WON,
    MATCHED_SCORECARD,
    RELIABILITY,
    RELIABILITY_FIGURE,
    SCORECARD,
)
from growcert.referee.claims import CLAIMS
from growcert.referee.looks import as_first_form, look_level, with_note
from growcert.referee.rows import claim_row, write_rows
from growcert.referee.verdicts import judge_samples
from growcert.report import advice_matched as matched
from growcert.report import labels
from growcert.report.advice import DECISIONS, GROW, grow_candidates
from growcert.report.advice_answer import answer_lines
from growcert.report.advice_tuning import is_checkpoint
from growcert.report.figures import save_figure
from growcert.report.page import figure as page_figure
from growcert.report.page import table_html
from growcert.stats.growth_outcomes import (
    EVERY_HALF,
    SPLIT_RULE,
    beat,
    per_seed_interval,
    regret,
    reliability,
    seed_half,
)

# Column lists laid out by hand: ruff format would put each column on a line of its own
# fmt: off
COLUMNS = ["model", "family", "width", "depth", "train_seed", "step", "point", "point_index", "variant", "decision",
           "value", "value_se", "value_lo", "scaled_value", "detectability", "b_exact", "outcome", "outcome_se",
           "n_outcome", "grown_loss", "control", "control_loss", "steps", "lr", "batches", "control_batches"]
RULES = ("advise", "largest_value", "random", "last")
PRIMARY_VARIANT = "new_block"  # the growth P3's first-order value measures: the block's own step, the base as it was
CLAIM = "advise_beats_first_order"
SCORE_COLUMNS = ["variant", "score", "rule", "estimate", "low", "high", "level", "seeds", "points", "interval"]
INTERVAL = "Student t over per-seed scores (clustered by training seed)"
SHIPPED = "shipped"  # advise_rule: advise's own rule, scored as rule "advise"
# Rules proposed from the exploration half (docs/science.md), scored under their own names beside the shipped one:
#   most_detectable    always grow, at the point whose mean activation gradient is most detectable (‖μ‖²/SE);
#   deepest_grow_here  advise's decisions unchanged, but grow at the deepest "grow here" point (none: no growth).
CANDIDATE_RULES = ("most_detectable", "deepest_grow_here")
ADVISE_RULES = (SHIPPED, *CANDIDATE_RULES)
COMPARISON_COLUMNS = ["variant", "candidate", "against", "role", "effect", "sesoi", "estimate", "low", "high", "level",
                      "seeds", "checkpoints", "verdict", "seeds_to_contradict", "why"]
# fmt: on


def candidate_pick(rows: pd.DataFrame, rule: str) -> int | None:
    """The position in `rows` (one checkpoint and variant, in point order) of the point candidate `rule` grows at."""
    if rule == "most_detectable":
        detectability = rows["detectability"].to_numpy(float)
        return int(np.nanargmax(detectability)) if np.isfinite(detectability).any() else None  # ties: the shallowest
    if rule == "deepest_grow_here":
        grow_here = np.flatnonzero(rows["decision"].to_numpy() == GROW)
        return int(grow_here[-1]) if len(grow_here) else None
    raise ValueError(f"advise_rule {rule!r}: one of {', '.join(ADVISE_RULES)}")


def scored_rules(settings: dict[str, Any]) -> tuple[str, ...]:
    """RULES, and the candidate `advise_rule` names when it is not the shipped rule."""
    candidate = settings["advise_rule"]
    return RULES if candidate == SHIPPED else (*RULES, candidate)


def pick(rows: pd.DataFrame, rule: str, seed: int) -> int | None:
    """The position in `rows` (one checkpoint and variant, in point order) of the point `rule` grows at; None: no
    growth."""
    if rule == "advise":
        candidates = grow_candidates(rows.reset_index(drop=True))
        return None if candidates.empty else int(candidates.index[0])
    if rule in CANDIDATE_RULES:
        return candidate_pick(rows.reset_index(drop=True), rule)
    if rule == "largest_value":
        return int(np.argmax(rows["value"].to_numpy(float)))
    if rule == "random":
        return matched.random_point(rows["model"].iloc[0], seed, len(rows))
    if rule == "last":
        return len(rows) - 1
    raise ValueError(f"rule {rule!r}: one of {', '.join(RULES + CANDIDATE_RULES)}")


def choices(table: pd.DataFrame, seed: int, rules: tuple[str, ...] = RULES) -> pd.DataFrame:
    """One row per checkpoint × variant × rule: the point chosen (empty: no growth), its gain, the regret."""
    rows = []
    for (model, variant), part in table.groupby(["model", "variant"], sort=False):
        part = part.sort_values("point_index")
        gains = -part["outcome"].to_numpy(float)
        for rule in rules:
            chosen = pick(part, rule, seed)
            rows.append(
                {
                    "model": model,
                    "variant": variant,
                    "train_seed": part["train_seed"].iloc[0],
                    "rule": rule,
                    "point": "" if chosen is None else part["point"].iloc[chosen],
                    "gain": 0.0 if chosen is None else gains[chosen],
                    "beat": bool(chosen is not None and part["beat"].iloc[chosen]),
                    "regret": regret(gains, chosen),
                }
            )
    return pd.DataFrame(rows)


def _score_row(variant: str, score: str, rule: str, per_seed: pd.Series, points: int, level: float) -> dict:
    estimate, low, high, seeds = per_seed_interval(per_seed.to_numpy(float), level)
    return {
        "variant": variant,
        "score": score,
        "rule": rule,
        "estimate": estimate,
        "low": low,
        "high": high,
        "level": level,
        "seeds": seeds,
        "points": points,
        "interval": INTERVAL,
    }


def scorecard(table: pd.DataFrame, settings: dict[str, Any]) -> pd.DataFrame:
    """Precision, miss rates, and every rule's gain, regret and share of picks that beat the control, per variant."""
    table = table.assign(beat=beat(table["outcome"], table["outcome_se"], settings["beat_z"]))
    rules = scored_rules(settings)
    picked = choices(table, settings["seed"], rules)
    level, rows = settings["level"], []
    for variant, part in table.groupby("variant", sort=False):
        for word in DECISIONS:
            words = part[part["decision"] == word]
            share = words.groupby("train_seed")["beat"].mean().reindex(part["train_seed"].unique())
            rows.append(
                _score_row(variant, "precision" if word == GROW else "miss rate", word, share, len(words), level)
            )
        mine = picked[picked["variant"] == variant]
        for rule in rules:
            theirs = mine[mine["rule"] == rule]
            per_seed = theirs.groupby("train_seed")
            grown = theirs[theirs["point"] != ""]
            rows += [
                _score_row(variant, "gain", rule, per_seed["gain"].mean(), len(theirs), level),
                _score_row(variant, "regret", rule, per_seed["regret"].mean(), len(theirs), level),
                _score_row(
                    variant,
                    "share of picks that beat the control",
                    rule,
                    grown.groupby("train_seed")["beat"].mean(),
                    len(grown),
                    level,
                ),
            ]
    return pd.DataFrame(rows, columns=SCORE_COLUMNS)


def reliability_table(table: pd.DataFrame, bins: int) -> pd.DataFrame:
    """Per variant and B_exact bin: the growths, their mean B_exact, the observed share that made held-out loss
    worse."""
    return pd.DataFrame(
        [
            {"variant": variant, **row}
            for variant, part in table.groupby("variant", sort=False)
            for row in reliability(part["b_exact"], part["outcome"] > 0, bins)
        ]
    )


def claim_judgement_rows(
    table: pd.DataFrame, settings: dict[str, Any], this_run: str, reference: str | None = None
) -> list[dict]:
    """The claim's primary row (PRIMARY_VARIANT) and a secondary row per other variant: per seed, mean over its
    checkpoints of advise's gain minus largest_value's, at the level of the claim's look in reference run `reference`
    (`growcert.referee.looks.look_level`: a judgement of seeds that the first form judged is a later look)."""
    table = table.assign(beat=beat(table["outcome"], table["outcome_se"], settings["beat_z"]))
    picked = choices(table, settings["seed"])
    rows = []
    for variant in table["variant"].unique():
        mine = (
            picked[picked["variant"] == variant]
            .pivot_table(index=["model", "train_seed"], columns="rule", values="gain")
            .reset_index()
        )
        per_seed = (mine["advise"] - mine["largest_value"]).groupby(mine["train_seed"]).mean()
        at = look_level(CLAIM, len(per_seed), reference, settings["level"])
        judgement = judge_samples(CLAIMS[CLAIM].effect, per_seed.to_numpy(float), at.level)
        rows.append(
            with_note(
                claim_row(
                    CLAIM,
                    judgement,
                    this_run,
                    f"variant {variant}; {len(mine)} checkpoints",
                    scope=f"variant {variant}",
                    role="primary" if variant == PRIMARY_VARIANT else "secondary",
                ),
                at,
            )
        )
    return rows


def first_form_rows(table: pd.DataFrame, settings: dict[str, Any], this_run: str) -> list[dict]:
    """The claim's primary row judged on the table of its first registered form (`claims.FirstForm`: the run at the
    untuned S and lr), as at its own first look, made a secondary first-form row (`looks.as_first_form`)."""
    primary = [row for row in claim_judgement_rows(table, settings, this_run) if row["role"] == "primary"]
    return [as_first_form(row, CLAIM) for row in primary]


def comparison_rows(table: pd.DataFrame, settings: dict[str, Any]) -> pd.DataFrame:
    """The candidate `advise_rule` against the shipped rule ("advise") and every baseline, per variant: per seed, the
    mean over its checkpoints of the candidate's gain minus the other rule's, judged by the referee's rule
    (`verdicts.judge_samples`) with the SESOI of the claim CLAIM. Against the shipped rule on PRIMARY_VARIANT is the
    primary row; every other row is secondary."""
    candidate = settings["advise_rule"]
    if candidate == SHIPPED:
        raise ValueError("comparison_rows needs a candidate advise_rule, not the shipped rule itself")
    table = table.assign(beat=beat(table["outcome"], table["outcome_se"], settings["beat_z"]))
    picked = choices(table, settings["seed"], (*RULES, candidate))
    rows = []
    for variant in table["variant"].unique():
        gains = (
            picked[picked["variant"] == variant]
            .pivot_table(index=["model", "train_seed"], columns="rule", values="gain")
            .reset_index()
        )
        for against in RULES:
            effect = dataclasses.replace(
                CLAIMS[CLAIM].effect, name=f"{candidate}'s held-out gain minus {against}'s (nats per example)"
            )
            per_seed = (gains[candidate] - gains[against]).groupby(gains["train_seed"]).mean()
            judged = judge_samples(effect, per_seed.to_numpy(float), settings["level"])
            rows.append(
                {
                    "variant": variant,
                    "candidate": candidate,
                    "against": against,
                    "role": "primary" if variant == PRIMARY_VARIANT and against == "advise" else "secondary",
                    "effect": effect.name,
                    "sesoi": effect.sesoi,
                    "estimate": judged.estimate,
                    "low": judged.low,
                    "high": judged.high,
                    "level": judged.level,
                    "seeds": judged.seeds,
                    "checkpoints": len(gains),
                    "verdict": judged.verdict,
                    "seeds_to_contradict": judged.seeds_to_contradict,
                    "why": judged.why,
                }
            )
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def scored_table(table: pd.DataFrame, settings: dict[str, Any]) -> tuple[pd.DataFrame, list[str]]:
    """The rows pooling scores: without the tuning checkpoint (`tuning_checkpoint`, where S and lr were fixed: never
    scored), and of one half of the seed split (`half`) unless it is EVERY_HALF; with one line per thing left out."""
    said = []
    tuning = settings["tuning_checkpoint"]
    if tuning is not None:
        is_tuning = is_checkpoint(table["model"], tuning)
        said.append(
            f"tuning checkpoint {tuning}: {int(is_tuning.sum())} rows left out"
            if is_tuning.any()
            else f"tuning checkpoint {tuning}: not among these tables"
        )
        table = table[~is_tuning]
    if settings["half"] != EVERY_HALF:
        kept = seed_half(table["train_seed"].to_numpy()) == settings["half"]
        said.append(f"{settings['half']} half ({SPLIT_RULE}): {int((~kept).sum())} rows of the other half left out")
        table = table[kept]
    return table.reset_index(drop=True), said


def plot_reliability(reliable: pd.DataFrame, out_png: str | Path) -> None:
    """Observed share of growths that made held-out loss worse against mean B_exact per bin, per variant."""
    figure, axis = plt.subplots(figsize=(4.8, 4.2))
    axis.plot([0, 1], [0, 1], color="black", lw=0.8, ls="--", label="share = B_exact")
    for variant, part in reliable.dropna(subset=["share_worse"]).groupby("variant", sort=False):
        axis.plot(part["mean_b_exact"], part["share_worse"], marker="o", label=variant)
        for _, row in part.iterrows():
            axis.annotate(
                f"{int(row['growths'])}",
                (row["mean_b_exact"], row["share_worse"]),
                fontsize=7,
                textcoords="offset points",
                xytext=(3, 3),
            )
    axis.set(
        xlim=(0, 1),
        ylim=(0, 1),
        xlabel="B_exact (bin mean)",
        ylabel="share of growths that made loss worse",
        title="reliability of B_exact (labels: growths per bin)",
    )
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    save_figure(figure, out_png)


def write_scores(
    out: str | Path,
    table: pd.DataFrame,
    settings: dict[str, Any],
    this_run: str = "advise-check",
    reference: str | None = None,
) -> dict[str, Path]:
    """reliability.png, scorecard.csv, reliability.csv, the matched-compute scores when the table carries them
    (`advice_matched.write_matched`: matched_scorecard.csv, calibration.csv, growth_won.csv, the calibration figure;
    answer.txt, the answer in words), the claim rows, artifacts.CLAIM_ROWS (the registered claims, decided on every
    checkpoint: not written for one half; at their looks' levels in reference run `reference`), comparison.csv (a
    candidate advise_rule's, when one is named), and advise_check.csv last (the table the scores come from: a folder
    holding it is complete)."""
    out = Path(out)
    paths = {
        "figure": RELIABILITY_FIGURE.path(out),
        "scorecard": SCORECARD.path(out),
        "reliability": RELIABILITY.path(out),
        "table": ADVISE_CHECK_ROWS.path(out),
    }
    reliable = reliability_table(table, settings["bins"])
    plot_reliability(reliable, paths["figure"])
    write_csv(scorecard(table, settings), paths["scorecard"])
    write_csv(reliable, paths["reliability"])
    with_matched = matched.has_matched(table)
    if with_matched:
        paths.update(matched.write_matched(out, table, settings))
        paths["answer"] = ADVICE_ANSWER.path(out)
        write_text(paths["answer"], "".join(f"{line}\n\n" for line in answer_lines(table, settings)))
    if settings["half"] == EVERY_HALF:
        paths["claims"] = CLAIM_ROWS.path(out)
        rows = claim_judgement_rows(table, settings, this_run, reference)
        rows += matched.claim_rows(table, settings, this_run, reference) if with_matched else []
        write_rows(rows, claims=paths["claims"])
    if settings["advise_rule"] != SHIPPED:
        paths["comparison"] = COMPARISON.path(out)
        write_csv(comparison_rows(table, settings), paths["comparison"])
    write_csv(table, paths["table"])
    return paths


def score_lines(table: pd.DataFrame, settings: dict[str, Any]) -> list[str]:
    """Precision of "grow here" and each rule's regret, one line each, per variant."""
    card = scorecard(table, settings)
    lines = []
    for _, row in card[card["score"].isin(["precision", "regret"])].iterrows():
        if row["points"] and not math.isnan(row["estimate"]):
            interval = "" if math.isnan(row["low"]) else f" [{row['low']:.3g}, {row['high']:.3g}]"
            counted = "points" if row["score"] == "precision" else "checkpoints"
            lines.append(
                f"{row['variant']}: {row['score']} of {row['rule']} = {row['estimate']:.3g}{interval} "
                f"({row['points']} {counted}, {row['seeds']} seed{'s' if row['seeds'] != 1 else ''})"
            )
    return lines


def terminal_summary(table: pd.DataFrame, settings: dict[str, Any]) -> str:
    """Per point and variant: advise's decision and the outcome; then precision and each rule's regret."""
    shown = table.assign(outcome=[f"{o:+.4f} ± {s:.4f}" for o, s in zip(table["outcome"], table["outcome_se"])])
    matched_lines = matched.score_lines(table, settings) if matched.has_matched(table) else []
    return "\n".join(
        [
            shown[["point", "variant", "decision", "value", "b_exact", "outcome"]].to_string(index=False),
            "",
            *score_lines(table, settings),
            *matched_lines,
        ]
    )


def comparison_lines(paths: dict[str, Path]) -> list[str]:
    """One line per row of the comparison.csv in `paths` (none when there is none)."""
    if "comparison" not in paths:
        return []
    return [
        f"{row.variant}: {row.candidate} minus {row.against}, gain {row.estimate:+.4g} [{row.low:+.4g}, "
        f"{row.high:+.4g}] ({row.seeds} seeds, {row.role}): {row.verdict}"
        for row in pd.read_csv(paths["comparison"]).itertuples()
    ]


ADVICE_SECTION = ("advice", "Is the advice right?")
ADVICE_REFERENCE = "advise-check"  # the reference run (docs/reference-results/advise-check) the section shows


def advice_section(references: Path | None) -> str:
    """The report's "Is the advice right?" section: the advise-check reference run's scorecard, its reliability
    figure and the claim's verdict (its folder under `references`), or how to make it when it is not there."""
    folder = None if references is None else Path(references) / ADVICE_REFERENCE
    command = "snakemake summarize_advise_check --configfile configs/advise-check.yaml --cores 2"
    if folder is None or not SCORECARD.path(folder).is_file():
        return (
            f'<section id="{ADVICE_SECTION[0]}"><h2>{ADVICE_SECTION[1]}</h2><p>The advise-check reference run '
            f"(every advise decision scored against actually growing) is not in this report: <code>{command}"
            f"</code> makes it; <code>growcert advise-check --model M --data D --out DIR</code> checks one model."
            "</p></section>"
        )
    parts = [
        f"<p>Reference run <code>{ADVICE_REFERENCE}</code> (not this pipeline run): every checkpoint advised, then "
        "grown for real at every insertion point beside its no-growth control on the same batches, scored on "
        "held-out examples advise never saw; each score with a t interval over training seeds.</p>"
    ]
    claims = CLAIM_ROWS.path(folder)
    if claims.is_file():
        for row in pd.read_csv(claims).itertuples():
            parts.append(
                f"<p><b>{html.escape(str(row.claim))}</b> [{html.escape(str(row.role))}]: "
                f"<b>{html.escape(str(row.verdict))}</b>, {row.estimate:+.4g} [{row.low:+.4g}, {row.high:+.4g}] "
                f"({row.seeds} seeds; SESOI {html.escape(str(row.sesoi))}). {html.escape(str(row.why))}</p>"
            )
    answer = ADVICE_ANSWER.path(folder)
    if answer.is_file():
        said = [part for part in answer.read_text(encoding="utf-8").split("\n\n") if part.strip()]
        parts[:0] = ["<p><b>The measured answer.</b></p>", *(f"<p>{html.escape(part)}</p>" for part in said)]
    parts += _matched_parts(folder)
    parts.append("<h3>Scorecard of the first-order reading</h3>" + table_html(pd.read_csv(SCORECARD.path(folder))))
    figure = RELIABILITY_FIGURE.path(folder)
    if figure.is_file():
        encoded = base64.b64encode(figure.read_bytes()).decode()
        parts.append(
            f'<figure><img alt="reliability of B_exact" src="data:image/png;base64,{encoded}"><figcaption>'
            "<b>Reliability.</b> B_exact (binned) against the observed share of growths that made held-out "
            "loss worse: a calibrated certificate lies on or above the diagonal.</figcaption></figure>"
        )
    return f'<section id="{ADVICE_SECTION[0]}"><h2>{ADVICE_SECTION[1]}</h2>{"".join(parts)}</section>'


def _matched_parts(folder: Path) -> list[str]:
    """The matched-compute part of the section (when the reference run has it): the scorecard per family, the
    calibration figure and table, and the checkpoints where growth beat training on with advise's word there."""
    if not MATCHED_SCORECARD.path(folder).is_file():
        return [
            "<p>This reference run predates the matched-compute scorecard (advise's options against always training "
            "on, per family): rerun it to see whether advise beats training on.</p>"
        ]
    parts = [
        "<h3>At matched compute: advise against always training on, per family</h3><p>Every option (train on, "
        "grow at each point) trained the same S steps on the same batches; regret is the best option's observed "
        "gain minus the chosen one's, in each family's own unit (never pooled).</p>",
        table_html(pd.read_csv(MATCHED_SCORECARD.path(folder))),
    ]
    figure = folder / ADVICE_CALIBRATION.file
    if figure.is_file():
        parts.append(page_figure(figure, labels.title(ADVICE_CALIBRATION.stem)))
    parts.append("<h3>Calibration</h3>" + table_html(pd.read_csv(CALIBRATION.path(folder))))
    won = pd.read_csv(GROWTH_WON.path(folder))
    parts.append(
        f"<h3>Where growth beat training on (by the SESOI or more): {len(won)} checkpoint × procedure "
        "rows, with advise's word at each</h3>" + table_html(won)
    )
    return parts
